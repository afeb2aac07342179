// Small DOM helpers. Every value from the API is written as text, never as HTML.

import { state } from './state.js';

/** @param {string} id */
export const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id));

/** @param {string} tag @param {Record<string, string>} [attributes] @param {(Node | string)[]} [children] */
export function el(tag, attributes = {}, children = []) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  node.append(...children);
  return node;
}

/** A button whose accessible name says what it acts on ("Edit https://…"), its visible text short. */
export function actionButton(label, target, action) {
  return el('button', { type: 'button', 'data-action': action }, [label, el('span', { class: 'visually-hidden' }, [` ${target}`])]);
}

export function time(iso) {
  if (!iso) return el('span', { class: 'muted' }, ['—']);
  const date = new Date(iso);
  return el('time', { datetime: iso }, [Number.isNaN(date.getTime()) ? iso : date.toLocaleString()]);
}

export function badge(text, kind) {
  return el('span', { class: `badge ${kind}` }, [text]);
}

/** A status message, in the open dialog's live region if one is open (the page behind is inert). */
export function say(message) {
  const open = document.querySelector('dialog[open]');
  const region = open?.querySelector('[role="status"]') ?? $('status');
  region.textContent = '';
  // Emptied, then written a moment later: a repeated message is announced again (a timer, not
  // requestAnimationFrame, which waits while the tab is in the background).
  setTimeout(() => (region.textContent = message), 30);
}

/** An action's failure, said where the user is; after a 401 the page has said why already. */
export function failed(what, error) {
  if (state.ended) return;
  say(`${what} failed: ${error instanceof Error ? error.message : String(error)}`);
}

/**
 * Marks a button busy while its request runs; false if it was busy already (a second click).
 * aria-disabled rather than disabled: a disabled button drops the keyboard focus to the page.
 */
export function claim(button) {
  if (button.getAttribute('aria-disabled') === 'true') return false;
  button.setAttribute('aria-disabled', 'true');
  return true;
}

export function release(button) {
  button.removeAttribute('aria-disabled');
}

/** Re-renders a table keeping the focus on the same action of the same row, if it still exists. */
export function keepFocus(render) {
  const active = /** @type {HTMLElement | null} */ (document.activeElement);
  const row = active?.closest('tr')?.getAttribute('data-id');
  const action = active?.getAttribute('data-action');
  render();
  if (row && action) /** @type {HTMLElement | null} */ (document.querySelector(`tr[data-id="${CSS.escape(row)}"] [data-action="${CSS.escape(action)}"]`))?.focus();
}

/** @param {string} id */
export function dialog(id) {
  return /** @type {HTMLDialogElement} */ ($(id));
}

/** @param {string} id */
export function input(id) {
  return /** @type {HTMLInputElement} */ ($(id));
}

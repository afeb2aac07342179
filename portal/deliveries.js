// Deliveries: newest first, filtered, a page at a time; one delivery's attempts; replay.

import { api } from './api.js';
import { $, actionButton, badge, claim, dialog, el, failed, keepFocus, release, say, time } from './dom.js';
import { endpointLabel, state } from './state.js';

const PAGE_SIZE = 25;
/** After a replay or a test event: how often, and how many times, the delivery is read again. */
const FOLLOW_EVERY_MS = 1000;
const FOLLOW_TIMES = 30;

/** An attempt's outcome in words (the API's codes). */
const OUTCOMES = {
  delivered: 'Delivered',
  http_status: 'Error status',
  timeout: 'Timed out',
  connect: 'Could not connect',
  refused_address: 'Address not allowed',
  redirect: 'Redirect (not followed)',
  network: 'Connection failed',
};

/** The first page (reset) or the next one, by the API's cursor. */
export async function loadDeliveries(reset) {
  const query = { endpointId: state.filter.endpointId, status: state.filter.status, limit: PAGE_SIZE, cursor: reset ? null : state.cursor };
  const page = await api('GET', 'deliveries', { query });
  state.deliveries = reset ? page.data : [...state.deliveries, ...page.data];
  state.cursor = page.nextCursor ?? null;
  keepFocus(renderDeliveries);
}

function renderDeliveries() {
  const rows = state.deliveries.map(deliveryRow);
  $('deliveries-body').replaceChildren(...rows);
  $('deliveries-table').hidden = rows.length === 0;
  $('deliveries-empty').hidden = rows.length !== 0;
  $('load-more').hidden = !state.cursor;
}

function deliveryRow(delivery) {
  const last = delivery.lastAttempt;
  const attempts = `${delivery.attemptCount}${last?.statusCode ? ` (last ${last.statusCode})` : last?.error ? ' (last: error)' : ''}`;
  return el('tr', { 'data-id': delivery.id, 'data-status': delivery.status }, [
    el('td', {}, [time(delivery.createdAt)]),
    el('td', {}, [delivery.eventType]),
    el('td', { class: 'mono' }, [delivery.eventId]),
    el('td', { class: 'url' }, [endpointLabel(delivery.endpointId)]),
    el('td', {}, [badge(delivery.status, delivery.status)]),
    el('td', {}, [attempts]),
    el('td', {}, [actionButton('Details', `of delivery ${delivery.id}`, 'details')]),
  ]);
}

async function openDelivery(id) {
  state.openDelivery = id;
  $('delivery-status').textContent = '';
  $('delivery-facts').replaceChildren();
  $('attempts-body').replaceChildren();
  $('attempts-table').hidden = true;
  $('attempts-empty').hidden = true;
  dialog('delivery-dialog').showModal();
  $('delivery-close').focus();
  await showDelivery(id);
}

/** Reads a delivery and its attempts into the dialog (if it still shows it) and the list. */
async function showDelivery(id) {
  const [delivery, attempts] = await Promise.all([api('GET', `deliveries/${encodeURIComponent(id)}`), api('GET', `deliveries/${encodeURIComponent(id)}/attempts`)]);
  const index = state.deliveries.findIndex((d) => d.id === id);
  if (index >= 0) {
    state.deliveries[index] = delivery;
    keepFocus(renderDeliveries);
  }
  if (state.openDelivery !== id) return delivery;
  const facts = [
    ['Delivery', delivery.id],
    ['Event', delivery.eventId],
    ['Event type', delivery.eventType],
    ['Endpoint', endpointLabel(delivery.endpointId)],
    ['Status', badge(delivery.status, delivery.status)],
    ['Attempts', String(delivery.attemptCount)],
    ['Next attempt', time(delivery.nextAttemptAt)],
    ['Created', time(delivery.createdAt)],
    ['Finished', time(delivery.finishedAt)],
  ];
  $('delivery-facts').replaceChildren(...facts.flatMap(([term, value]) => [el('dt', {}, [term]), el('dd', {}, [value])]));
  const rows = attempts.data.map((attempt) =>
    el('tr', {}, [
      el('td', { class: 'at' }, [time(attempt.at)]),
      el('td', { class: 'outcome' }, [OUTCOMES[attempt.outcome] ?? attempt.outcome ?? '']),
      el('td', { class: 'status-code' }, [attempt.statusCode === null ? el('span', { class: 'muted' }, ['none']) : String(attempt.statusCode)]),
      el('td', { class: 'latency' }, [attempt.latencyMs === null ? '—' : `${attempt.latencyMs} ms`]),
      el('td', { class: 'error' }, [attempt.error ?? '']),
      el('td', { class: 'response' }, [attempt.responseSnippet ? el('pre', { class: 'snippet' }, [attempt.responseSnippet]) : el('span', { class: 'muted' }, ['(empty)'])]),
    ]),
  );
  $('attempts-body').replaceChildren(...rows);
  $('attempts-table').hidden = rows.length === 0;
  $('attempts-empty').hidden = rows.length !== 0;
  return delivery;
}

async function replayOpenDelivery() {
  const id = state.openDelivery;
  const button = $('delivery-replay');
  if (!id || !claim(button)) return;
  try {
    const before = state.deliveries.find((d) => d.id === id)?.attemptCount ?? 0;
    await api('POST', `deliveries/${encodeURIComponent(id)}/replay`, { body: {} });
    say('Replay queued: sending it again now.');
    await follow(id, before);
  } catch (error) {
    failed('Replay', error);
  } finally {
    release(button);
  }
}

/**
 * Reads a delivery again until an attempt after `attemptsBefore` has an outcome (or -1: until it
 * is no longer pending), and says how it ended.
 */
export async function follow(id, attemptsBefore) {
  for (let i = 0; i < FOLLOW_TIMES && !state.ended; i += 1) {
    await new Promise((resolve) => setTimeout(resolve, FOLLOW_EVERY_MS));
    const delivery = await showDelivery(id);
    if (delivery.status !== 'pending' && delivery.attemptCount > attemptsBefore) {
      if (state.openDelivery === id || attemptsBefore === -1) say(delivery.status === 'delivered' ? `Delivered (delivery ${id}).` : `Delivery ${id} ${delivery.status}: see its attempts.`);
      return;
    }
  }
}

export function wireDeliveries() {
  $('delivery-filter').addEventListener('submit', (event) => {
    event.preventDefault();
    state.filter = { endpointId: /** @type {HTMLSelectElement} */ ($('filter-endpoint')).value, status: /** @type {HTMLSelectElement} */ ($('filter-status')).value };
    loadDeliveries(true).then(() => say(`${state.deliveries.length} deliveries shown.`), (error) => failed('Loading deliveries', error));
  });
  $('refresh-deliveries').addEventListener('click', () => loadDeliveries(true).then(() => say('Deliveries refreshed.'), (error) => failed('Refreshing', error)));
  $('load-more').addEventListener('click', () => {
    const shown = state.deliveries.length;
    loadDeliveries(false).then(
      () => {
        say(`${state.deliveries.length - shown} more deliveries shown.`);
        // Focus on the first new row's button, where reading continues.
        /** @type {HTMLElement | null} */ ($('deliveries-body').children[shown]?.querySelector('button'))?.focus();
      },
      (error) => failed('Loading more', error),
    );
  });
  $('deliveries-body').addEventListener('click', (event) => {
    const row = /** @type {HTMLElement} */ (event.target).closest('button[data-action="details"]')?.closest('tr');
    const id = row?.getAttribute('data-id');
    if (id) openDelivery(id).catch((error) => failed('Loading the delivery', error));
  });
  $('delivery-replay').addEventListener('click', () => void replayOpenDelivery());
  $('delivery-refresh').addEventListener('click', () => state.openDelivery && showDelivery(state.openDelivery).then(() => say('Refreshed.'), (error) => failed('Refreshing', error)));
  $('delivery-close').addEventListener('click', () => dialog('delivery-dialog').close());
  $('delivery-dialog').addEventListener('close', () => {
    const id = state.openDelivery;
    state.openDelivery = null;
    // The dialog gives the focus back to its opener, unless the list was redrawn meanwhile (a
    // replay followed): then to the same delivery's Details button in the new list.
    setTimeout(() => {
      if (id && (document.activeElement === document.body || document.activeElement === null)) {
        /** @type {HTMLElement | null} */ (document.querySelector(`#deliveries-body tr[data-id="${CSS.escape(id)}"] [data-action="details"]`))?.focus();
      }
    });
  });
}

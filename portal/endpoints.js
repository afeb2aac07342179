// Endpoints: the list, the add and edit form (event types from those the stage has seen), the
// secret shown once (after an add and a rotation), disable/enable and a test event.

import { api, randomKey } from './api.js';
import { follow, loadDeliveries } from './deliveries.js';
import { $, actionButton, badge, claim, dialog, el, failed, input, keepFocus, release, say, time } from './dom.js';
import { state } from './state.js';

const form = {
  /** The endpoint being edited; null: adding one. @type {any} */ editing: null,
  /** One per opened add form: a second submit of the same form creates nothing new. */
  idempotencyKey: '',
};

export async function loadEndpoints() {
  const endpoints = [];
  let cursor = null;
  do {
    const page = await api('GET', 'endpoints', { query: { cursor, limit: 100 } });
    endpoints.push(...page.data);
    cursor = page.nextCursor ?? null;
  } while (cursor);
  state.endpoints = endpoints;
  keepFocus(renderEndpoints);
  renderEndpointFilter();
}

function renderEndpoints() {
  const rows = state.endpoints.map((endpoint) => {
    const stateCell = endpoint.disabled
      ? el('td', {}, [badge('Disabled', 'disabled'), ...(endpoint.disabledReason ? [el('div', { class: 'help' }, [endpoint.disabledReason])] : [])])
      : el('td', {}, [badge('Enabled', 'enabled'), ...(endpoint.failingSince ? [el('div', { class: 'help' }, ['Failing since ', time(endpoint.failingSince)])] : [])]);
    return el('tr', { 'data-id': endpoint.id }, [
      el('td', { class: 'url' }, [endpoint.url, el('div', { class: 'help mono' }, [endpoint.id])]),
      el('td', {}, [el('code', {}, [endpoint.eventTypes.join(', ')])]),
      el('td', {}, [endpoint.description ?? '']),
      stateCell,
      el('td', {}, [
        el('div', { class: 'row-actions' }, [
          actionButton('Edit', endpoint.url, 'edit'),
          actionButton(endpoint.disabled ? 'Enable' : 'Disable', endpoint.url, 'toggle'),
          actionButton('Rotate secret', endpoint.url, 'rotate'),
          actionButton('Send test event', endpoint.url, 'test'),
          actionButton('Deliveries', endpoint.url, 'deliveries'),
        ]),
      ]),
    ]);
  });
  $('endpoints-body').replaceChildren(...rows);
  $('endpoints-table').hidden = rows.length === 0;
  $('endpoints-empty').hidden = rows.length !== 0;
}

function renderEndpointFilter() {
  const select = /** @type {HTMLSelectElement} */ ($('filter-endpoint'));
  const options = [el('option', { value: '' }, ['All endpoints']), ...state.endpoints.map((e) => el('option', { value: e.id }, [e.description ? `${e.description} (${e.url})` : e.url]))];
  select.replaceChildren(...options);
  select.value = state.endpoints.some((e) => e.id === state.filter.endpointId) ? state.filter.endpointId : '';
}

export async function loadEventTypes() {
  try {
    const page = await api('GET', 'event-types');
    state.eventTypes = page.data.map((type) => type.name).sort();
  } catch {
    // The form still takes typed patterns.
    state.eventTypes = [];
  }
}

function openEndpointForm(endpoint) {
  form.editing = endpoint;
  form.idempotencyKey = randomKey();
  /** @type {HTMLFormElement} */ ($('endpoint-form')).reset();
  $('endpoint-dialog-title').textContent = endpoint ? 'Edit endpoint' : 'Add endpoint';
  $('endpoint-save').textContent = endpoint ? 'Save' : 'Add endpoint';
  $('endpoint-error').hidden = true;
  const chosen = new Set(endpoint?.eventTypes ?? []);
  const boxes = state.eventTypes.map((name, i) =>
    el('label', {}, [el('input', { type: 'checkbox', name: 'eventType', value: name, id: `event-type-${i}`, ...(chosen.has(name) && { checked: '' }) }), name]),
  );
  $('endpoint-types-list').replaceChildren(...(boxes.length ? boxes : [el('p', { class: 'help' }, ['No event types seen yet: type the ones you want below.'])]));
  input('endpoint-url').value = endpoint?.url ?? '';
  input('endpoint-description').value = endpoint?.description ?? '';
  input('endpoint-patterns').value = [...chosen].filter((type) => !state.eventTypes.includes(type)).join(', ');
  dialog('endpoint-dialog').showModal();
  $('endpoint-url').focus();
}

async function saveEndpoint(event) {
  event.preventDefault();
  const url = input('endpoint-url').value.trim();
  const description = input('endpoint-description').value.trim();
  const checked = [...$('endpoint-form').querySelectorAll('input[name="eventType"]:checked')].map((box) => /** @type {HTMLInputElement} */ (box).value);
  const typed = input('endpoint-patterns').value.split(',').map((type) => type.trim()).filter(Boolean);
  const eventTypes = [...new Set([...checked, ...typed])];
  const problem = !url ? 'Enter the endpoint’s URL.' : eventTypes.length === 0 ? 'Choose at least one event type.' : null;
  if (problem) return formError(problem, !url ? 'endpoint-url' : 'endpoint-patterns');
  const save = $('endpoint-save');
  if (!claim(save)) return;
  try {
    if (form.editing) {
      await api('PATCH', `endpoints/${encodeURIComponent(form.editing.id)}`, { body: { url, eventTypes, description: description || null } });
      dialog('endpoint-dialog').close();
      say(`Endpoint ${url} saved.`);
      await loadEndpoints();
    } else {
      const created = await api('POST', 'endpoints', { body: { url, eventTypes, ...(description && { description }) }, idempotencyKey: form.idempotencyKey });
      dialog('endpoint-dialog').close();
      await loadEndpoints();
      showSecret(created, `Endpoint ${url} added.`);
    }
  } catch (error) {
    if (!state.ended) formError(error instanceof Error ? error.message : String(error));
  } finally {
    release(save);
  }
}

function formError(message, focusId) {
  const box = $('endpoint-error');
  box.textContent = message;
  box.hidden = false;
  if (focusId) $(focusId).focus();
}

function showSecret(endpoint, message) {
  $('secret-endpoint').textContent = endpoint.url;
  const secret = input('secret-value');
  secret.value = endpoint.secret;
  $('secret-status').textContent = '';
  dialog('secret-dialog').showModal();
  secret.focus();
  secret.select();
  say(`${message} Its signing secret is shown once: store it now.`);
}

async function copySecret() {
  const secret = input('secret-value');
  try {
    await navigator.clipboard.writeText(secret.value);
  } catch {
    // No clipboard API (a page not served over HTTPS): the selection, for Ctrl+C.
    secret.focus();
    secret.select();
    say('Selected: press Ctrl+C (⌘C) to copy.');
    return;
  }
  say('Copied.');
}

async function onEndpointAction(event) {
  const button = /** @type {HTMLElement} */ (event.target).closest('button[data-action]');
  const id = button?.closest('tr')?.getAttribute('data-id');
  const endpoint = state.endpoints.find((e) => e.id === id);
  if (!button || !endpoint) return;
  const path = `endpoints/${encodeURIComponent(endpoint.id)}`;
  const action = button.getAttribute('data-action');
  if (action === 'edit') return openEndpointForm(endpoint);
  if (action === 'deliveries') {
    state.filter = { ...state.filter, endpointId: endpoint.id };
    /** @type {HTMLSelectElement} */ ($('filter-endpoint')).value = endpoint.id;
    return loadDeliveries(true).then(() => $('filter-endpoint').focus(), (error) => failed('Loading deliveries', error));
  }
  if (!claim(button)) return;
  try {
    if (action === 'toggle') {
      await api('POST', `${path}/${endpoint.disabled ? 'enable' : 'disable'}`, { body: endpoint.disabled ? {} : { reason: 'disabled in the portal' } });
      await loadEndpoints();
      say(`Endpoint ${endpoint.url} ${endpoint.disabled ? 'enabled: deliveries resume' : 'disabled: nothing is sent to it until you enable it'}.`);
    } else if (action === 'rotate') {
      if (!confirm(`Rotate the signing secret of ${endpoint.url}? Webhooks are signed with the new secret and, for 24 hours, the current one too: switch your endpoint to the new one within that time.`)) return;
      const rotated = await api('POST', `${path}/rotate-secret`, { body: {} });
      await loadEndpoints();
      showSecret({ ...endpoint, ...rotated }, `The secret of ${endpoint.url} was rotated.`);
    } else if (action === 'test') {
      const sent = await api('POST', `${path}/test`, { body: {} });
      say(`Test event queued for ${endpoint.url}; it appears in the deliveries below.`);
      await loadDeliveries(true);
      if (sent?.deliveryId) void follow(sent.deliveryId, -1);
    }
  } catch (error) {
    failed(button.textContent ?? 'The action', error);
  } finally {
    release(button);
  }
}

export function wireEndpoints() {
  $('add-endpoint').addEventListener('click', () => openEndpointForm(null));
  $('endpoint-form').addEventListener('submit', (event) => void saveEndpoint(event));
  $('endpoint-cancel').addEventListener('click', () => dialog('endpoint-dialog').close());
  $('endpoints-body').addEventListener('click', (event) => void onEndpointAction(event));
  $('secret-copy').addEventListener('click', () => void copySecret());
  $('secret-close').addEventListener('click', () => {
    input('secret-value').value = '';
    dialog('secret-dialog').close();
  });
  // The secret leaves the page with its dialog, Escape included.
  $('secret-dialog').addEventListener('close', () => (input('secret-value').value = ''));
}

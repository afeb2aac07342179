// The customer portal: one customer's webhook endpoints and deliveries, through the webhooks API
// with the customer token of the link the platform sent. A plain ES module, no framework and no
// build step; served under the API's CSP (default-src 'self'): no inline script or style, and
// every value from the API is written as text, never as HTML.

const TOKEN_KEY = 'outbox-relay.portal.token';
/** The API beside the portal: /portal/ → /v1/ (also behind a proxy that adds a path prefix). */
const API = new URL('../v1/', document.baseURI);
const PAGE_SIZE = 25;
/** After a replay or a test event: how often, and how many times, the delivery is read again. */
const FOLLOW_EVERY_MS = 1000;
const FOLLOW_TIMES = 30;

const EXPIRED = 'WEBHOOK_API_TOKEN_EXPIRED';

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

/** @param {string} id */
const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id));

class ApiError extends Error {
  /** @param {number} status @param {string} code @param {string} message */
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const state = {
  /** @type {string | null} */ token: null,
  /** @type {any[]} */ endpoints: [],
  /** @type {string[]} */ eventTypes: [],
  /** @type {any[]} */ deliveries: [],
  /** @type {string | null} */ cursor: null,
  filter: { endpointId: '', status: '' },
  /** The endpoint being edited; null: adding one. @type {any} */ editing: null,
  /** One per opened add form: a second submit of the same form creates nothing new. */
  idempotencyKey: '',
  /** The delivery shown in the dialog. @type {string | null} */ openDelivery: null,
  ended: false,
  /** The server's clock minus this machine's. */
  clockOffsetMs: 0,
};

// ---- The token: from the link's fragment (never sent to a server) into this tab's storage. ----

function takeToken() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const fromLink = fragment.get('token');
  if (fromLink) {
    try {
      sessionStorage.setItem(TOKEN_KEY, fromLink);
    } catch {
      // Storage refused (a private mode): the token lives in this page only.
    }
    // Out of the address bar, the history and any bookmark or screenshot of the page.
    history.replaceState(null, '', location.pathname + location.search);
    return fromLink;
  }
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

function forgetToken() {
  state.token = null;
  try {
    sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // Nothing stored.
  }
}

// ---- The API. ----

/**
 * @param {string} method
 * @param {string} path relative to /v1/
 * @param {{ query?: Record<string, string | number | null | undefined>, body?: unknown, idempotencyKey?: string }} [options]
 */
async function api(method, path, options = {}) {
  if (!state.token) throw new ApiError(401, 'WEBHOOK_API_UNAUTHORIZED', 'No access link.');
  const url = new URL(path, API);
  for (const [name, value] of Object.entries(options.query ?? {})) if (value !== undefined && value !== null && value !== '') url.searchParams.set(name, String(value));
  /** @type {Record<string, string>} */
  const headers = { authorization: `Bearer ${state.token}`, accept: 'application/json' };
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  if (options.idempotencyKey) headers['idempotency-key'] = options.idempotencyKey;
  let response;
  try {
    response = await fetch(url, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body), cache: 'no-store', credentials: 'omit' });
  } catch {
    throw new ApiError(0, 'NETWORK', 'The server could not be reached. Check your connection and try again.');
  }
  // The server's clock, for the link's expiry (a second's resolution; this machine's may be off by more).
  const serverDate = Date.parse(response.headers.get('date') ?? '');
  if (Number.isFinite(serverDate)) state.clockOffsetMs = serverDate - Date.now();
  const text = await response.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    // Not JSON: a proxy's page; the status says enough.
  }
  if (response.ok) return json;
  const code = json?.error?.code ?? `HTTP_${response.status}`;
  let message = json?.error?.message ?? `The server answered ${response.status}.`;
  if (response.status === 429) {
    const wait = response.headers.get('retry-after');
    message = `Too many requests${wait ? `: try again in ${wait} s` : ': try again shortly'}.`;
  }
  if (response.status === 401) endSession(code);
  throw new ApiError(response.status, code, message);
}

/** 16 random bytes as hex: crypto.randomUUID needs a secure context, getRandomValues does not. */
function randomKey() {
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (byte) => byte.toString(16).padStart(2, '0')).join('');
}

// ---- Messages. ----

/** A status message, in the open dialog's live region if one is open (the page behind is inert). */
function say(message) {
  const open = /** @type {HTMLDialogElement | null} */ (document.querySelector('dialog[open]'));
  const region = open?.querySelector('[role="status"]') ?? $('status');
  region.textContent = '';
  // Emptied, then written a moment later: a repeated message is announced again (a timer, not
  // requestAnimationFrame, which waits while the tab is in the background).
  setTimeout(() => (region.textContent = message), 30);
}

/** An action's failure, said where the user is; a 401 has ended the session already. */
function failed(what, error) {
  if (state.ended) return;
  say(`${what} failed: ${error instanceof Error ? error.message : String(error)}`);
}

/** Ends the session: the token forgotten, every shown object removed, one clear message. */
function endSession(code) {
  if (state.ended) return;
  state.ended = true;
  forgetToken();
  for (const dialog of document.querySelectorAll('dialog[open]')) /** @type {HTMLDialogElement} */ (dialog).close();
  state.endpoints = [];
  state.deliveries = [];
  $('endpoints-body').replaceChildren();
  $('deliveries-body').replaceChildren();
  $('app').hidden = true;
  $('loading').hidden = true;
  $('who').hidden = true;
  $('status').textContent = '';
  const alert = $('alert');
  if (code === EXPIRED) showAlert('This link has expired — ask for a new one.', 'For your security, links to this page work for a limited time. Ask the service that sent it to you for a new link.');
  else if (code === 'NO_TOKEN') showAlert('No access link.', 'Open this page from the link you were given, or ask for a new one.');
  else if (code === 'PLATFORM') showAlert("This page is for a customer's link.", 'Mint a customer link with POST /v1/customer-tokens and open its portalUrl.');
  else showAlert('This link is not valid — ask for a new one.', 'It may have been copied incompletely, or it was replaced.');
  alert.tabIndex = -1;
  alert.focus();
}

function showAlert(title, detail) {
  const alert = $('alert');
  const strong = document.createElement('p');
  strong.textContent = title;
  const more = document.createElement('p');
  more.className = 'detail';
  more.textContent = detail;
  alert.replaceChildren(strong, more);
  alert.hidden = false;
}

// ---- Small DOM helpers. ----

/** @param {string} tag @param {Record<string, string>} [attributes] @param {(Node | string)[]} [children] */
function el(tag, attributes = {}, children = []) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  node.append(...children);
  return node;
}

/** A button whose accessible name says what it acts on ("Edit https://…"), its visible text short. */
function actionButton(label, target, action, attributes = {}) {
  return el('button', { type: 'button', 'data-action': action, ...attributes }, [label, el('span', { class: 'visually-hidden' }, [` ${target}`])]);
}

function time(iso) {
  if (!iso) return el('span', { class: 'muted' }, ['—']);
  const date = new Date(iso);
  return el('time', { datetime: iso }, [Number.isNaN(date.getTime()) ? iso : date.toLocaleString()]);
}

function badge(text, kind) {
  return el('span', { class: `badge ${kind}` }, [text]);
}

function endpointLabel(endpointId) {
  return state.endpoints.find((e) => e.id === endpointId)?.url ?? endpointId;
}

/**
 * Marks a button busy while its request runs; false if it was busy already (a second click).
 * aria-disabled rather than disabled: a disabled button drops the keyboard focus to the page.
 */
function claim(button) {
  if (button.getAttribute('aria-disabled') === 'true') return false;
  button.setAttribute('aria-disabled', 'true');
  return true;
}

function release(button) {
  button.removeAttribute('aria-disabled');
}

/** After re-rendering a table: focus back on the same action of the same row, if it still exists. */
function keepFocus(render) {
  const active = /** @type {HTMLElement | null} */ (document.activeElement);
  const row = active?.closest('tr')?.getAttribute('data-id');
  const action = active?.getAttribute('data-action');
  render();
  if (row && action) /** @type {HTMLElement | null} */ (document.querySelector(`tr[data-id="${CSS.escape(row)}"] [data-action="${CSS.escape(action)}"]`))?.focus();
}

// ---- Endpoints. ----

async function loadEndpoints() {
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

async function loadEventTypes() {
  try {
    const page = await api('GET', 'event-types');
    state.eventTypes = page.data.map((type) => type.name).sort();
  } catch {
    // The form still takes typed patterns.
    if (!state.ended) state.eventTypes = [];
  }
}

function openEndpointForm(endpoint) {
  state.editing = endpoint;
  state.idempotencyKey = randomKey();
  const dialog = /** @type {HTMLDialogElement} */ ($('endpoint-dialog'));
  const form = /** @type {HTMLFormElement} */ ($('endpoint-form'));
  form.reset();
  $('endpoint-dialog-title').textContent = endpoint ? 'Edit endpoint' : 'Add endpoint';
  $('endpoint-save').textContent = endpoint ? 'Save' : 'Add endpoint';
  $('endpoint-error').hidden = true;
  const chosen = new Set(endpoint?.eventTypes ?? []);
  const boxes = state.eventTypes.map((name, i) =>
    el('label', {}, [el('input', { type: 'checkbox', name: 'eventType', value: name, id: `event-type-${i}`, ...(chosen.has(name) && { checked: '' }) }), name]),
  );
  $('endpoint-types-list').replaceChildren(...(boxes.length ? boxes : [el('p', { class: 'help' }, ['No event types seen yet: type the ones you want below.'])]));
  /** @type {HTMLInputElement} */ ($('endpoint-url')).value = endpoint?.url ?? '';
  /** @type {HTMLInputElement} */ ($('endpoint-description')).value = endpoint?.description ?? '';
  /** @type {HTMLInputElement} */ ($('endpoint-patterns')).value = [...chosen].filter((type) => !state.eventTypes.includes(type)).join(', ');
  dialog.showModal();
  $('endpoint-url').focus();
}

async function saveEndpoint(event) {
  event.preventDefault();
  const form = /** @type {HTMLFormElement} */ ($('endpoint-form'));
  const url = /** @type {HTMLInputElement} */ ($('endpoint-url')).value.trim();
  const description = /** @type {HTMLInputElement} */ ($('endpoint-description')).value.trim();
  const checked = [...form.querySelectorAll('input[name="eventType"]:checked')].map((box) => /** @type {HTMLInputElement} */ (box).value);
  const typed = /** @type {HTMLInputElement} */ ($('endpoint-patterns')).value.split(',').map((type) => type.trim()).filter(Boolean);
  const eventTypes = [...new Set([...checked, ...typed])];
  const problem = !url ? 'Enter the endpoint’s URL.' : eventTypes.length === 0 ? 'Choose at least one event type.' : null;
  if (problem) return formError(problem, !url ? 'endpoint-url' : 'endpoint-patterns');
  const save = $('endpoint-save');
  if (!claim(save)) return;
  try {
    if (state.editing) {
      await api('PATCH', `endpoints/${encodeURIComponent(state.editing.id)}`, { body: { url, eventTypes, description: description || null } });
      /** @type {HTMLDialogElement} */ ($('endpoint-dialog')).close();
      say(`Endpoint ${url} saved.`);
      await loadEndpoints();
    } else {
      const created = await api('POST', 'endpoints', { body: { url, eventTypes, ...(description && { description }) }, idempotencyKey: state.idempotencyKey });
      /** @type {HTMLDialogElement} */ ($('endpoint-dialog')).close();
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
  const input = /** @type {HTMLInputElement} */ ($('secret-value'));
  input.value = endpoint.secret;
  $('secret-status').textContent = '';
  /** @type {HTMLDialogElement} */ ($('secret-dialog')).showModal();
  input.focus();
  input.select();
  say(`${message} Its signing secret is shown once: store it now.`);
}

async function copySecret() {
  const input = /** @type {HTMLInputElement} */ ($('secret-value'));
  try {
    await navigator.clipboard.writeText(input.value);
  } catch {
    // No clipboard API (a page not served over HTTPS): the selection, for Ctrl+C.
    input.focus();
    input.select();
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

// ---- Deliveries. ----

async function loadDeliveries(reset) {
  const query = { endpointId: state.filter.endpointId, status: state.filter.status, limit: PAGE_SIZE, cursor: reset ? null : state.cursor };
  const page = await api('GET', 'deliveries', { query });
  state.deliveries = reset ? page.data : [...state.deliveries, ...page.data];
  state.cursor = page.nextCursor ?? null;
  keepFocus(renderDeliveries);
}

function renderDeliveries() {
  const rows = state.deliveries.map((delivery) => deliveryRow(delivery));
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
  const dialog = /** @type {HTMLDialogElement} */ ($('delivery-dialog'));
  $('delivery-status').textContent = '';
  $('delivery-facts').replaceChildren();
  $('attempts-body').replaceChildren();
  $('attempts-table').hidden = true;
  $('attempts-empty').hidden = true;
  dialog.showModal();
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
  if (!id) return;
  const button = $('delivery-replay');
  if (!claim(button)) return;
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
async function follow(id, attemptsBefore) {
  for (let i = 0; i < FOLLOW_TIMES && !state.ended; i += 1) {
    await new Promise((resolve) => setTimeout(resolve, FOLLOW_EVERY_MS));
    const delivery = await showDelivery(id);
    if (delivery.status !== 'pending' && delivery.attemptCount > attemptsBefore) {
      if (state.openDelivery === id || attemptsBefore === -1) say(delivery.status === 'delivered' ? `Delivered (delivery ${id}).` : `Delivery ${id} ${delivery.status}: see its attempts.`);
      return;
    }
  }
}

// ---- Start. ----

function wire() {
  $('add-endpoint').addEventListener('click', () => openEndpointForm(null));
  $('endpoint-form').addEventListener('submit', (event) => void saveEndpoint(event));
  $('endpoint-cancel').addEventListener('click', () => /** @type {HTMLDialogElement} */ ($('endpoint-dialog')).close());
  $('endpoints-body').addEventListener('click', (event) => void onEndpointAction(event));
  $('secret-copy').addEventListener('click', () => void copySecret());
  $('secret-close').addEventListener('click', () => {
    /** @type {HTMLInputElement} */ ($('secret-value')).value = '';
    /** @type {HTMLDialogElement} */ ($('secret-dialog')).close();
  });
  // The secret leaves the page with its dialog, Escape included.
  $('secret-dialog').addEventListener('close', () => (/** @type {HTMLInputElement} */ ($('secret-value')).value = ''));
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
  $('delivery-close').addEventListener('click', () => /** @type {HTMLDialogElement} */ ($('delivery-dialog')).close());
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

async function start() {
  wire();
  state.token = takeToken();
  if (!state.token) return endSession('NO_TOKEN');
  try {
    const session = await api('GET', 'session');
    if (session.kind !== 'customer') {
      forgetToken();
      return endSession('PLATFORM');
    }
    const until = new Date(session.expiresAt);
    const who = $('who');
    who.replaceChildren(`Customer ${session.customerId} · link valid until `, time(session.expiresAt));
    who.hidden = false;
    // The data leaves the page when the link expires, whether or not anything is clicked.
    const left = until.getTime() - (Date.now() + state.clockOffsetMs);
    if (Number.isFinite(left)) setTimeout(() => endSession(EXPIRED), Math.min(Math.max(left, 0), 2 ** 31 - 1));
    await Promise.all([loadEventTypes(), loadEndpoints()]);
    await loadDeliveries(true);
    $('loading').hidden = true;
    $('app').hidden = false;
    document.body.setAttribute('data-ready', 'true');
  } catch (error) {
    if (state.ended) return;
    $('loading').hidden = true;
    showAlert('The page could not load.', error instanceof Error ? error.message : String(error));
  }
}

void start();

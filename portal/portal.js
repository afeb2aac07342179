// The customer portal: one customer's webhook endpoints and deliveries, through the webhooks API
// with the customer token of the link the platform sent. Plain ES modules, no framework and no
// build step; served under the API's CSP (default-src 'self'): no inline script or style.
//   api.js        the token (from the link's fragment) and the API calls
//   endpoints.js  the endpoints, their form and their secret
//   deliveries.js the deliveries and a delivery's attempts, replay
//   dom.js, state.js  helpers and what the views share

import { api, EXPIRED, forgetToken, onUnauthorized, serverNow, takeToken } from './api.js';
import { loadDeliveries, wireDeliveries } from './deliveries.js';
import { $, time } from './dom.js';
import { loadEndpoints, loadEventTypes, wireEndpoints } from './endpoints.js';
import { state } from './state.js';

/** Ends the session: the token forgotten, every shown object removed, one clear message. */
function endSession(code) {
  if (state.ended) return;
  state.ended = true;
  forgetToken();
  for (const open of document.querySelectorAll('dialog[open]')) /** @type {HTMLDialogElement} */ (open).close();
  state.endpoints = [];
  state.deliveries = [];
  $('endpoints-body').replaceChildren();
  $('deliveries-body').replaceChildren();
  $('app').hidden = true;
  $('loading').hidden = true;
  $('who').hidden = true;
  $('status').textContent = '';
  if (code === EXPIRED) showAlert('This link has expired — ask for a new one.', 'For your security, links to this page work for a limited time. Ask the service that sent it to you for a new link.');
  else if (code === 'NO_TOKEN') showAlert('No access link.', 'Open this page from the link you were given, or ask for a new one.');
  else if (code === 'PLATFORM') showAlert("This page is for a customer's link.", 'Mint a customer link with POST /v1/customer-tokens and open its portalUrl.');
  else showAlert('This link is not valid — ask for a new one.', 'It may have been copied incompletely, or it was replaced.');
  const alert = $('alert');
  alert.tabIndex = -1;
  alert.focus();
}

function showAlert(title, detail) {
  const strong = document.createElement('p');
  strong.textContent = title;
  const more = document.createElement('p');
  more.className = 'detail';
  more.textContent = detail;
  $('alert').replaceChildren(strong, more);
  $('alert').hidden = false;
}

async function start() {
  wireEndpoints();
  wireDeliveries();
  onUnauthorized(endSession);
  if (!takeToken()) return endSession('NO_TOKEN');
  try {
    const session = await api('GET', 'session');
    if (session.kind !== 'customer') return endSession('PLATFORM');
    const who = $('who');
    who.replaceChildren(`Customer ${session.customerId} · link valid until `, time(session.expiresAt));
    who.hidden = false;
    // The data leaves the page when the link expires, whether or not anything is clicked.
    const left = new Date(session.expiresAt).getTime() - serverNow();
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

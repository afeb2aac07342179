// The customer token and the webhooks API: the token comes from the link's fragment (never sent
// to a server) into this tab's session storage, and goes out only as `Authorization: Bearer`.

const TOKEN_KEY = 'outbox-relay.portal.token';
/** The API beside the portal: /portal/ → /v1/ (also behind a proxy that adds a path prefix). */
const API = new URL('../v1/', document.baseURI);

export const EXPIRED = 'WEBHOOK_API_TOKEN_EXPIRED';

export class ApiError extends Error {
  /** @param {number} status @param {string} code @param {string} message */
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const session = {
  /** @type {string | null} */ token: null,
  /** The server's clock minus this machine's. */
  clockOffsetMs: 0,
  /** Told of every 401, with its code. @type {(code: string) => void} */
  onUnauthorized: () => undefined,
};

/** The token of the link (kept for this tab), or the one this tab kept; null: none. */
export function takeToken() {
  const fromLink = new URLSearchParams(location.hash.slice(1)).get('token');
  if (fromLink) {
    try {
      sessionStorage.setItem(TOKEN_KEY, fromLink);
    } catch {
      // Storage refused (a private mode): the token lives in this page only.
    }
    // Out of the address bar, the history and any bookmark or screenshot of the page.
    history.replaceState(null, '', location.pathname + location.search);
    session.token = fromLink;
  } else {
    try {
      session.token = sessionStorage.getItem(TOKEN_KEY);
    } catch {
      session.token = null;
    }
  }
  return session.token;
}

export function forgetToken() {
  session.token = null;
  try {
    sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // Nothing stored.
  }
}

/** @param {(code: string) => void} handler */
export function onUnauthorized(handler) {
  session.onUnauthorized = handler;
}

/** Now by the server's clock (its Date header, to the second; this machine's may be off by more). */
export function serverNow() {
  return Date.now() + session.clockOffsetMs;
}

/**
 * One API call: its JSON answer, or an ApiError with the API's code and message.
 * @param {string} method
 * @param {string} path relative to /v1/
 * @param {{ query?: Record<string, string | number | null | undefined>, body?: unknown, idempotencyKey?: string }} [options]
 */
export async function api(method, path, options = {}) {
  if (!session.token) throw new ApiError(401, 'WEBHOOK_API_UNAUTHORIZED', 'No access link.');
  const url = new URL(path, API);
  for (const [name, value] of Object.entries(options.query ?? {})) if (value !== undefined && value !== null && value !== '') url.searchParams.set(name, String(value));
  /** @type {Record<string, string>} */
  const headers = { authorization: `Bearer ${session.token}`, accept: 'application/json' };
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  if (options.idempotencyKey) headers['idempotency-key'] = options.idempotencyKey;
  let response;
  try {
    response = await fetch(url, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body), cache: 'no-store', credentials: 'omit' });
  } catch {
    throw new ApiError(0, 'NETWORK', 'The server could not be reached. Check your connection and try again.');
  }
  const serverDate = Date.parse(response.headers.get('date') ?? '');
  if (Number.isFinite(serverDate)) session.clockOffsetMs = serverDate - Date.now();
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
  if (response.status === 401) session.onUnauthorized(code);
  throw new ApiError(response.status, code, message);
}

/** 16 random bytes as hex: crypto.randomUUID needs a secure context, getRandomValues does not. */
export function randomKey() {
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (byte) => byte.toString(16).padStart(2, '0')).join('');
}

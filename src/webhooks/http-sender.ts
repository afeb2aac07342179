/**
 * The webhooks stage's one HTTP client: one POST per attempt, judged into an outcome the retry
 * policy reads. It never follows a redirect, never reads more of an answer than it keeps, and
 * connects only where the address guard allows. undici 8: Node 22 or later.
 */
import { isIP } from 'node:net';
import { Agent } from 'undici';
import { AddressRefused, type AddressGuard } from './address-guard.js';

export type AttemptOutcome = 'delivered' | 'http_status' | 'redirect' | 'timeout' | 'connect' | 'refused_address' | 'network';

export interface WebhookRequest {
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

export interface AttemptResult {
  readonly outcome: AttemptOutcome;
  readonly statusCode: number | null;
  readonly latencyMs: number;
  /** From Retry-After (delta seconds or an HTTP date), in ms from now; null if absent or unparsable. */
  readonly retryAfterMs: number | null;
  /** The first `responseSnippetBytes` of the answer's body (UTF-8, lossy), or null. */
  readonly response: string | null;
  /** What went wrong, one line, for the operator (no secrets, no request body); null when delivered. */
  readonly error: string | null;
  /** When the request started (Date.now()), given by a sender on a thread of its own (it starts later than it was handed over). */
  readonly startedAtMs?: number;
}

export interface SenderOptions {
  readonly connectTimeoutMs: number;
  /** The whole attempt: resolving, connecting, waiting for a connection of the pool, sending, and reading the answer. */
  readonly timeoutMs: number;
  readonly responseSnippetBytes: number;
  readonly guard: AddressGuard;
  readonly connectionsPerOrigin: number;
  readonly userAgent: string;
}

type Failure = { readonly outcome: Exclude<AttemptOutcome, 'delivered' | 'http_status' | 'redirect'>; readonly error: string };

// TLS failures, known by their codes (OpenSSL's certificate checks, Node's TLS layer): the
// handshake is part of connecting, so nothing was sent.
const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|ERR_OSSL_|CERT_|CRL_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|ERROR_IN_|EPROTO$|HOSTNAME_MISMATCH$|INVALID_CA$|INVALID_PURPOSE$|PATH_LENGTH_EXCEEDED$)/;

export class WebhookSender {
  private readonly agent: Agent;

  constructor(private readonly options: SenderOptions) {
    this.agent = new Agent({
      connections: options.connectionsPerOrigin,
      // HTTP/1.1 only: every receiver speaks it, a connection carries one attempt at a time (so
      // connectionsPerOrigin is what is in flight per origin), and the error mapping is h1's.
      allowH2: false,
      // Every connection's addresses go through the guard, reused or not: a name that resolves
      // elsewhere since the endpoint was added (DNS rebinding) is refused here.
      connect: { timeout: options.connectTimeoutMs, lookup: options.guard.lookup },
      // Backstops: the attempt's deadline in `send` ends a silent or dribbling receiver first.
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
    });
  }

  /** One attempt. Every outcome resolves; only a URL that does not parse rejects (endpoints are checked when added). */
  async send(request: WebhookRequest): Promise<AttemptResult> {
    const started = performance.now();
    const url = new URL(request.url);
    const deadline = AbortSignal.timeout(this.options.timeoutMs);
    let statusCode: number | null = null;
    let retryAfterMs: number | null = null;
    const result = (outcome: AttemptOutcome, error: string | null, response: string | null = null): AttemptResult => ({
      outcome,
      statusCode,
      latencyMs: Math.round(performance.now() - started),
      retryAfterMs,
      response,
      error,
    });
    try {
      // Node connects to an IP literal without a lookup, so the guard's lookup never sees it.
      if (isIP(url.hostname) !== 0 || url.hostname.startsWith('[')) await this.options.guard.check(url);
      const answer = await this.agent.request({
        origin: url.origin,
        path: `${url.pathname}${url.search}`,
        method: 'POST',
        headers: { ...lowercased(request.headers), 'user-agent': this.options.userAgent },
        body: request.body,
        signal: deadline,
      });
      statusCode = answer.statusCode;
      retryAfterMs = parseRetryAfter(first(answer.headers['retry-after']), Date.now());
      const response = await readSnippet(answer.body, this.options.responseSnippetBytes);
      if (statusCode >= 200 && statusCode < 300) return result('delivered', null, response);
      if (statusCode >= 300 && statusCode < 400) {
        const location = first(answer.headers.location);
        const where = location === undefined ? 'redirected without a Location' : `redirected to ${location}`;
        return result('redirect', `${where} (${statusCode}); redirects are not followed`, response);
      }
      return result('http_status', `HTTP ${statusCode}`, response);
    } catch (error) {
      const { timeoutMs, connectTimeoutMs } = this.options;
      const failure = classify(error, { url, statusCode, timedOut: deadline.aborted, timeoutMs, connectTimeoutMs });
      return result(failure.outcome, oneLine(failure.error));
    }
  }

  /** Waits for the attempts in flight, then closes every connection. */
  async close(): Promise<void> {
    await this.agent.close();
  }
}

/**
 * Retry-After in ms from `nowMs`: delta seconds, or an HTTP date in any of its three forms (each
 * opens with the day's name; the asctime one carries no zone and means GMT). A date already
 * past is 0.
 */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | null {
  const text = value?.trim();
  if (text === undefined) return null;
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  if (!/^(Mon|Tue|Wed|Thu|Fri|Sat|Sun)/.test(text)) return null;
  const at = Date.parse(text.endsWith(' GMT') ? text : `${text} GMT`);
  return Number.isNaN(at) ? null : Math.max(0, at - nowMs);
}

/** The outcome of an attempt that threw, with what to tell the operator. */
function classify(error: unknown, at: { url: URL; statusCode: number | null; timedOut: boolean; timeoutMs: number; connectTimeoutMs: number }): Failure {
  const host = at.url.host;
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const syscall = (error as NodeJS.ErrnoException | undefined)?.syscall;
  if (error instanceof AddressRefused) return { outcome: 'refused_address', error: error.message };
  if (at.timedOut || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    const what = at.statusCode === null ? 'no answer' : `HTTP ${at.statusCode} came, but its body did not end`;
    return { outcome: 'timeout', error: `${what} within ${at.timeoutMs} ms from ${host}` };
  }
  if (code === 'UND_ERR_CONNECT_TIMEOUT') {
    return { outcome: 'connect', error: `timed out connecting to ${host} after ${at.connectTimeoutMs} ms (${code})` };
  }
  if (syscall === 'getaddrinfo') return { outcome: 'connect', error: `could not resolve ${at.url.hostname} (${code})` };
  // net.connect with several addresses (autoSelectFamily) fails with all their errors at once.
  if (error instanceof AggregateError) {
    return { outcome: 'connect', error: `could not connect to ${host}: ${error.errors.map(describe).join('; ')}` };
  }
  if (syscall === 'connect') return { outcome: 'connect', error: `could not connect to ${host}: ${describe(error)}` };
  if (code !== undefined && TLS_CODE.test(code)) {
    // OpenSSL's message is a dump (error queue, source path); its reason is the readable part.
    const reason = (error as { reason?: unknown }).reason;
    return { outcome: 'connect', error: `TLS with ${host} failed: ${typeof reason === 'string' ? `${reason} (${code})` : describe(error)}` };
  }
  // After the connection was up: reset, closed mid-answer (UND_ERR_SOCKET), an answer that is
  // not HTTP, a body shorter than its Content-Length. The request may have arrived.
  const during = at.statusCode === null ? '' : ` while reading its answer (HTTP ${at.statusCode})`;
  return { outcome: 'network', error: `connection to ${host} failed${during}: ${describe(error)}` };
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as NodeJS.ErrnoException).code;
  return code === undefined || error.message.includes(code) ? error.message : `${error.message} (${code})`;
}

/**
 * The first `limit` bytes of a body, then the rest is left unread: leaving the loop destroys
 * the stream, and undici closes that connection. A character cut in two at the limit is left
 * out rather than garbled.
 */
async function readSnippet(body: AsyncIterable<Buffer>, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    size += chunk.length;
    if (size >= limit) break;
  }
  return new TextDecoder().decode(Buffer.concat(chunks, Math.min(size, limit)), { stream: true });
}

// Header names in one case, so the user-agent set here replaces one the endpoint's headers carry
// instead of going out beside it.
function lowercased(headers: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value]));
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

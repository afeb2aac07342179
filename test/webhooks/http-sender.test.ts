// vitest: runs alone (it asserts timeouts to within 500 ms)
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { LookupFunction } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { AddressGuard } from '../../src/webhooks/address-guard.js';
import { parseRetryAfter, WebhookSender, type SenderOptions } from '../../src/webhooks/http-sender.js';
import { freePort } from '../harness/ports.js';

/**
 * The webhook sender against real HTTP servers on 127.0.0.1: what each kind of receiver makes of
 * an attempt. No Kafka or Postgres involved.
 */

interface Received {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingMessage['headers'];
  readonly body: string;
}

interface Receiver {
  readonly port: number;
  readonly url: string;
  readonly requests: Received[];
  /** TCP connections accepted, whether or not a request came on them. */
  connections: number;
}

const TIMEOUT_MS = 1_500;
const SNIPPET_BYTES = 64;
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** An HTTP server on 127.0.0.1 that records every request (its body read whole) before `answer` runs. */
async function receiver(answer: (request: IncomingMessage, response: ServerResponse) => void): Promise<Receiver> {
  const port = await freePort();
  const state: Receiver = { port, url: `http://127.0.0.1:${port}/hooks/in?tenant=7`, requests: [], connections: 0 };
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      state.requests.push({ method: request.method ?? '', url: request.url ?? '', headers: request.headers, body: Buffer.concat(chunks).toString() });
      answer(request, response);
    });
  });
  server.on('connection', () => state.connections++);
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return state;
}

function sender(allow: readonly string[] = ['127.0.0.0/8'], overrides: Partial<SenderOptions> = {}): WebhookSender {
  const made = new WebhookSender({
    connectTimeoutMs: 1_000,
    timeoutMs: TIMEOUT_MS,
    responseSnippetBytes: SNIPPET_BYTES,
    guard: new AddressGuard(allow),
    connectionsPerOrigin: 2,
    userAgent: 'outbox-relay-test/1',
    ...overrides,
  });
  cleanups.push(() => made.close());
  return made;
}

const event = { headers: { 'webhook-id': 'msg_1', 'content-type': 'application/json' }, body: '{"type":"invoice.paid"}' };

describe('the webhook sender', () => {
  it('delivers on a 2xx, keeping only the first bytes of a large answer and not reading the rest', async () => {
    const big = await receiver((_request, response) => response.writeHead(200, { 'content-type': 'text/plain' }).end(Buffer.alloc(1 << 20, 'a')));
    const started = performance.now();
    const result = await sender().send({ url: big.url, ...event });
    expect(result).toMatchObject({ outcome: 'delivered', statusCode: 200, error: null, retryAfterMs: null });
    expect(result.response).toBe('a'.repeat(SNIPPET_BYTES));
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(result.latencyMs).toBeGreaterThanOrEqual(0);
    expect(result.latencyMs).toBeLessThan(1_000);
  });

  it('cuts the snippet at a character boundary, and keeps a short answer whole', async () => {
    const accented = await receiver((_request, response) => response.writeHead(202).end(`x${'é'.repeat(100)}`));
    const result = await sender().send({ url: accented.url, ...event });
    expect(result.outcome).toBe('delivered');
    expect(result.response).toBe(`x${'é'.repeat(31)}`);
    const short = await receiver((_request, response) => response.writeHead(204).end());
    expect(await sender().send({ url: short.url, ...event })).toMatchObject({ outcome: 'delivered', statusCode: 204, response: '' });
  });

  it('sends a POST with the given headers, the body and its user-agent', async () => {
    const echo = await receiver((_request, response) => response.writeHead(200).end('ok'));
    const headers = { ...event.headers, 'webhook-signature': 'v1,abc= v1,def=', 'X-Tenant': 'acme', 'User-Agent': 'overridden' };
    await sender().send({ url: echo.url, headers, body: event.body });
    expect(echo.requests).toHaveLength(1);
    const [received] = echo.requests;
    expect(received).toMatchObject({ method: 'POST', url: '/hooks/in?tenant=7', body: event.body });
    expect(received?.headers).toMatchObject({
      'webhook-id': 'msg_1',
      'webhook-signature': 'v1,abc= v1,def=',
      'content-type': 'application/json',
      'x-tenant': 'acme',
      'user-agent': 'outbox-relay-test/1',
      'content-length': String(Buffer.byteLength(event.body)),
    });
  });

  it('judges any other status as http_status, with the status and the answer', async () => {
    const failing = await receiver((_request, response) => response.writeHead(500).end('boom'));
    expect(await sender().send({ url: failing.url, ...event })).toMatchObject({ outcome: 'http_status', statusCode: 500, error: 'HTTP 500', response: 'boom' });
  });

  it('does not follow a redirect: the target gets nothing', async () => {
    const target = await receiver((_request, response) => response.writeHead(200).end());
    const moved = await receiver((_request, response) => response.writeHead(301, { location: target.url }).end());
    const result = await sender().send({ url: moved.url, ...event });
    expect(result).toMatchObject({ outcome: 'redirect', statusCode: 301, error: `redirected to ${target.url} (301); redirects are not followed` });
    expect(target.connections).toBe(0);
  });

  it('reads Retry-After, in seconds or as an HTTP date', async () => {
    const busy = await receiver((_request, response) => response.writeHead(429, { 'retry-after': '7' }).end());
    expect(await sender().send({ url: busy.url, ...event })).toMatchObject({ outcome: 'http_status', statusCode: 429, retryAfterMs: 7_000, error: 'HTTP 429' });
    const until = new Date(Date.now() + 30_000).toUTCString();
    const down = await receiver((_request, response) => response.writeHead(503, { 'retry-after': until }).end());
    const result = await sender().send({ url: down.url, ...event });
    expect(result.statusCode).toBe(503);
    // The date has whole seconds: up to one earlier than asked.
    expect(result.retryAfterMs).toBeGreaterThan(28_000);
    expect(result.retryAfterMs).toBeLessThanOrEqual(30_000);
  });

  it('parses the three HTTP-date forms, and nothing that is neither a date nor delta seconds', () => {
    const now = Date.parse('1994-11-06T08:49:00Z');
    expect(parseRetryAfter('Sun, 06 Nov 1994 08:49:37 GMT', now)).toBe(37_000);
    expect(parseRetryAfter('Sunday, 06-Nov-94 08:49:37 GMT', now)).toBe(37_000);
    expect(parseRetryAfter('Sun Nov  6 08:49:37 1994', now)).toBe(37_000);
    expect(parseRetryAfter('Sat, 05 Nov 1994 08:49:37 GMT', now)).toBe(0);
    expect(parseRetryAfter(' 120 ', now)).toBe(120_000);
    expect(parseRetryAfter('0', now)).toBe(0);
    for (const value of [undefined, '', '7.5', '-3', 'soon', 'Sun, 99 Nov 1994 08:49:37 GMT']) expect(parseRetryAfter(value, now), value).toBeNull();
  });

  it('ends an attempt the receiver never answers as a timeout, within the deadline', async () => {
    const silent = await receiver(() => undefined);
    const started = performance.now();
    const result = await sender().send({ url: silent.url, ...event });
    const elapsed = performance.now() - started;
    expect(result).toMatchObject({ outcome: 'timeout', statusCode: null, response: null, error: `no answer within ${TIMEOUT_MS} ms from 127.0.0.1:${silent.port}` });
    expect(silent.requests).toHaveLength(1);
    expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect(elapsed).toBeLessThan(TIMEOUT_MS + 500);
  });

  it('ends an answer whose body dribbles as a timeout, within the deadline', async () => {
    const dribbling = await receiver((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/plain' });
      const drip = setInterval(() => response.write('.'), 100);
      response.on('close', () => clearInterval(drip));
    });
    const started = performance.now();
    const result = await sender().send({ url: dribbling.url, ...event });
    expect(result).toMatchObject({ outcome: 'timeout', statusCode: 200, error: `HTTP 200 came, but its body did not end within ${TIMEOUT_MS} ms from 127.0.0.1:${dribbling.port}` });
    expect(performance.now() - started).toBeLessThan(TIMEOUT_MS + 500);
  });

  it('judges a connection closed before or during the answer as a network failure', async () => {
    const midAnswer = await receiver((request, response) => {
      response.writeHead(200, { 'content-length': '1000' });
      response.write('partial', () => request.socket.destroy());
    });
    const cut = await sender().send({ url: midAnswer.url, ...event });
    expect(cut).toMatchObject({ outcome: 'network', statusCode: 200 });
    expect(cut.error).toMatch(new RegExp(`^connection to 127\\.0\\.0\\.1:${midAnswer.port} failed while reading its answer \\(HTTP 200\\): `));
    const hungUp = await receiver((request) => request.socket.destroy());
    const closed = await sender().send({ url: hungUp.url, ...event });
    expect(closed).toMatchObject({ outcome: 'network', statusCode: null });
    expect(closed.error).toMatch(/other side closed|ECONNRESET/);
  });

  it('judges a port nobody listens on as a connect failure', async () => {
    const port = await freePort();
    const result = await sender().send({ url: `http://127.0.0.1:${port}/`, ...event });
    expect(result).toMatchObject({ outcome: 'connect', statusCode: null });
    expect(result.error).toBe(`could not connect to 127.0.0.1:${port}: connect ECONNREFUSED 127.0.0.1:${port}`);
  });

  it('judges a connection not made within connectTimeoutMs as a connect failure that says it timed out', async () => {
    // A host that never answers, as a name whose lookup never returns: undici's connect timer
    // covers the lookup too.
    class Unanswered extends AddressGuard {
      override readonly lookup: LookupFunction = () => undefined;
    }
    const result = await sender([], { connectTimeoutMs: 300, guard: new Unanswered([]) }).send({ url: 'http://unanswered.example:8080/', ...event });
    expect(result).toMatchObject({ outcome: 'connect', statusCode: null, error: 'timed out connecting to unanswered.example:8080 after 300 ms (UND_ERR_CONNECT_TIMEOUT)' });
    expect(result.latencyMs).toBeLessThan(TIMEOUT_MS);
  });

  it('judges a failed TLS handshake as a connect failure: nothing was sent', async () => {
    const plain = await receiver((_request, response) => response.writeHead(200).end());
    const result = await sender().send({ url: `https://127.0.0.1:${plain.port}/`, ...event });
    expect(result).toMatchObject({ outcome: 'connect', statusCode: null });
    expect(result.error).toMatch(new RegExp(`^TLS with 127\\.0\\.0\\.1:${plain.port} failed: wrong version number \\(ERR_SSL_WRONG_VERSION_NUMBER\\)$`));
    expect(plain.requests).toHaveLength(0);
  });

  it('refuses a loopback IP literal without an allow-list, sending nothing', async () => {
    const local = await receiver((_request, response) => response.writeHead(200).end());
    const result = await sender([]).send({ url: local.url, ...event });
    expect(result).toMatchObject({
      outcome: 'refused_address',
      statusCode: null,
      error: 'refused to connect to 127.0.0.1: 127.0.0.1 is a loopback address (127.0.0.0/8); add it to OUTBOX_WEBHOOK_ALLOW_ADDRESSES to allow it',
    });
    expect(local.connections).toBe(0);
  });

  it('refuses a host name that resolves to loopback, at the connection (the lookup)', async () => {
    const local = await receiver((_request, response) => response.writeHead(200).end());
    const result = await sender([]).send({ url: `http://localhost:${local.port}/`, ...event });
    expect(result).toMatchObject({ outcome: 'refused_address', statusCode: null });
    expect(result.error).toMatch(/^refused to connect to localhost \(resolved to (::1|127\.0\.0\.1)\): .* is a loopback address .*; add it to OUTBOX_WEBHOOK_ALLOW_ADDRESSES to allow it$/);
    expect(local.connections).toBe(0);
    // Allowed, the same name connects.
    const allowed = await sender(['127.0.0.0/8', '::1/128']).send({ url: `http://localhost:${local.port}/`, ...event });
    expect(allowed).toMatchObject({ outcome: 'delivered', statusCode: 200 });
  });
});

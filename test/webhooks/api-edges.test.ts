import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../../src/security/secret.js';
import { TokenAuthority } from '../../src/webhooks/api/tokens.js';
import { cli } from '../harness/cli.js';
import { useTestOutbox } from '../harness/fixture.js';
import { RelayProcess } from '../harness/relay-process.js';
import { useTestWebhooks } from '../harness/webhooks.js';

const PLATFORM_TOKEN = 'platform-token-of-the-api-edges-test-0123';
const SIGNING_KEY = 'signing-key-of-the-api-edges-test-0123456789ab';
const A = 'cus_edges_a';
const B = 'cus_edges_b';

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON answers, checked field by field
  readonly body: any;
}

/**
 * The edges of `webhooks api` (issue 63): what reaches Postgres is text it can hold, every
 * customer id the API mints a token for can be named in a path, numbers in a query are integers,
 * a method a path does not take is 405 with Allow, a customer token naming another customer is
 * 403, and every /v1 answer says not to cache or sniff it. Only the API process runs: these are
 * answers, not deliveries.
 */
describe('webhooks api: its edges', () => {
  const { outbox } = useTestOutbox({ aggregateTypes: ['invoice'] });
  const webhooks = useTestWebhooks(outbox);
  const authority = new TokenAuthority(Secret.fromValue('t', PLATFORM_TOKEN), Secret.fromValue('k', SIGNING_KEY));
  let api: RelayProcess;
  let base = '';
  let endpoint = '';

  async function call(method: string, path: string, token: string | null = PLATFORM_TOKEN, body?: unknown): Promise<Answer> {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: { ...(token !== null && { authorization: `Bearer ${token}` }), ...(body !== undefined && { 'content-type': 'application/json' }) },
      ...(body !== undefined && { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = text === '' ? null : JSON.parse(text);
    } catch {
      // Not JSON: kept as text, and the expectation on the body says so.
    }
    return { status: response.status, headers: response.headers, body: parsed };
  }

  const cursorOf = (kind: string, after: string) => Buffer.from(JSON.stringify([kind, after])).toString('base64url');

  /** Endpoints, their deliveries and the idempotency keys: a refused request changes none of them. */
  async function storeState(): Promise<string> {
    const endpoints = await webhooks.query('SELECT id, url, event_types, description, customer_id, disabled_at, disabled_reason FROM wh.endpoints ORDER BY id');
    const deliveries = await webhooks.query('SELECT id, status FROM wh.deliveries ORDER BY id');
    const keys = await webhooks.query('SELECT key_digest FROM wh.api_idempotency ORDER BY key_digest');
    return JSON.stringify({ endpoints, deliveries, keys });
  }

  beforeAll(async () => {
    api = new RelayProcess(
      webhooks.env({ OUTBOX_WEBHOOK_API_PORT: '0', OUTBOX_WEBHOOK_API_TOKEN: PLATFORM_TOKEN, OUTBOX_WEBHOOK_API_SIGNING_KEY: SIGNING_KEY, OUTBOX_WEBHOOK_API_RATE_LIMIT: '100000' }),
      ['api'],
      'webhooks',
    ).start();
    base = String((await api.waitForLog(/webhooks api: listening/)).address);
    const created = await call('POST', '/v1/endpoints', PLATFORM_TOKEN, { url: 'http://127.0.0.1:9/edges', eventTypes: ['invoice.*'], customerId: A });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    endpoint = created.body.id;
  });

  afterAll(async () => {
    await api.stop();
  });

  describe('text Postgres cannot hold (a NUL) is refused at the edge, naming the field: 400, nothing changes', () => {
    const nul = 'a\u0000b';
    const cases: readonly { readonly name: string; readonly method: string; readonly path: () => string; readonly body?: unknown; readonly code: string; readonly field: string }[] = [
      { name: 'a description on create', method: 'POST', path: () => '/v1/endpoints', body: { url: 'http://127.0.0.1:9/x', eventTypes: ['invoice.*'], customerId: A, description: nul }, code: 'WEBHOOK_API_INVALID_REQUEST', field: 'body.description' },
      { name: 'a description on update', method: 'PATCH', path: () => `/v1/endpoints/${endpoint}`, body: { description: nul }, code: 'WEBHOOK_API_INVALID_REQUEST', field: 'body.description' },
      { name: 'a URL on create', method: 'POST', path: () => '/v1/endpoints', body: { url: `http://127.0.0.1:9/${nul}`, eventTypes: ['invoice.*'], customerId: A }, code: 'WEBHOOK_API_INVALID_REQUEST', field: 'body.url' },
      { name: 'a URL on update', method: 'PATCH', path: () => `/v1/endpoints/${endpoint}`, body: { url: `http://127.0.0.1:9/${nul}` }, code: 'WEBHOOK_API_INVALID_REQUEST', field: 'body.url' },
      { name: 'a reason to disable', method: 'POST', path: () => `/v1/endpoints/${endpoint}/disable`, body: { reason: nul }, code: 'WEBHOOK_API_INVALID_REQUEST', field: 'body.reason' },
      { name: 'an event type', method: 'POST', path: () => '/v1/endpoints', body: { url: 'http://127.0.0.1:9/x', eventTypes: [nul], customerId: A }, code: 'WEBHOOK_API_INVALID_REQUEST', field: 'body.eventTypes.0' },
      { name: 'an event id to filter by', method: 'GET', path: () => '/v1/deliveries?eventId=a%00b', code: 'WEBHOOK_API_INVALID_REQUEST', field: 'querystring.eventId' },
      { name: "an endpoints cursor's position", method: 'GET', path: () => `/v1/endpoints?cursor=${cursorOf('endpoints', nul)}`, code: 'WEBHOOK_API_INVALID_CURSOR', field: 'cursor' },
      { name: "a customers cursor's position", method: 'GET', path: () => `/v1/customers?cursor=${cursorOf('customers', nul)}`, code: 'WEBHOOK_API_INVALID_CURSOR', field: 'cursor' },
      { name: 'a customer to mint a token for', method: 'POST', path: () => '/v1/customer-tokens', body: { customerId: nul }, code: 'WEBHOOK_API_INVALID_REQUEST', field: 'body.customerId' },
    ];
    it.each(cases)('$name', async ({ method, path, body, code, field }) => {
      const before = await storeState();
      const answer = await call(method, path(), PLATFORM_TOKEN, body);
      expect(answer.status, JSON.stringify(answer.body)).toBe(400);
      expect(answer.body).toEqual({ error: { code, message: expect.stringContaining(field) } });
      expect(await storeState()).toBe(before);
    });
  });

  describe('every customer id a token can be minted for can be named in a path; a longer parameter gets the API\'s own error', () => {
    // 204 characters, and 255 that are each two UTF-16 units: both over Fastify's default of 100.
    const long = `cus_${'x'.repeat(200)}`;
    const widest = '\u{1F600}'.repeat(255);

    it.each([
      { name: '204 ASCII characters', id: long },
      { name: '255 characters outside the BMP', id: widest },
    ])('a customer id of $name: its token reads and replays its customer, the platform adds and finds its endpoint', async ({ id }) => {
      const minted = await call('POST', '/v1/customer-tokens', PLATFORM_TOKEN, { customerId: id });
      expect(minted.status, JSON.stringify(minted.body)).toBe(201);
      const path = `/v1/customers/${encodeURIComponent(id)}`;
      const own = await call('GET', path, minted.body.token);
      expect(own.status, JSON.stringify(own.body)).toBe(200);
      expect(own.body).toEqual({ id, endpointCount: 0, firstEndpointAt: null });
      const added = await call('POST', '/v1/endpoints', PLATFORM_TOKEN, { url: 'http://127.0.0.1:9/long', eventTypes: ['invoice.*'], customerId: id });
      expect(added.status, JSON.stringify(added.body)).toBe(201);
      const replayed = await call('POST', `${path}/replay`, minted.body.token, { since: new Date(Date.now() - 60_000).toISOString() });
      expect(replayed.status, JSON.stringify(replayed.body)).toBe(202);
      const found = await call('GET', path, PLATFORM_TOKEN);
      expect(found.status, JSON.stringify(found.body)).toBe(200);
      expect(found.body).toMatchObject({ id, endpointCount: 1 });
    });

    it.each([
      { name: 'a customer id of 256 characters', path: `/v1/customers/${'c'.repeat(256)}`, status: 400, field: 'params.customerId' },
      { name: 'an endpoint id of 300 characters', path: `/v1/endpoints/${'e'.repeat(300)}`, status: 400, field: 'params.endpointId' },
      { name: 'a customer id of 600 characters', path: `/v1/customers/${'c'.repeat(600)}`, status: 414, field: 'path parameter' },
      { name: 'a delivery id of 5,000 characters', path: `/v1/deliveries/${'1'.repeat(5_000)}/attempts`, status: 414, field: 'path parameter' },
      { name: 'a parameter that does not decode', path: '/v1/endpoints/%E0%A4%A', status: 400, field: 'is not a valid url component' },
    ])('$name: $status in the API\'s error body', async ({ path, status, field }) => {
      const answer = await call('GET', path);
      expect(answer.status, JSON.stringify(answer.body)).toBe(status);
      expect(answer.body).toEqual({ error: { code: 'WEBHOOK_API_INVALID_REQUEST', message: expect.stringContaining(field) } });
    });
  });

  describe('a number in a query is an integer in range, or a 400 naming the parameter and what is expected', () => {
    const listings = ['/v1/endpoints', '/v1/deliveries', '/v1/customers'];
    it.each(listings.flatMap((listing) => ['true', '1.5', '1e1', '0x10', '', '0', '-1', '201'].map((limit) => ({ listing, limit }))))('$listing?limit=$limit: 400', async ({ listing, limit }) => {
      const answer = await call('GET', `${listing}?limit=${limit}`);
      expect(answer.status, JSON.stringify(answer.body)).toBe(400);
      expect(answer.body).toEqual({ error: { code: 'WEBHOOK_API_INVALID_REQUEST', message: expect.stringMatching(/^querystring\.limit: .*an integer from 1 to 200/) } });
    });

    it.each(listings.flatMap((listing) => ['1', '200', '007'].map((limit) => ({ listing, limit }))))('$listing?limit=$limit: 200', async ({ listing, limit }) => {
      const answer = await call('GET', `${listing}?limit=${limit}`);
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    });
  });

  describe('a method a path does not take: 405 with Allow, in the API\'s error body; a path that does not exist stays 404', () => {
    it.each([
      { method: 'DELETE', path: () => '/v1/session', allow: 'GET, HEAD' },
      { method: 'PUT', path: () => '/v1/endpoints', allow: 'GET, HEAD, POST' },
      { method: 'POST', path: () => `/v1/endpoints/${endpoint}`, allow: 'DELETE, GET, HEAD, PATCH' },
      { method: 'PUT', path: () => `/v1/endpoints/${endpoint}`, allow: 'DELETE, GET, HEAD, PATCH' },
      { method: 'GET', path: () => `/v1/endpoints/${endpoint}/disable`, allow: 'POST' },
      { method: 'PATCH', path: () => '/v1/customer-tokens', allow: 'POST' },
      { method: 'DELETE', path: () => `/v1/customers/${A}`, allow: 'GET, HEAD' },
      { method: 'GET', path: () => '/v1/deliveries/1/replay', allow: 'POST' },
    ])('$method on a path that takes $allow', async ({ method, path, allow }) => {
      const before = await storeState();
      const answer = await call(method, path(), PLATFORM_TOKEN);
      expect(answer.status, JSON.stringify(answer.body)).toBe(405);
      expect(answer.headers.get('allow')).toBe(allow);
      expect(answer.body).toEqual({ error: { code: 'WEBHOOK_API_INVALID_REQUEST', message: expect.stringContaining(allow) } });
      expect(await storeState()).toBe(before);
    });

    it('answers a path no route has 404, whatever the method', async () => {
      for (const method of ['GET', 'POST', 'DELETE']) expect((await call(method, '/v1/nothing')).status).toBe(404);
    });
  });

  describe('a customer token naming another customer: 403, the same whether that customer exists or not', () => {
    const own = () => authority.mint(A, 600).token;
    beforeAll(async () => {
      const created = await call('POST', '/v1/endpoints', PLATFORM_TOKEN, { url: 'http://127.0.0.1:9/b', eventTypes: ['invoice.*'], customerId: B });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
    });
    it.each([
      { name: 'an endpoint added for it', method: 'POST', path: () => '/v1/endpoints', body: (customer: string) => ({ url: 'http://127.0.0.1:9/x', eventTypes: ['invoice.*'], customerId: customer }) },
      { name: 'its endpoints listed', method: 'GET', path: (customer: string) => `/v1/endpoints?customerId=${customer}` },
      { name: 'its deliveries listed', method: 'GET', path: (customer: string) => `/v1/deliveries?customerId=${customer}` },
      { name: 'the customer read', method: 'GET', path: (customer: string) => `/v1/customers/${customer}` },
      { name: 'its deliveries replayed', method: 'POST', path: (customer: string) => `/v1/customers/${customer}/replay`, body: () => ({ since: new Date(Date.now() - 60_000).toISOString() }) },
    ])('$name', async ({ method, path, body }) => {
      const before = await storeState();
      const answers: Answer[] = [];
      for (const customer of [B, 'cus_edges_nobody']) answers.push(await call(method, path(customer), own(), body?.(customer)));
      for (const answer of answers) {
        expect(answer.status, JSON.stringify(answer.body)).toBe(403);
        expect(answer.body).toEqual({ error: { code: 'WEBHOOK_API_FORBIDDEN', message: expect.any(String) } });
      }
      expect(answers[1]!.body.error.message.replace('cus_edges_nobody', B)).toBe(answers[0]!.body.error.message);
      expect(await storeState()).toBe(before);
    });
  });

  describe('every /v1 answer, errors included, says Cache-Control: no-store and X-Content-Type-Options: nosniff', () => {
    it.each([
      { name: 'a read', method: 'GET', path: () => '/v1/session', token: PLATFORM_TOKEN as string | null, status: 200 },
      { name: 'a secret shown once', method: 'POST', path: () => `/v1/endpoints/${endpoint}/rotate-secret`, token: PLATFORM_TOKEN, status: 200 },
      { name: 'no token', method: 'GET', path: () => '/v1/session', token: null, status: 401 },
      { name: 'a forbidden call', method: 'GET', path: () => '/v1/customers', token: authority.mint(A, 600).token, status: 403 },
      { name: 'bad input', method: 'GET', path: () => '/v1/endpoints?limit=abc', token: PLATFORM_TOKEN, status: 400 },
      { name: 'no such object', method: 'GET', path: () => '/v1/endpoints/ep_missing', token: PLATFORM_TOKEN, status: 404 },
      { name: 'no such route', method: 'GET', path: () => '/v1/nothing', token: PLATFORM_TOKEN, status: 404 },
      { name: 'a method the path does not take', method: 'DELETE', path: () => '/v1/session', token: PLATFORM_TOKEN, status: 405 },
      { name: 'an over-long path parameter', method: 'GET', path: () => `/v1/customers/${'c'.repeat(600)}`, token: PLATFORM_TOKEN, status: 414 },
    ])('$name: $status', async ({ method, path, token, status }) => {
      const answer = await call(method, path(), token);
      expect(answer.status, JSON.stringify(answer.body)).toBe(status);
      expect(answer.headers.get('cache-control')).toBe('no-store');
      expect(answer.headers.get('x-content-type-options')).toBe('nosniff');
    });
  });

  describe('the customer id "null" is refused everywhere one is named: a JSON null is no customer, so such an endpoint could never receive an event', () => {
    it.each([
      { name: 'an endpoint for it', method: 'POST', path: '/v1/endpoints', body: { url: 'http://127.0.0.1:9/x', eventTypes: ['invoice.*'], customerId: 'null' }, field: 'body.customerId' },
      { name: 'a token for it', method: 'POST', path: '/v1/customer-tokens', body: { customerId: 'null' }, field: 'body.customerId' },
      { name: 'it as a path', method: 'GET', path: '/v1/customers/null', field: 'params.customerId' },
      { name: 'it as a filter', method: 'GET', path: '/v1/endpoints?customerId=null', field: 'querystring.customerId' },
    ])('the API: $name, 400 naming the field', async ({ method, path, body, field }) => {
      const before = await storeState();
      const answer = await call(method, path, PLATFORM_TOKEN, body);
      expect(answer.status, JSON.stringify(answer.body)).toBe(400);
      expect(answer.body).toEqual({ error: { code: 'WEBHOOK_API_INVALID_REQUEST', message: expect.stringMatching(new RegExp(`^${field.replace('.', '\\.')}: .*null`)) } });
      expect(await storeState()).toBe(before);
    });

    it('the API mints no token the relay would refuse: a customer id with a C1 control character is 400, as the CLI refuses it', async () => {
      const answer = await call('POST', '/v1/customer-tokens', PLATFORM_TOKEN, { customerId: 'cus_\u0085' });
      expect(answer.status, JSON.stringify(answer.body)).toBe(400);
      expect(answer.body).toEqual({ error: { code: 'WEBHOOK_API_INVALID_REQUEST', message: expect.stringMatching(/^body\.customerId: expected a customer id/) } });
    });

    it('webhooks setup names an endpoint added for "null" before the rule, which receives nothing, and how to replace it', async () => {
      const created = await call('POST', '/v1/endpoints', PLATFORM_TOKEN, { url: 'http://127.0.0.1:9/was-null', eventTypes: ['invoice.*'], customerId: 'cus_edges_was_null' });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      await webhooks.query("UPDATE wh.endpoints SET customer_id = 'null' WHERE id = $1", [created.body.id]);
      const result = await cli(['webhooks', 'setup'], webhooks.env());
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toContain('1 endpoint(s) have a customer id no event can carry');
      expect(result.stdout).toContain(`outbox-relay webhooks endpoint disable --id ${created.body.id}   # customer "null"`);
      await call('DELETE', `/v1/endpoints/${created.body.id}`);
    });

    it('the CLI: endpoint add --customer null exits 1 with WEBHOOK_ENDPOINT_INVALID, and adds nothing', async () => {
      const before = await storeState();
      const result = await cli(['webhooks', 'endpoint', 'add', '--url', 'http://127.0.0.1:9/null', '--event-types', 'invoice.*', '--customer', 'null'], webhooks.env());
      expect(result.code, result.stderr).toBe(1);
      expect(result.stderr).toMatch(/WEBHOOK_ENDPOINT_INVALID.*--customer "null" is not a customer id/);
      expect(await storeState()).toBe(before);
    });
  });
});

import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../../src/security/secret.js';
import { TokenAuthority } from '../../src/webhooks/api/tokens.js';
import { useTestOutbox } from '../harness/fixture.js';
import { billingEvent } from '../harness/outbox.js';
import { eventually, RelayProcess } from '../harness/relay-process.js';
import { useTestWebhooks, verifiedBody, WebhookReceiver } from '../harness/webhooks.js';

const PLATFORM_TOKEN = 'platform-token-of-the-api-test-0123456789';
const SIGNING_KEY = 'signing-key-of-the-api-test-0123456789abcdef';
const A = 'cus_api_a';
const B = 'cus_api_b';

/** Until `check` passes (its last failure reported at the timeout). */
function settled(check: () => unknown, timeoutMs: number): Promise<true> {
  return eventually('the expectation', async () => {
    await check();
    return true as const;
  }, timeoutMs, 50);
}

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON answers, checked field by field
  readonly body: any;
}

/**
 * `outbox-relay webhooks api` as a process, against the real store, with the relay and a
 * `webhooks` process running: every route, bad input refused with a code and nothing changed,
 * the authorization matrix cell by cell, and a test event and replays reaching a receiver.
 */
describe('webhooks api', () => {
  const { outbox } = useTestOutbox({ aggregateTypes: ['invoice'] });
  const webhooks = useTestWebhooks(outbox);
  const started: RelayProcess[] = [];
  const receiver = new WebhookReceiver();
  let api: RelayProcess;
  let base = '';
  let secretsDir = '';
  const authority = new TokenAuthority(Secret.fromValue('t', PLATFORM_TOKEN), Secret.fromValue('k', SIGNING_KEY));
  const tokens = {
    none: null as string | null,
    expired: new TokenAuthority(Secret.fromValue('t', PLATFORM_TOKEN), Secret.fromValue('k', SIGNING_KEY), () => new Date(Date.now() - 7_200_000)).mint(A, 60).token,
    other: authority.mint(B, 600).token,
    own: authority.mint(A, 600).token,
    platform: PLATFORM_TOKEN,
  };

  async function call(method: string, path: string, token: string | null, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: { ...(token !== null && { authorization: `Bearer ${token}` }), ...(body !== undefined && { 'content-type': 'application/json' }), ...headers },
      ...(body !== undefined && { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = text === '' ? null : JSON.parse(text);
    } catch {
      // Not JSON (the portal's files, /metrics): kept as text.
    }
    return { status: response.status, headers: response.headers, body: parsed };
  }

  const platform = (method: string, path: string, body?: unknown, headers?: Record<string, string>) => call(method, path, PLATFORM_TOKEN, body, headers);

  /**
   * Everything a request could change, to compare before and after a refused one; taken once no
   * delivery is pending, so that the webhooks process changes nothing meanwhile (a replay let
   * through would show as a delivery pending, or attempted once more).
   */
  async function storeState(): Promise<string> {
    await settled(async () => expect(await webhooks.query("SELECT id FROM wh.deliveries WHERE status = 'pending'")).toEqual([]), 30_000);
    const endpoints = await webhooks.query('SELECT id, url, event_types, secrets, description, customer_id, platform_wide, disabled_at, disabled_reason FROM wh.endpoints ORDER BY id');
    const deliveries = await webhooks.query('SELECT id, status, attempts, failures FROM wh.deliveries ORDER BY id');
    const keys = await webhooks.query('SELECT key_digest, status_code FROM wh.api_idempotency ORDER BY key_digest');
    return JSON.stringify({ endpoints, deliveries, keys });
  }

  async function addEndpoint(customerId: string, url = receiver.url(), eventTypes = ['invoice.*']): Promise<{ id: string; secret: string }> {
    const created = await platform('POST', '/v1/endpoints', { url, eventTypes, customerId });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    return created.body;
  }

  beforeAll(async () => {
    await receiver.start();
    secretsDir = await mkdtemp(join(tmpdir(), 'webhooks-api-'));
    await writeFile(join(secretsDir, 'token'), `${PLATFORM_TOKEN}\n`);
    await writeFile(join(secretsDir, 'signing-key'), `${SIGNING_KEY}\n`);
    const env = webhooks.env({ OUTBOX_WEBHOOK_RETRY_SCHEDULE: '0s,200ms,300ms' });
    const relay = new RelayProcess(outbox.relayEnv()).start();
    started.push(relay);
    const dispatcher = new RelayProcess(env, [], 'webhooks').start();
    started.push(dispatcher);
    api = new RelayProcess(
      { ...env, OUTBOX_WEBHOOK_API_PORT: '0', OUTBOX_WEBHOOK_API_TOKEN_FILE: join(secretsDir, 'token'), OUTBOX_WEBHOOK_API_SIGNING_KEY_FILE: join(secretsDir, 'signing-key'), OUTBOX_WEBHOOK_API_RATE_LIMIT: '100000', LOG_LEVEL: 'debug' },
      ['api'],
      'webhooks',
    ).start();
    started.push(api);
    base = String((await api.waitForLog(/webhooks api: listening/)).address);
    await relay.waitActive();
    await dispatcher.waitForLog(/webhooks: consuming and dispatching/);
  });

  afterAll(async () => {
    for (const process of started.reverse()) await process.stop();
    await receiver.stop();
  });

  describe('routes', () => {
    it('serves its OpenAPI document, as committed in docs/openapi.json, and answers /healthz and /readyz', async () => {
      const served = await call('GET', '/openapi.json', null);
      expect(served.status).toBe(200);
      expect(served.body).toEqual(JSON.parse(await readFile(new URL('../../docs/openapi.json', import.meta.url), 'utf8')));
      expect((await call('GET', '/healthz', null)).status).toBe(200);
      expect((await call('GET', '/readyz', null)).status).toBe(200);
    });

    it('mints a customer token with its portal link, and says who a token is', async () => {
      const minted = await platform('POST', '/v1/customer-tokens', { customerId: A, ttlSeconds: 120 });
      expect(minted.status).toBe(201);
      expect(minted.body.portalUrl).toBe(`${base}/portal/#token=${minted.body.token}`);
      expect(new Date(minted.body.expiresAt).getTime() - Date.now()).toBeGreaterThan(100_000);
      expect((await call('GET', '/v1/session', minted.body.token)).body).toEqual({ kind: 'customer', customerId: A, expiresAt: minted.body.expiresAt });
      expect((await platform('GET', '/v1/session')).body).toEqual({ kind: 'platform' });
    });

    it('adds, reads, lists, changes, disables, enables, rotates and removes an endpoint; its secret is shown on add and rotate only', async () => {
      const created = await addEndpoint(A);
      expect(created.secret).toMatch(/^whsec_/);
      const read = await platform('GET', `/v1/endpoints/${created.id}`);
      expect(read.body).toMatchObject({ id: created.id, customerId: A, platformWide: false, url: receiver.url(), eventTypes: ['invoice.*'], disabled: false });
      expect(read.body.secret).toBeUndefined();
      const patched = await platform('PATCH', `/v1/endpoints/${created.id}`, { description: 'billing', eventTypes: ['invoice.paid'] });
      expect(patched.body).toMatchObject({ description: 'billing', eventTypes: ['invoice.paid'], url: receiver.url() });
      expect((await platform('POST', `/v1/endpoints/${created.id}/disable`, { reason: 'maintenance' })).body).toMatchObject({ disabled: true, disabledReason: 'maintenance' });
      expect((await platform('POST', `/v1/endpoints/${created.id}/enable`)).body).toMatchObject({ disabled: false, disabledReason: null });
      const rotated = await platform('POST', `/v1/endpoints/${created.id}/rotate-secret`);
      expect(rotated.body.secret).toMatch(/^whsec_/);
      expect(rotated.body.secret).not.toBe(created.secret);
      const listed = await platform('GET', `/v1/endpoints?customerId=${A}&limit=200`);
      expect(listed.body.data.map((e: { id: string }) => e.id)).toContain(created.id);
      expect((await platform('DELETE', `/v1/endpoints/${created.id}`)).status).toBe(204);
      expect((await platform('GET', `/v1/endpoints/${created.id}`)).body.error.code).toBe('WEBHOOK_NOT_FOUND');
    });

    it('pages endpoints and customers by cursor', async () => {
      for (let i = 0; i < 3; i += 1) await addEndpoint(`cus_page_${i}`);
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const page: Answer = await platform('GET', `/v1/customers?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
        expect(page.status).toBe(200);
        seen.push(...page.body.data.map((c: { id: string }) => c.id));
        cursor = page.body.nextCursor;
      } while (cursor !== null);
      expect(seen).toEqual([...seen].sort());
      expect(seen).toEqual(expect.arrayContaining(['cus_page_0', 'cus_page_1', 'cus_page_2']));
      const first = await platform('GET', '/v1/endpoints?limit=1');
      const second = await platform('GET', `/v1/endpoints?limit=1&cursor=${first.body.nextCursor}`);
      expect(second.body.data[0].id).not.toBe(first.body.data[0].id);
      expect((await platform('GET', '/v1/customers/cus_page_1')).body).toMatchObject({ id: 'cus_page_1', endpointCount: 1 });
    });

    it("refuses an endpoints cursor naming another customer's endpoint exactly as one naming no endpoint", async () => {
      // Subscribed to no event the other tests produce: their deliveries stay as they count them.
      const foreign = await addEndpoint(A, receiver.url(), ['cursor.none']);
      await addEndpoint(B, receiver.url(), ['cursor.none']);
      const cursorOf = (id: string) => Buffer.from(JSON.stringify(['endpoints', id])).toString('base64url');
      const missingId = 'ep_0000000000000000';
      const viaForeign = await call('GET', `/v1/endpoints?cursor=${cursorOf(foreign.id)}`, tokens.other);
      const viaMissing = await call('GET', `/v1/endpoints?cursor=${cursorOf(missingId)}`, tokens.other);
      expect(viaForeign.status).toBe(400);
      expect(viaForeign.body.error.code).toBe('WEBHOOK_API_INVALID_CURSOR');
      expect({ status: viaMissing.status, body: viaMissing.body }).toEqual({ status: 400, body: JSON.parse(JSON.stringify(viaForeign.body).replaceAll(cursorOf(foreign.id).slice(0, 40), cursorOf(missingId).slice(0, 40))) });
      // Its own endpoint's id still pages.
      const own = await call('GET', '/v1/endpoints?limit=1', tokens.other);
      expect((await call('GET', `/v1/endpoints?cursor=${own.body.nextCursor ?? cursorOf(own.body.data[0].id)}`, tokens.other)).status).toBe(200);
    });

    it('lists the event types the store holds, with their Avro schema where OUTBOX_SCHEMAS_DIR has one', async () => {
      await addEndpoint(A);
      await outbox.insert([{ ...billingEvent('inv-types', 1, 'invoice.paid'), headers: { customer_id: A } }]);
      await settled(async () => {
        const types = await platform('GET', '/v1/event-types');
        const paid = types.body.data.find((t: { name: string }) => t.name === 'invoice.paid');
        expect(paid?.schema).toMatchObject({ type: 'record' });
      }, 30_000);
      expect((await platform('GET', '/v1/event-types')).body.data.find((t: { name: string }) => t.name === 'invoice.paid').firstSeenAt).toEqual(expect.any(String));
      // Another customer sees the catalogue of names (its portal offers them), never when another customer's events were produced.
      const seenByOther = await call('GET', '/v1/event-types', tokens.other);
      expect(seenByOther.status).toBe(200);
      expect(seenByOther.body.data.find((t: { name: string }) => t.name === 'invoice.paid')).toMatchObject({ firstSeenAt: null, schema: { type: 'record' } });
      expect(seenByOther.body.data.filter((t: { firstSeenAt: unknown }) => t.firstSeenAt !== null)).toEqual([]);
    });

    it("lists deliveries newest first, by filters and cursor; a delivery, its attempts", async () => {
      const endpoint = await addEndpoint(B);
      const events = Array.from({ length: 5 }, (_, i) => ({ ...billingEvent(`inv-list-${i}`, i, i % 2 === 0 ? 'invoice.paid' : 'invoice.voided'), headers: { customer_id: B } }));
      await outbox.insert(events);
      await settled(async () => expect((await platform('GET', `/v1/deliveries?endpointId=${endpoint.id}&status=delivered`)).body.data).toHaveLength(5), 30_000);
      const ids: string[] = [];
      let cursor: string | null = null;
      do {
        const page: Answer = await platform('GET', `/v1/deliveries?customerId=${B}&endpointId=${endpoint.id}&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
        ids.push(...page.body.data.map((d: { id: string }) => d.id));
        cursor = page.body.nextCursor;
      } while (cursor !== null);
      expect(ids).toHaveLength(5);
      expect(ids.map(Number)).toEqual([...ids.map(Number)].sort((a, b) => b - a));
      const one = await platform('GET', `/v1/deliveries?eventId=${events[3]!.eventId}`);
      expect(one.body.data).toHaveLength(1);
      const delivery = one.body.data[0];
      expect(delivery).toMatchObject({ endpointId: endpoint.id, customerId: B, eventType: 'invoice.voided', status: 'delivered', attemptCount: 1, lastAttempt: { attempt: 1, statusCode: 204, outcome: 'delivered' } });
      expect((await platform('GET', `/v1/deliveries/${delivery.id}`)).body).toEqual(delivery);
      expect((await platform('GET', `/v1/deliveries/${delivery.id}/attempts`)).body.data).toEqual([delivery.lastAttempt]);
      const since = new Date(new Date(delivery.createdAt).getTime() - 60_000).toISOString();
      expect((await platform('GET', `/v1/deliveries?endpointId=${endpoint.id}&since=${since}&until=${new Date(Date.now() + 60_000).toISOString()}`)).body.data).toHaveLength(5);
      expect((await platform('GET', `/v1/deliveries?endpointId=${endpoint.id}&until=${since}`)).body.data).toHaveLength(0);
      expect((await platform('GET', `/v1/deliveries?endpointId=${endpoint.id}&status=failed`)).body.data).toHaveLength(0);
    });

    it('bounds the work of one filtered deliveries listing: past the cap, a page ends with a nextCursor; following them finds every match once', async () => {
      const big = 'cus_api_big';
      const endpoint = await addEndpoint(big);
      // 12,000 delivered deliveries (more than twice the cap of one request); every 2,500th recorded in 2001.
      await webhooks.query(`INSERT INTO wh.events (event_id, event_type, body, produced_at) SELECT 'big-' || i, 'invoice.big', '{}', now() FROM generate_series(1, 12000) i`);
      await webhooks.query(
        `INSERT INTO wh.deliveries (event_id, endpoint_id, status, next_attempt_at, created_at, finished_at)
         SELECT 'big-' || i, $1, 'delivered', now(), CASE WHEN i % 2500 = 0 THEN timestamptz '2001-06-01' ELSE now() END, now() FROM generate_series(1, 12000) i`,
        [endpoint.id],
      );
      await webhooks.query('ANALYZE wh.deliveries');
      const token = authority.mint(big, 600).token;
      async function follow(query: string): Promise<{ ids: string[]; pages: number; slowestMs: number }> {
        const ids: string[] = [];
        let cursor: string | null = null;
        let pages = 0;
        let slowestMs = 0;
        do {
          const started = performance.now();
          const page: Answer = await call('GET', `/v1/deliveries?${query}${cursor ? `&cursor=${cursor}` : ''}`, token);
          slowestMs = Math.max(slowestMs, performance.now() - started);
          expect(page.status, JSON.stringify(page.body)).toBe(200);
          ids.push(...page.body.data.map((d: { id: string }) => d.id));
          cursor = page.body.nextCursor;
          pages += 1;
        } while (cursor !== null && pages < 10);
        expect(cursor).toBeNull();
        return { ids, pages, slowestMs };
      }
      const none = await call('GET', '/v1/deliveries?until=2000-01-01T00:00:00Z', token);
      expect(none.status).toBe(200);
      expect(none.body.data).toEqual([]);
      expect(none.body.nextCursor).toEqual(expect.any(String));
      const empty = await follow('until=2000-01-01T00:00:00Z');
      expect(empty.ids).toEqual([]);
      expect(empty.pages).toBe(3);
      const spread = await follow('until=2002-01-01T00:00:00Z&limit=2');
      expect(spread.ids).toHaveLength(4);
      expect(new Set(spread.ids).size).toBe(4);
      expect(spread.ids).toEqual([...spread.ids].sort((a, b) => Number(b) - Number(a)));
      const [expected] = await webhooks.query(`SELECT count(*)::int AS n FROM wh.deliveries WHERE endpoint_id = $1 AND created_at < '2002-01-01'`, [endpoint.id]);
      expect(expected).toEqual({ n: 4 });
      // status=failed reads the failed ones only (deliveries_failed_idx): none, at once.
      expect((await call('GET', '/v1/deliveries?status=failed', token)).body).toEqual({ data: [], nextCursor: null });
      console.log(`deliveries listing, 12,000 of one endpoint: until matching none in ${empty.pages} pages, slowest ${Math.round(empty.slowestMs)} ms; 4 matches in ${spread.pages} pages, slowest ${Math.round(spread.slowestMs)} ms`);
    });

    it('sends a test event through the running webhooks process, signed with the secret shown once', async () => {
      const endpoint = await addEndpoint(A, receiver.url('/test-event'));
      const sent = await call('POST', `/v1/endpoints/${endpoint.id}/test`, tokens.own);
      expect(sent.status).toBe(202);
      await settled(() => expect(receiver.requests.some((r) => r.path === '/test-event')).toBe(true), 30_000);
      const request = receiver.requests.find((r) => r.path === '/test-event')!;
      expect(verifiedBody(endpoint.secret, request)).toMatchObject({ type: 'webhook.test', data: { endpointId: endpoint.id, customerId: A } });
      await settled(async () => expect((await call('GET', `/v1/deliveries/${sent.body.deliveryId}`, tokens.own)).body).toMatchObject({ status: 'delivered', eventType: 'webhook.test' }), 10_000);
    });

    it('replays a failed delivery, an endpoint since a time and a customer since a time, to the receiver, with the same webhook-id', async () => {
      const customer = 'cus_api_replay';
      let failing = true;
      const path = '/replayed';
      receiver.answerWith((request) => (request.path === path && failing ? { status: 500, body: 'down' } : { status: 204 }));
      const endpoint = await addEndpoint(customer, receiver.url(path));
      const event = { ...billingEvent('inv-replay', 1), headers: { customer_id: customer } };
      await outbox.insert([event]);
      let failed: { id: string } | undefined;
      await settled(async () => {
        failed = (await platform('GET', `/v1/deliveries?endpointId=${endpoint.id}&status=failed`)).body.data[0];
        expect(failed).toBeDefined();
      }, 30_000);
      const attempts = await platform('GET', `/v1/deliveries/${failed!.id}/attempts`);
      expect(attempts.body.data).toHaveLength(3);
      expect(attempts.body.data[0]).toMatchObject({ statusCode: 500, outcome: 'http_status', responseSnippet: 'down' });
      failing = false;
      const before = receiver.requests.filter((r) => r.path === path).length;
      expect((await platform('POST', `/v1/deliveries/${failed!.id}/replay`)).body).toEqual({ replayed: 1 });
      await settled(() => expect(receiver.requests.filter((r) => r.path === path).length).toBe(before + 1), 30_000);
      expect(receiver.requests.filter((r) => r.path === path).at(-1)!.id).toBe(event.eventId);
      await settled(async () => expect((await platform('GET', `/v1/deliveries/${failed!.id}`)).body.status).toBe('delivered'), 10_000);
      const since = new Date(Date.now() - 600_000).toISOString();
      expect((await platform('POST', `/v1/endpoints/${endpoint.id}/replay`, { since })).body).toEqual({ replayed: 1 });
      await settled(() => expect(receiver.requests.filter((r) => r.path === path).length).toBe(before + 2), 30_000);
      await settled(async () => expect((await platform('GET', `/v1/deliveries/${failed!.id}`)).body.status).toBe('delivered'), 10_000);
      expect((await platform('POST', `/v1/customers/${customer}/replay`, { since })).body).toEqual({ replayed: 1 });
      await settled(() => expect(receiver.requests.filter((r) => r.path === path).length).toBe(before + 3), 30_000);
      receiver.answerWith(() => ({ status: 204 }));
    });

    it('answers the same Idempotency-Key and body with the first answer, another body with 422, and creates once', async () => {
      const body = { url: receiver.url('/idem'), eventTypes: ['invoice.paid'], customerId: A };
      const first = await platform('POST', '/v1/endpoints', body, { 'idempotency-key': 'create-1' });
      const again = await platform('POST', '/v1/endpoints', body, { 'idempotency-key': 'create-1' });
      expect(first.status).toBe(201);
      expect(again.status).toBe(201);
      expect(again.body).toEqual(first.body);
      expect(await webhooks.query('SELECT id FROM wh.endpoints WHERE url = $1', [body.url])).toHaveLength(1);
      const state = await storeState();
      const other = await platform('POST', '/v1/endpoints', { ...body, description: 'other' }, { 'idempotency-key': 'create-1' });
      expect(other.status).toBe(422);
      expect(other.body.error.code).toBe('WEBHOOK_API_IDEMPOTENCY_CONFLICT');
      expect(await storeState()).toBe(state);
      // Per caller: the customer's own key of the same text is its own.
      expect((await call('POST', '/v1/endpoints', tokens.own, { ...body, customerId: undefined }, { 'idempotency-key': 'create-1' })).status).toBe(201);
      const keys = await webhooks.query<{ key_digest: string }>('SELECT key_digest FROM wh.api_idempotency');
      expect(keys.every((k) => !k.key_digest.includes('create-1'))).toBe(true);
    });

    it('counts requests by route and status in /metrics, and never logs a token', async () => {
      const metrics = await call('GET', '/metrics', null);
      expect(metrics.body).toMatch(/outbox_webhook_api_requests_total\{route="\/v1\/endpoints\/:endpointId",method="GET",status="200"\} \d+/);
      expect(metrics.body).toMatch(/outbox_webhook_api_request_duration_seconds_bucket\{le="0.05",route="\/v1\/deliveries",method="GET"\} \d+/);
      const logs = api.raw.join('\n');
      expect(logs).toContain('webhooks api: answered');
      for (const token of [PLATFORM_TOKEN, tokens.own, tokens.other, SIGNING_KEY]) expect(logs).not.toContain(token);
    });

    it("serves the portal's files with a strict Content-Security-Policy, nothing outside portal/", async () => {
      const missing = await call('GET', '/portal/..%2Fpackage.json', null);
      expect(missing.status).toBe(404);
      expect(missing.headers.get('content-security-policy')).toContain("default-src 'self'");
      const bare = await fetch(`${base}/portal`, { redirect: 'manual' });
      expect([bare.status, bare.headers.get('location')]).toEqual([301, '/portal/']);
    });
  });

  describe('bad input is refused with a code, and nothing changes', () => {
    const long = 'x'.repeat(70 * 1024);
    const cases: readonly { readonly name: string; readonly method: string; readonly path: (ids: { endpoint: string }) => string; readonly body?: unknown; readonly headers?: Record<string, string>; readonly status: number; readonly code: string }[] = [
      { name: 'malformed JSON', method: 'POST', path: () => '/v1/endpoints', body: '{"url": "http://127.0.0.1/x", ', status: 400, code: 'WEBHOOK_API_INVALID_REQUEST' },
      { name: 'event types as a string', method: 'POST', path: () => '/v1/endpoints', body: { url: 'http://127.0.0.1/x', eventTypes: 'invoice.*', customerId: A }, status: 400, code: 'WEBHOOK_API_INVALID_REQUEST' },
      { name: 'a URL as a number', method: 'POST', path: () => '/v1/endpoints', body: { url: 42, eventTypes: ['invoice.*'], customerId: A }, status: 400, code: 'WEBHOOK_API_INVALID_REQUEST' },
      { name: 'ttlSeconds as a string', method: 'POST', path: () => '/v1/customer-tokens', body: { customerId: A, ttlSeconds: '60' }, status: 400, code: 'WEBHOOK_API_INVALID_REQUEST' },
      { name: 'ttlSeconds out of range', method: 'POST', path: () => '/v1/customer-tokens', body: { customerId: A, ttlSeconds: 1 }, status: 400, code: 'WEBHOOK_API_INVALID_REQUEST' },
      { name: 'an unknown field on create', method: 'POST', path: () => '/v1/endpoints', body: { url: 'http://127.0.0.1/x', eventTypes: ['invoice.*'], customerId: A, secret: 'whsec_mine' }, status: 400, code: 'WEBHOOK_API_INVALID_REQUEST' },
      { name: 'an unknown field on update', method: 'PATCH', path: (ids) => `/v1/endpoints/${ids.endpoint}`, body: { customerId: B }, status: 400, code: 'WEBHOOK_API_INVALID_REQUEST' },
      { name: 'an unknown query parameter', method: 'GET', path: () => '/v1/deliveries?customer=cus_a', status: 400, code: 'WEBHOOK_API_INVALID_REQUEST' },
      { name: 'a limit that is no number', method: 'GET', path: () => '/v1/deliveries?limit=abc', status: 400, code: 'WEBHOOK_API_INVALID_REQUEST' },
      { name: 'a limit over 200', method: 'GET', path: () => '/v1/deliveries?limit=201', status: 400, code: 'WEBHOOK_API_INVALID_REQUEST' },
      { name: 'a body over 64 KiB', method: 'PATCH', path: (ids) => `/v1/endpoints/${ids.endpoint}`, body: { description: long }, status: 413, code: 'WEBHOOK_API_INVALID_REQUEST' },
      { name: 'a cursor that is not one', method: 'GET', path: () => '/v1/deliveries?cursor=not-a-cursor', status: 400, code: 'WEBHOOK_API_INVALID_CURSOR' },
      { name: "another listing's cursor", method: 'GET', path: () => `/v1/deliveries?cursor=${Buffer.from(JSON.stringify(['endpoints', 'ep_1'])).toString('base64url')}`, status: 400, code: 'WEBHOOK_API_INVALID_CURSOR' },
      { name: 'an edited cursor', method: 'GET', path: () => `/v1/deliveries?cursor=${Buffer.from(JSON.stringify(['deliveries', '1 OR 1=1'])).toString('base64url')}`, status: 400, code: 'WEBHOOK_API_INVALID_CURSOR' },
      { name: 'a time that is no time', method: 'POST', path: (ids) => `/v1/endpoints/${ids.endpoint}/replay`, body: { since: 'yesterday' }, status: 400, code: 'WEBHOOK_API_INVALID_REQUEST' },
      { name: 'a delivery id that is no id', method: 'POST', path: () => '/v1/deliveries/abc/replay', status: 400, code: 'WEBHOOK_API_INVALID_REQUEST' },
      { name: 'a URL that is no URL', method: 'POST', path: () => '/v1/endpoints', body: { url: 'not a url', eventTypes: ['invoice.*'], customerId: A }, status: 400, code: 'WEBHOOK_ENDPOINT_INVALID' },
      { name: 'a private address', method: 'POST', path: () => '/v1/endpoints', body: { url: 'http://10.1.2.3/x', eventTypes: ['invoice.*'], customerId: A }, status: 422, code: 'WEBHOOK_ADDRESS_REFUSED' },
      { name: 'an event type that is no pattern', method: 'POST', path: () => '/v1/endpoints', body: { url: 'http://127.0.0.1/x', eventTypes: ['in voice'], customerId: A }, status: 400, code: 'WEBHOOK_ENDPOINT_INVALID' },
      { name: 'a customer and platform-wide', method: 'POST', path: () => '/v1/endpoints', body: { url: 'http://127.0.0.1/x', eventTypes: ['invoice.*'], customerId: A, platformWide: true }, status: 400, code: 'WEBHOOK_ENDPOINT_INVALID' },
      { name: 'a body of another media type', method: 'POST', path: () => '/v1/endpoints', body: 'url=x', headers: { 'content-type': 'text/plain' }, status: 415, code: 'WEBHOOK_API_INVALID_REQUEST' },
      { name: 'a route that does not exist', method: 'GET', path: () => '/v1/nothing', status: 404, code: 'WEBHOOK_API_INVALID_REQUEST' },
    ];
    let endpoint = '';
    beforeAll(async () => {
      endpoint = (await addEndpoint(A)).id;
    });

    it.each(cases)('$name: $status $code', async ({ method, path, body, headers, status, code }) => {
      const before = await storeState();
      const answer = await call(method, path({ endpoint }), PLATFORM_TOKEN, body, headers);
      expect(answer.status, JSON.stringify(answer.body)).toBe(status);
      expect(answer.body).toEqual({ error: { code, message: expect.any(String) } });
      expect(await storeState()).toBe(before);
    });
  });

  describe('the authorization matrix: each route × {no token, expired token, another customer’s token, its own customer’s token, the platform token}', () => {
    type Caller = keyof typeof tokens;
    interface Ids {
      readonly endpoint: string;
      readonly delivery: string;
    }
    /** What a caller gets: a status, and for 4xx the code. */
    type Expected = readonly [number, string?];
    interface Row {
      readonly route: string;
      readonly request: (ids: Ids) => { readonly path: string; readonly body?: unknown };
      /** Each cell gets a fresh endpoint of A (with a delivery): the route changes or removes it. */
      readonly mutates?: true;
      readonly other: Expected;
      readonly own: Expected;
      readonly platform: Expected;
      /** What a successful answer must hold. */
      readonly check?: (body: Answer['body'], caller: Caller) => void;
    }
    const since = () => new Date(Date.now() - 3_600_000).toISOString();
    const notFound: Expected = [404, 'WEBHOOK_NOT_FOUND'];
    const forbidden: Expected = [403, 'WEBHOOK_API_FORBIDDEN'];
    const noneOfA = (body: Answer['body'], caller: Caller) => {
      if (caller === 'other') expect(JSON.stringify(body)).not.toContain(A);
    };
    const rows: readonly Row[] = [
      { route: 'GET /v1/session', request: () => ({ path: '/v1/session' }), other: [200], own: [200], platform: [200] },
      { route: 'POST /v1/customer-tokens', request: () => ({ path: '/v1/customer-tokens', body: { customerId: A } }), other: forbidden, own: forbidden, platform: [201] },
      { route: 'GET /v1/customers', request: () => ({ path: '/v1/customers' }), other: forbidden, own: forbidden, platform: [200] },
      { route: 'GET /v1/customers/{id}', request: () => ({ path: `/v1/customers/${A}` }), other: forbidden, own: [200], platform: [200] },
      { route: 'POST /v1/customers/{id}/replay', request: () => ({ path: `/v1/customers/${A}/replay`, body: { since: since() } }), other: forbidden, own: [202], platform: [202] },
      { route: 'GET /v1/event-types', request: () => ({ path: '/v1/event-types' }), other: [200], own: [200], platform: [200] },
      { route: 'GET /v1/endpoints', request: () => ({ path: '/v1/endpoints?limit=200' }), other: [200], own: [200], platform: [200], check: noneOfA },
      { route: 'GET /v1/endpoints?customerId', request: () => ({ path: `/v1/endpoints?customerId=${A}` }), other: forbidden, own: [200], platform: [200] },
      { route: 'POST /v1/endpoints (customerId)', request: () => ({ path: '/v1/endpoints', body: { url: receiver.url('/matrix'), eventTypes: ['invoice.paid'], customerId: A } }), other: forbidden, own: [201], platform: [201] },
      { route: 'POST /v1/endpoints (platformWide)', request: () => ({ path: '/v1/endpoints', body: { url: receiver.url('/matrix'), eventTypes: ['matrix.none'], platformWide: true } }), other: forbidden, own: forbidden, platform: [201] },
      { route: 'GET /v1/endpoints/{id}', request: (ids) => ({ path: `/v1/endpoints/${ids.endpoint}` }), other: notFound, own: [200], platform: [200] },
      { route: 'PATCH /v1/endpoints/{id}', mutates: true, request: (ids) => ({ path: `/v1/endpoints/${ids.endpoint}`, body: { description: 'changed' } }), other: notFound, own: [200], platform: [200] },
      { route: 'DELETE /v1/endpoints/{id}', mutates: true, request: (ids) => ({ path: `/v1/endpoints/${ids.endpoint}` }), other: notFound, own: [204], platform: [204] },
      { route: 'POST /v1/endpoints/{id}/disable', mutates: true, request: (ids) => ({ path: `/v1/endpoints/${ids.endpoint}/disable`, body: {} }), other: notFound, own: [200], platform: [200] },
      { route: 'POST /v1/endpoints/{id}/enable', mutates: true, request: (ids) => ({ path: `/v1/endpoints/${ids.endpoint}/enable` }), other: notFound, own: [200], platform: [200] },
      { route: 'POST /v1/endpoints/{id}/rotate-secret', mutates: true, request: (ids) => ({ path: `/v1/endpoints/${ids.endpoint}/rotate-secret` }), other: notFound, own: [200], platform: [200] },
      { route: 'POST /v1/endpoints/{id}/test', mutates: true, request: (ids) => ({ path: `/v1/endpoints/${ids.endpoint}/test` }), other: notFound, own: [202], platform: [202] },
      { route: 'POST /v1/endpoints/{id}/replay', mutates: true, request: (ids) => ({ path: `/v1/endpoints/${ids.endpoint}/replay`, body: { since: since() } }), other: notFound, own: [202], platform: [202] },
      { route: 'GET /v1/deliveries', request: () => ({ path: '/v1/deliveries?limit=200' }), other: [200], own: [200], platform: [200], check: noneOfA },
      { route: 'GET /v1/deliveries?customerId', request: () => ({ path: `/v1/deliveries?customerId=${A}` }), other: forbidden, own: [200], platform: [200] },
      { route: 'GET /v1/deliveries?endpointId', request: (ids) => ({ path: `/v1/deliveries?endpointId=${ids.endpoint}` }), other: [200], own: [200], platform: [200], check: (body, caller) => expect(body.data).toHaveLength(caller === 'other' ? 0 : 1) },
      { route: 'GET /v1/deliveries/{id}', request: (ids) => ({ path: `/v1/deliveries/${ids.delivery}` }), other: notFound, own: [200], platform: [200] },
      { route: 'GET /v1/deliveries/{id}/attempts', request: (ids) => ({ path: `/v1/deliveries/${ids.delivery}/attempts` }), other: notFound, own: [200], platform: [200] },
      { route: 'POST /v1/deliveries/{id}/replay', mutates: true, request: (ids) => ({ path: `/v1/deliveries/${ids.delivery}/replay` }), other: notFound, own: [202], platform: [202] },
    ];
    const expectedOf = (row: Row, caller: Caller): Expected =>
      caller === 'none' ? [401, 'WEBHOOK_API_UNAUTHORIZED'] : caller === 'expired' ? [401, 'WEBHOOK_API_TOKEN_EXPIRED'] : row[caller];
    const cells = rows.flatMap((row) => (['none', 'expired', 'other', 'own', 'platform'] as const).map((caller) => ({ row, caller, route: row.route, expected: expectedOf(row, caller) })));
    const methodOf = (row: Row) => row.route.split(' ')[0]!;

    /** A fresh endpoint of A, with one delivery (a test event, sent), for each cell. */
    async function fresh(): Promise<Ids> {
      const endpoint = await addEndpoint(A, receiver.url('/matrix'));
      const sent = await platform('POST', `/v1/endpoints/${endpoint.id}/test`);
      await settled(async () => expect((await platform('GET', `/v1/deliveries/${sent.body.deliveryId}`)).body.status).toBe('delivered'), 10_000);
      return { endpoint: endpoint.id, delivery: sent.body.deliveryId };
    }

    let shared: Ids;
    beforeAll(async () => {
      shared = await fresh();
    });

    it.each(cells)('$route, $caller: $expected', async ({ row, caller, expected }) => {
      const ids = row.mutates ? await fresh() : shared;
      const { path, body } = row.request(ids);
      const before = await storeState();
      const answer = await call(methodOf(row), path, tokens[caller], body);
      expect(answer.status, JSON.stringify(answer.body)).toBe(expected[0]);
      if (expected[1] !== undefined) {
        expect(answer.body).toEqual({ error: { code: expected[1], message: expect.any(String) } });
        expect(await storeState()).toBe(before);
      }
      if (answer.status < 300) row.check?.(answer.body, caller);
      // Another customer's object and a missing one: the same answer, word for word but the id.
      const named = path.includes(ids.endpoint) ? [ids.endpoint, 'ep_missing'] : path.includes(`/deliveries/${ids.delivery}`) ? [ids.delivery, '999999999999'] : null;
      if (expected[1] === 'WEBHOOK_NOT_FOUND' && named !== null) {
        const [id, missingId] = named as [string, string];
        const missing = await call(methodOf(row), path.replace(id, missingId), tokens[caller], body);
        expect(missing.status).toBe(404);
        expect({ error: { ...missing.body.error, message: missing.body.error.message.replace(missingId, id) } }).toEqual(answer.body);
      }
    });
  });

  it('answers a caller over its rate limit 429 with Retry-After, whichever of its tokens it uses', async () => {
    const limited = new RelayProcess(
      webhooks.env({ OUTBOX_WEBHOOK_API_PORT: '0', OUTBOX_WEBHOOK_API_TOKEN: PLATFORM_TOKEN, OUTBOX_WEBHOOK_API_SIGNING_KEY: SIGNING_KEY, OUTBOX_WEBHOOK_API_RATE_LIMIT: '3' }),
      ['api'],
      'webhooks',
    ).start();
    started.push(limited);
    const address = String((await limited.waitForLog(/webhooks api: listening/)).address);
    const statuses: number[] = [];
    let last: Response | undefined;
    for (let i = 0; i < 4; i += 1) {
      last = await fetch(`${address}/v1/session`, { headers: { authorization: `Bearer ${PLATFORM_TOKEN}` } });
      statuses.push(last.status);
    }
    expect(statuses).toEqual([200, 200, 200, 429]);
    expect(Number(last!.headers.get('retry-after'))).toBeGreaterThan(0);
    expect([last!.headers.get('cache-control'), last!.headers.get('x-content-type-options')]).toEqual(['no-store', 'nosniff']);
    expect(await last!.json()).toEqual({ error: { code: 'WEBHOOK_API_RATE_LIMITED', message: expect.any(String) } });
    // Another caller has its own budget; every token of one customer shares the customer's, and an altered token is no token.
    const session = async (token: string) => (await fetch(`${address}/v1/session`, { headers: { authorization: `Bearer ${token}` } })).status;
    const another = authority.mint(A, 601).token;
    expect(another).not.toBe(tokens.own);
    expect([await session(tokens.own), await session(another), await session(`${tokens.own}.0`), await session(tokens.own), await session(another)]).toEqual([200, 200, 401, 200, 429]);
  });
});

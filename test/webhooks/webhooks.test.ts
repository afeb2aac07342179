// vitest: runs alone (it asserts a healthy endpoint's p99 latency)
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli } from '../harness/cli.js';
import { get, metric } from '../harness/http.js';
import { eventIds, kafkaClient, TopicReader } from '../harness/kafka.js';
import { freePort } from '../harness/ports.js';
import { useTestOutbox } from '../harness/fixture.js';
import { billingEvent, type OutboxRow } from '../harness/outbox.js';
import { eventually, RelayProcess } from '../harness/relay-process.js';
import { useTestWebhooks, verifiedBody, WebhookReceiver } from '../harness/webhooks.js';

/**
 * The last hop, end to end: outbox rows -> relay -> Kafka -> `outbox-relay webhooks` -> real
 * HTTP receivers on 127.0.0.1, each test with event types of its own so that its endpoints
 * receive its events only.
 */
describe('webhooks to customers endpoints', () => {
  const { outbox } = useTestOutbox({ aggregateTypes: ['invoice'] });
  const webhooks = useTestWebhooks(outbox);
  const receivers: WebhookReceiver[] = [];
  let relay: RelayProcess;
  let dispatcher: RelayProcess;
  let httpPort = 0;
  // Short enough to walk in a test: 6 attempts 200 ms apart, a 1 s attempt timeout, the circuit at 3.
  const env = () =>
    webhooks.env({
      OUTBOX_WEBHOOK_RETRY_SCHEDULE: '0s,200ms,200ms,200ms,200ms,200ms',
      OUTBOX_WEBHOOK_TIMEOUT: '1s',
      OUTBOX_WEBHOOK_CIRCUIT_FAILURES: '3',
      OUTBOX_WEBHOOK_CIRCUIT_COOLDOWN: '500ms',
      LOG_LEVEL: 'debug',
      OUTBOX_HTTP_PORT: String(httpPort),
    });

  async function receiver(): Promise<WebhookReceiver> {
    const started = await new WebhookReceiver().start();
    receivers.push(started);
    return started;
  }

  async function deliveries(endpointId: string): Promise<{ event_id: string; status: string; attempts: number; failures: number }[]> {
    return webhooks.query('SELECT event_id, status, attempts, failures FROM wh.deliveries WHERE endpoint_id = $1 ORDER BY id', [endpointId]);
  }

  async function attempts(endpointId: string): Promise<{ event_id: string; attempt: number; outcome: string; status_code: number | null; error: string | null }[]> {
    return webhooks.query('SELECT d.event_id, a.attempt, a.outcome, a.status_code, a.error FROM wh.all_attempts a JOIN wh.deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = $1 ORDER BY a.started_at', [endpointId]);
  }

  function events(count: number, eventType: string, aggregates = 3): OutboxRow[] {
    return Array.from({ length: count }, (_, i) => billingEvent(`${eventType}-inv-${i % aggregates}`, i, eventType));
  }

  beforeAll(async () => {
    httpPort = await freePort();
    relay = new RelayProcess(outbox.relayEnv()).start();
    await relay.waitActive();
    dispatcher = new RelayProcess(env(), [], 'webhooks').start();
    await dispatcher.waitForLog(/webhooks: consuming and dispatching/);
  });

  afterAll(async () => {
    await dispatcher?.stop();
    await relay?.stop();
    await Promise.all(receivers.map((r) => r.stop()));
  });

  it('sends every event to every endpoint subscribed to its type, signed as Standard Webhooks verifies, and nothing else', async () => {
    const [all, paid, other] = [await receiver(), await receiver(), await receiver()];
    const a = await webhooks.addEndpoint(all.url(), 'fanout.*');
    const b = await webhooks.addEndpoint(paid.url(), 'fanout.invoice.paid');
    await webhooks.addEndpoint(other.url(), 'fanout.subscription.*');
    const paidRows = events(30, 'fanout.invoice.paid');
    const voidedRows = events(10, 'fanout.invoice.voided');
    await outbox.insert(paidRows);
    await outbox.insert(voidedRows);
    await eventually('every fanout event delivered', async () => (all.requests.length >= 40 && paid.requests.length >= 30 ? true : undefined), 60_000);
    // Nothing more is on its way: the store says every delivery is done.
    await eventually('no pending fanout delivery', async () => ((await webhooks.query<{ n: number }>(`SELECT count(*)::int AS n FROM wh.deliveries WHERE status = 'pending'`))[0]!.n === 0 ? true : undefined));
    expect(new Set(all.ids())).toEqual(new Set([...paidRows, ...voidedRows].map((row) => row.eventId)));
    expect(new Set(paid.ids())).toEqual(new Set(paidRows.map((row) => row.eventId)));
    expect(other.requests).toHaveLength(0);
    const byId = new Map([...paidRows, ...voidedRows].map((row) => [row.eventId, row]));
    for (const request of all.requests) {
      const body = verifiedBody(a.secret, request) as { id: string; type: string; aggregate: { type: string; id: string }; data: unknown };
      const row = byId.get(request.id)!;
      expect(body).toMatchObject({ id: row.eventId, type: row.eventType, aggregate: { type: 'invoice', id: row.aggregateId }, data: row.payload });
      expect(request.headers['content-type']).toBe('application/json');
    }
    for (const request of paid.requests) verifiedBody(b.secret, request);
    // The other endpoint's secret does not verify: each endpoint signs with its own.
    expect(() => verifiedBody(a.secret, paid.requests[0]!)).toThrow();
  });

  it("an endpoint's new URL, headers and secret apply to the events after each change: nothing more goes to the old URL or with the old secret", async () => {
    const [before, after] = [await receiver(), await receiver()];
    const endpoint = await webhooks.addEndpoint(before.url(), 'moved.*');
    const arrived = (at: WebhookReceiver, rows: readonly OutboxRow[]) => async () => (rows.every((row) => at.ids().includes(row.eventId)) ? true : undefined);
    const earlier = events(20, 'moved.invoice.paid');
    await outbox.insert(earlier);
    // Sent at once, on the endpoint's settings as the process loaded them.
    await eventually('the earlier events at the old URL', arrived(before, earlier), 60_000);

    const updated = await cli(['webhooks', 'endpoint', 'update', '--id', endpoint.id, '--url', after.url(), '--headers', '{"x-tenant":"moved"}'], env());
    expect(updated.code, updated.stderr).toBe(0);
    const moved = events(20, 'moved.invoice.paid');
    await outbox.insert(moved);
    await eventually('the events after the move at the new URL', arrived(after, moved), 60_000);
    expect(before.ids().filter((id) => moved.some((row) => row.eventId === id))).toEqual([]);
    for (const request of after.requests) {
      expect(request.headers['x-tenant']).toBe('moved');
      verifiedBody(endpoint.secret, request);
    }

    // A rotation changes the secrets alone; the old one stops signing at once (--keep-old 0s).
    const rotated = await cli(['webhooks', 'endpoint', 'rotate-secret', '--id', endpoint.id, '--keep-old', '0s'], env());
    expect(rotated.code, rotated.stderr).toBe(0);
    const secret = /new signing secret (\S+)/.exec(rotated.stdout)![1]!;
    const latest = events(20, 'moved.invoice.paid');
    await outbox.insert(latest);
    await eventually('the events after the rotation at the new URL', arrived(after, latest), 60_000);
    for (const request of after.requests.filter((r) => latest.some((row) => row.eventId === r.id))) {
      verifiedBody(secret, request);
      expect(() => verifiedBody(endpoint.secret, request)).toThrow();
    }
  });

  it('a new endpoint is not sent the history that a new consumer group reads from the beginning; one added with --deliver-from all is', async () => {
    const history = events(6, 'history.invoice.paid');
    await outbox.insert(history);
    const reader = await new TopicReader().start([outbox.topic('invoice')]);
    try {
      await reader.until('the history in Kafka', (records) => history.every((row) => eventIds(records).includes(row.eventId)));
    } finally {
      await reader.stop();
    }
    const [fresh, everything] = [await receiver(), await receiver()];
    const added = await webhooks.addEndpoint(fresh.url(), 'history.*');
    const all = await webhooks.addEndpoint(everything.url(), 'history.*', ['--deliver-from', 'all']);
    // A process in a group of its own: it reads the topic from its beginning, the history too.
    const newcomer = new RelayProcess({ ...env(), OUTBOX_WEBHOOK_GROUP: `${env().OUTBOX_WEBHOOK_GROUP}-newcomer`, OUTBOX_HTTP_PORT: '0' }, [], 'webhooks').start();
    try {
      await newcomer.waitForLog(/webhooks: consuming and dispatching/);
      const live = events(6, 'history.invoice.paid');
      await outbox.insert(live);
      // The history reaches `everything` through the newcomer only: once it has it all, the newcomer has read the history.
      await eventually('history and live events at the endpoint that takes every event', async () => (new Set(everything.ids()).size === 12 ? true : undefined), 60_000);
      await eventually('the live events at the new endpoint', async () => (live.every((row) => fresh.ids().includes(row.eventId)) ? true : undefined), 60_000);
      expect(new Set(everything.ids())).toEqual(new Set([...history, ...live].map((row) => row.eventId)));
      expect(new Set(fresh.ids())).toEqual(new Set(live.map((row) => row.eventId)));
      expect((await deliveries(added.id)).map((d) => d.event_id).sort()).toEqual(live.map((row) => row.eventId).sort());
      const listed = await cli(['webhooks', 'endpoint', 'list', '--json'], env());
      const shown = new Map((JSON.parse(listed.stdout) as { id: string; deliverFrom: string | null }[]).map((e) => [e.id, e.deliverFrom]));
      expect(shown.get(all.id)).toBeNull();
      expect(Date.parse(shown.get(added.id)!)).toBeGreaterThan(Date.now() - 120_000);
    } finally {
      await newcomer.stop();
    }
  });

  it('sends a JSON payload as Postgres stored it: amounts beyond double precision keep every digit', async () => {
    const exact = await receiver();
    const endpoint = await webhooks.addEndpoint(exact.url(), 'exact.invoice.paid');
    const eventId = randomUUID();
    // JSON.parse would turn these into doubles (1.2345678901234568e+22, 0.1).
    const payload = '{"amount_minor": 12345678901234567890123, "rate": 0.10000000000000000001, "note": "ünïcödé €"}';
    await outbox.pool.query(
      `INSERT INTO ${outbox.table} (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'invoice', 'inv_exact', 'exact.invoice.paid', $2::jsonb)`,
      [eventId, payload],
    );
    await eventually('the exact event delivered', async () => (exact.ids().includes(eventId) ? true : undefined), 60_000);
    const request = exact.requests.find((r) => r.id === eventId)!;
    expect(verifiedBody(endpoint.secret, request)).toMatchObject({ id: eventId, type: 'exact.invoice.paid', aggregate: { type: 'invoice', id: 'inv_exact' } });
    const stored = (await outbox.pool.query<{ text: string }>('SELECT $1::jsonb::text AS text', [payload])).rows[0]!.text;
    expect(request.body.endsWith(`"data":${stored}}`), request.body).toBe(true);
  });

  it('retries a failing endpoint with the same webhook-id, each attempt freshly signed, and records every attempt', async () => {
    const flaky = await receiver();
    flaky.answerWith((_, index) => (index < 2 ? { status: 500, body: 'database is down' } : index === 2 ? 'cut' : { status: 200 }));
    const endpoint = await webhooks.addEndpoint(flaky.url(), 'flaky.invoice.paid');
    const [row] = events(1, 'flaky.invoice.paid');
    await outbox.insert([row!]);
    await eventually('the flaky delivery delivered', async () => ((await deliveries(endpoint.id))[0]?.status === 'delivered' ? true : undefined), 30_000);
    expect(flaky.ids()).toEqual([row!.eventId, row!.eventId, row!.eventId, row!.eventId]);
    for (const request of flaky.requests) verifiedBody(endpoint.secret, request);
    const tried = await attempts(endpoint.id);
    expect(tried.map((a) => [a.attempt, a.outcome, a.status_code])).toEqual([
      [1, 'http_status', 500],
      [2, 'http_status', 500],
      [3, 'network', 200],
      [4, 'delivered', 200],
    ]);
    const shown = await cli(['webhooks', 'attempts', '--delivery', String((await webhooks.query<{ id: string }>('SELECT id::text AS id FROM wh.deliveries WHERE endpoint_id = $1', [endpoint.id]))[0]!.id)], env());
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/database is down/);
  });

  it('an endpoint that hangs times out, opens its circuit, and does not slow the others', async () => {
    const hanging = await receiver();
    hanging.answerWith(() => 'hang');
    const fast = await receiver();
    const slow = await webhooks.addEndpoint(hanging.url(), 'hang.invoice.paid');
    await webhooks.addEndpoint(fast.url(), 'hang.invoice.paid');
    const rows = events(40, 'hang.invoice.paid', 8);
    const insertedAt = new Map<string, number>();
    for (const row of rows) {
      await outbox.insert([row]);
      insertedAt.set(row.eventId, Date.now());
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    await eventually('the fast endpoint has every event', async () => (new Set(fast.ids()).size === rows.length ? true : undefined), 30_000);
    const latencies = fast.requests.map((request) => request.at - insertedAt.get(request.id)!).sort((x, y) => x - y);
    const p99 = latencies[Math.floor(latencies.length * 0.99)]!;
    // Through the relay and Kafka; the hanging endpoint's 1 s timeouts are not in it.
    expect(p99, `fast endpoint latencies ${latencies.join(',')}`).toBeLessThan(1_000);
    await eventually('the hanging endpoint circuit opened', async () => {
      const [state] = await webhooks.query<{ consecutive_failures: number; paused_until: Date | null }>('SELECT consecutive_failures, paused_until FROM wh.endpoints WHERE id = $1', [slow.id]);
      return state!.consecutive_failures >= 3 ? state : undefined;
    });
    const tried = await attempts(slow.id);
    expect(tried.length).toBeGreaterThanOrEqual(3);
    expect(new Set(tried.map((a) => a.outcome))).toEqual(new Set(['timeout']));
    // Open, it gets one probe per cooldown, not an attempt per delivery: 40 deliveries, few requests.
    expect(hanging.requests.length).toBeLessThan(20);
    expect(dispatcher.logs.some((line) => /circuit opened/.test(line.msg) && line.endpoint === slow.id)).toBe(true);
  });

  it('410 Gone disables the endpoint with the reason and holds its deliveries; enable sends them', async () => {
    const gone = await receiver();
    gone.answerWith(() => ({ status: 410 }));
    const endpoint = await webhooks.addEndpoint(gone.url(), 'gone.invoice.paid');
    const rows = events(3, 'gone.invoice.paid', 1);
    await outbox.insert(rows);
    await eventually('the endpoint disabled', async () => {
      const [state] = await webhooks.query<{ disabled_reason: string | null }>('SELECT disabled_reason FROM wh.endpoints WHERE id = $1', [endpoint.id]);
      return state!.disabled_reason ?? undefined;
    });
    const listed = await cli(['webhooks', 'endpoint', 'list'], env());
    expect(listed.stdout).toMatch(new RegExp(`${endpoint.id}\\s+platform-wide\\s+disabled .*410 Gone`));
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    // Held, not dropped, and not sent to while disabled.
    expect((await deliveries(endpoint.id)).map((d) => d.status)).toEqual(['pending', 'pending', 'pending']);
    const sentWhileDisabled = gone.requests.length;
    expect(sentWhileDisabled).toBeLessThanOrEqual(3);
    gone.answerWith(() => ({ status: 204 }));
    const enabled = await cli(['webhooks', 'endpoint', 'enable', '--id', endpoint.id], env());
    expect(enabled.code, enabled.stderr).toBe(0);
    await eventually('held deliveries delivered', async () => ((await deliveries(endpoint.id)).every((d) => d.status === 'delivered') ? true : undefined), 20_000);
    expect(new Set(gone.ids())).toEqual(new Set(rows.map((row) => row.eventId)));
  });

  it('429 with Retry-After pauses the endpoint for as long as asked and costs no attempt of the schedule', async () => {
    const throttled = await receiver();
    throttled.answerWith((_, index) => (index < 3 ? { status: 429, headers: { 'retry-after': '1' } } : { status: 204 }));
    const endpoint = await webhooks.addEndpoint(throttled.url(), 'throttle.invoice.paid');
    await outbox.insert(events(1, 'throttle.invoice.paid'));
    await eventually('the throttled delivery delivered', async () => ((await deliveries(endpoint.id))[0]?.status === 'delivered' ? true : undefined), 30_000);
    const gaps = throttled.requests.slice(1).map((request, i) => request.at - throttled.requests[i]!.at);
    for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(950);
    expect((await deliveries(endpoint.id))[0]).toMatchObject({ attempts: 4, failures: 0 });
  });

  it('does not follow a redirect: the attempt fails and the redirect target hears nothing', async () => {
    const target = await receiver();
    const redirecting = await receiver();
    redirecting.answerWith(() => ({ status: 301, headers: { location: target.url() } }));
    const endpoint = await webhooks.addEndpoint(redirecting.url(), 'redirect.invoice.paid');
    await outbox.insert(events(1, 'redirect.invoice.paid'));
    await eventually('two redirect attempts', async () => ((await attempts(endpoint.id)).length >= 2 ? true : undefined), 20_000);
    expect((await attempts(endpoint.id))[0]).toMatchObject({ outcome: 'redirect', status_code: 301 });
    expect((await attempts(endpoint.id))[0]!.error).toMatch(/redirects are not followed/);
    expect(target.requests).toHaveLength(0);
  });

  it('fails a delivery once the schedule is used up, lists it, and replays it with the same webhook-id', async () => {
    const broken = await receiver();
    broken.answerWith(() => ({ status: 500 }));
    const endpoint = await webhooks.addEndpoint(broken.url(), 'exhaust.invoice.paid');
    const [row] = events(1, 'exhaust.invoice.paid');
    await outbox.insert([row!]);
    await eventually('the delivery failed', async () => ((await deliveries(endpoint.id))[0]?.status === 'failed' ? true : undefined), 30_000);
    expect((await deliveries(endpoint.id))[0]).toMatchObject({ attempts: 6, failures: 6 });
    expect(broken.requests).toHaveLength(6);
    const failed = await cli(['webhooks', 'deliveries', 'list', '--status', 'failed', '--endpoint', endpoint.id, '--json'], env());
    const [listed] = JSON.parse(failed.stdout) as { id: string; eventId: string }[];
    expect(listed!.eventId).toBe(row!.eventId);
    expect(dispatcher.logs.some((line) => /delivery failed, every attempt/.test(line.msg) && line.eventId === row!.eventId)).toBe(true);
    broken.answerWith(() => ({ status: 200 }));
    const replayed = await cli(['webhooks', 'replay', '--delivery', listed!.id], env());
    expect(replayed.stdout).toMatch(/^1 deliveries are due again/);
    await eventually('the replayed delivery delivered', async () => ((await deliveries(endpoint.id))[0]?.status === 'delivered' ? true : undefined), 20_000);
    expect(broken.ids().at(-1)).toBe(row!.eventId);
    expect(broken.requests).toHaveLength(7);
  });

  it('an ordered endpoint gets one aggregate events in order, the next only after the previous one succeeded', async () => {
    const picky = await receiver();
    const rows = events(30, 'ordered.invoice.paid', 3);
    // The first attempt of every fourth event fails (each aggregate has some): each failure must hold back its aggregate's
    // later events. (Per event, not every third request: three aggregates in lockstep would put
    // one of them on every failing request until its schedule ran out.)
    const failFirst = new Set(rows.filter((_, i) => i % 4 === 1).map((row) => row.eventId));
    const tried = new Set<string>();
    picky.answerWith((request) => {
      const first = !tried.has(request.id);
      tried.add(request.id);
      return first && failFirst.has(request.id) ? { status: 503 } : { status: 200, delayMs: 5 };
    });
    const endpoint = await webhooks.addEndpoint(picky.url(), 'ordered.invoice.paid', ['--ordered', '--max-in-flight', '4']);
    await outbox.insert(rows.slice(0, 15));
    await outbox.insert(rows.slice(15));
    await eventually('every ordered delivery delivered', async () => ((await deliveries(endpoint.id)).filter((d) => d.status === 'delivered').length === rows.length ? true : undefined), 60_000);
    const sequenceOf = new Map(rows.map((row) => [row.eventId, (row.payload as { sequence: number }).sequence]));
    const aggregateOf = new Map(rows.map((row) => [row.eventId, row.aggregateId]));
    const recorded = await attempts(endpoint.id);
    // Per aggregate, attempts in sequence order: an event is first tried only after every earlier one was delivered.
    for (const aggregate of new Set(aggregateOf.values())) {
      const mine = recorded.filter((a) => aggregateOf.get(a.event_id) === aggregate);
      let delivered = -1;
      for (const attempt of mine) {
        const sequence = sequenceOf.get(attempt.event_id)!;
        expect(sequence, `aggregate ${aggregate}: ${mine.map((m) => `${sequenceOf.get(m.event_id)}:${m.outcome}`).join(' ')}`).toBeGreaterThan(delivered);
        if (attempt.outcome === 'delivered') delivered = sequence;
      }
    }
    expect(recorded.filter((a) => a.outcome !== 'delivered')).toHaveLength(failFirst.size);
  });

  it('a record that is not an outbox event is counted and skipped, and the stream goes on', async () => {
    const after = await receiver();
    await webhooks.addEndpoint(after.url(), 'poison.invoice.paid');
    const producer = kafkaClient().producer();
    await producer.connect();
    try {
      // No event_id header (someone else's record on the topic), and a value that is not JSON.
      await producer.send({ topic: outbox.topic('invoice'), messages: [{ key: 'x', value: 'not an event' }, { key: 'y', value: '{oops', headers: { event_id: 'e-poison', event_type: 'poison.invoice.paid' } }] });
    } finally {
      await producer.disconnect();
    }
    const [row] = events(1, 'poison.invoice.paid');
    await outbox.insert([row!]);
    await eventually('the event after the poison delivered', async () => (after.ids().includes(row!.eventId) ? true : undefined), 30_000);
    expect(after.ids()).toEqual([row!.eventId]);
    const undecodable = dispatcher.logs.filter((line) => line.code === 'WEBHOOK_UNDECODABLE');
    expect(undecodable.length).toBeGreaterThanOrEqual(2);
    // Named by where it is, never by what it holds.
    expect(JSON.stringify(undecodable)).not.toMatch(/not an event|oops/);
    expect(metric((await get(httpPort, '/metrics')).body, 'outbox_webhook_undecodable_records_total')).toBeGreaterThanOrEqual(2);
  });

  it('serves its metrics and probes: deliveries by outcome, attempts, the store gauges', async () => {
    await eventually('the store gauges read', async () => (metric((await get(httpPort, '/metrics')).body, 'outbox_webhook_store_read_timestamp_seconds') > 0 ? true : undefined), 20_000);
    const body = (await get(httpPort, '/metrics')).body;
    expect(metric(body, 'outbox_webhook_deliveries_total', 'outcome="delivered"')).toBeGreaterThan(0);
    expect(metric(body, 'outbox_webhook_deliveries_total', 'outcome="failed"')).toBeGreaterThanOrEqual(1);
    expect(metric(body, 'outbox_webhook_attempts_total', 'outcome="timeout"')).toBeGreaterThan(0);
    expect(metric(body, 'outbox_webhook_attempt_duration_seconds_count')).toBeGreaterThan(0);
    expect(metric(body, 'outbox_webhook_first_attempt_delay_seconds_count')).toBeGreaterThan(0);
    expect(metric(body, 'outbox_webhook_events_consumed_total')).toBeGreaterThan(0);
    // The hanging endpoint's held-open circuit, and the 410 endpoint is enabled again by now.
    expect(metric(body, 'outbox_webhook_open_circuits')).toBeGreaterThanOrEqual(1);
    expect(metric(body, 'outbox_webhook_store_bytes')).toBeGreaterThan(0);
    expect((await get(httpPort, '/readyz')).status).toBe(200);
    expect((await get(httpPort, '/healthz')).status).toBe(200);
  });

  it('refuses a private address: at add time without the allow-list, and at every connection', async () => {
    const local = await receiver();
    const refused = await cli(['webhooks', 'endpoint', 'add', '--url', local.url(), '--event-types', 'ssrf.*', '--customer', 'cus_ssrf'], { ...env(), OUTBOX_WEBHOOK_ALLOW_ADDRESSES: '' });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/\[WEBHOOK_ADDRESS_REFUSED\].*127\.0\.0\.1 is a loopback address \(127\.0\.0\.0\/8\)/);
    const metadata = await cli(['webhooks', 'endpoint', 'add', '--url', 'http://169.254.169.254/latest/meta-data', '--event-types', 'ssrf.*', '--platform-wide'], env());
    expect(metadata.code).toBe(1);
    expect(metadata.stderr).toMatch(/169\.254\.169\.254 is a link-local address/);
    // Added where it was allowed (a name that resolves to loopback), sent by a process where it is not: refused at connect.
    const endpoint = await webhooks.addEndpoint(`http://localhost:${local.port}/hook`, 'ssrf.invoice.paid');
    await dispatcher.stop();
    const strict = new RelayProcess({ ...env(), OUTBOX_WEBHOOK_ALLOW_ADDRESSES: '' }, [], 'webhooks').start();
    // Counted before the tests' own process (which allows loopback) starts again: it may retry
    // the refused delivery to the receiver at once, rightly.
    let requestsWhileStrict: number | null = null;
    try {
      await strict.waitForLog(/webhooks: consuming and dispatching/);
      await outbox.insert(events(1, 'ssrf.invoice.paid'));
      await eventually('a refused attempt', async () => ((await attempts(endpoint.id)).length > 0 ? true : undefined), 30_000);
    } finally {
      await strict.stop();
      requestsWhileStrict = local.requests.length;
      dispatcher = new RelayProcess(env(), [], 'webhooks').start();
      await dispatcher.waitForLog(/webhooks: consuming and dispatching/);
    }
    expect((await attempts(endpoint.id))[0]).toMatchObject({ outcome: 'refused_address' });
    expect(requestsWhileStrict, 'requests the receiver had while only the strict process ran').toBe(0);
  });
});

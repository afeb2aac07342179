import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { AddressGuard } from '../../src/webhooks/address-guard.js';
import { DeliveryQueries } from '../../src/webhooks/delivery-queries.js';
import { DeliveryStore, type EndpointRules } from '../../src/webhooks/delivery-store.js';
import { EndpointShares } from '../../src/webhooks/endpoint-shares.js';
import type { AttemptResult } from '../../src/webhooks/http-sender.js';
import { judgeAttempt } from '../../src/webhooks/retry-policy.js';
import { ENDPOINT_DEFAULTS, EndpointStore } from '../../src/webhooks/endpoint-store.js';
import { createWebhookTables, WebhookTables } from '../../src/webhooks/webhook-tables.js';
import { eventually } from '../harness/relay-process.js';

/** Endpoints with nothing owed: a customer's endpoint that gets an event a week. */
const IDLE_ENDPOINTS = 20_000;
const RULES: EndpointRules = { circuitFailures: 5, circuitCooldownMs: 30_000, disableAfterMs: 5 * 24 * 3_600_000 };

/**
 * What the store's recurring statements read among many endpoints: the few that have work
 * waiting or something to clear, not every endpoint. A process claims every poll (250 ms by
 * default) and after every recording of due deliveries, completes every batch of attempts and
 * reads its gauges every housekeeping round; a claim that walked every endpoint cost ~180 ms of
 * Postgres CPU with 100,000 of them, whether anything was due or not. Counted from the server's
 * own statistics for the statement's session, which it reports when the session ends.
 */
describe('webhooks: the store among many endpoints', () => {
  const services = inject('services');
  const pool = new pg.Pool({ connectionString: services.databaseUrl, max: 2 });
  const tables = new WebhookTables(`wh_claim_${randomUUID().replaceAll('-', '').slice(0, 8)}`);
  const now = new Date('2026-12-05T12:00:00Z');

  beforeAll(async () => {
    await createWebhookTables(pool, tables);
  });

  afterAll(async () => {
    await pool.query(`DROP SCHEMA IF EXISTS ${tables.schema} CASCADE`);
    await pool.end();
  });

  /**
   * Rows and index entries read from the endpoints table: by sequential scans, and by scans of
   * any of its indexes. The test's own sessions report theirs first: a session sends its counts
   * at most once a second, else up to 10 s later, so the setup's reads (recording 190
   * deliveries joins them to the endpoints, by a scan of all 20,002 where the planner finds it
   * cheaper) could otherwise be counted as the measured statement's.
   */
  async function endpointEntriesRead(): Promise<number> {
    const sessions = await Promise.all(Array.from({ length: pool.options.max }, () => pool.connect()));
    try {
      await Promise.all(sessions.map((session) => session.query('SELECT pg_stat_force_next_flush()')));
    } finally {
      for (const session of sessions) session.release();
    }
    const { rows } = await pool.query<{ n: string }>(
      `SELECT (t.seq_tup_read + (SELECT sum(i.idx_tup_read) FROM pg_stat_user_indexes i WHERE i.relid = t.relid))::text AS n
       FROM pg_stat_user_tables t WHERE t.schemaname = $1 AND t.relname = 'endpoints'`,
      [tables.schema],
    );
    return Number(rows[0]!.n);
  }

  /**
   * Runs `work` on a store in a session of its own and ends it: a session reports its
   * statistics as it exits, before it leaves pg_stat_activity, and each statement here reads a
   * new snapshot of them. Returns what `work` returned and the endpoint entries it read.
   */
  async function alone<T>(work: (store: DeliveryStore, session: pg.Pool) => Promise<T>): Promise<{ result: T; entriesRead: number }> {
    const name = `claim-cost-${tables.schema}`;
    const session = new pg.Pool({ connectionString: services.databaseUrl, max: 1, application_name: name });
    const before = await endpointEntriesRead();
    const result = await work(new DeliveryStore(session, tables), session);
    await session.end();
    await eventually('the session has exited', async () => ((await pool.query(`SELECT 1 FROM pg_stat_activity WHERE application_name = $1`, [name])).rowCount === 0 ? true : undefined), 10_000);
    return { result, entriesRead: (await endpointEntriesRead()) - before };
  }

  const claimAlone = async () => {
    const { result, entriesRead } = await alone((store) => store.claim('claim-cost', now, 1_000, 30_000, RULES, EndpointShares.alone('claim-cost')));
    return { claimed: result.map((delivery) => delivery.endpointId), deliveries: result, entriesRead };
  };

  it('reads the endpoints that have deliveries waiting, not the others, and still takes every endpoint that has one due', async () => {
    const endpoints = new EndpointStore(pool, tables, new AddressGuard(['127.0.0.1']));
    const first = await endpoints.add({ ...ENDPOINT_DEFAULTS, customerId: 'cus_first', platformWide: false, url: 'http://127.0.0.1:9/first', eventTypes: ['invoice.*'], maxInFlight: 10 });
    await pool.query(
      `INSERT INTO ${tables.endpoints} (id, url, event_types, secrets, headers, max_in_flight, platform_wide, customer_id)
       SELECT 'idle-' || lpad(g::text, 6, '0'), e.url, e.event_types, e.secrets, e.headers, e.max_in_flight, false, 'cus_idle_' || g
       FROM ${tables.endpoints} e CROSS JOIN generate_series(1, $2) g WHERE e.id = $1`,
      [first.id, IDLE_ENDPOINTS],
    );
    const last = await endpoints.add({ ...ENDPOINT_DEFAULTS, customerId: 'cus_last', platformWide: false, url: 'http://127.0.0.1:9/last', eventTypes: ['invoice.*'], maxInFlight: 10 });
    await pool.query(`ANALYZE ${tables.endpoints}`);
    const recorder = new DeliveryStore(pool, tables);
    const client = await pool.connect();
    try {
      const event = (eventId: string, endpointId: string) => ({ eventId, eventType: 'invoice.paid', aggregateId: 'inv-1', body: '{}', producedAt: now, endpointIds: [endpointId] });
      // One due at each end of the endpoints' order (a claim walks from its cursor and wraps
      // round), one leased elsewhere (waiting, not due), one not due for an hour.
      await recorder.record(client, [event('due-first', first.id), event('due-last', last.id)], () => now);
      await recorder.record(client, [event('later', 'idle-010000')], () => new Date(now.getTime() + 3_600_000));
    } finally {
      client.release();
    }

    const { claimed, entriesRead } = await claimAlone();
    expect(claimed.sort()).toEqual([first.id, last.id].sort());
    // The endpoints with deliveries waiting (three), each read once or twice (found, locked,
    // joined for its rows): a walk over every endpoint reads all 20,002. (Above 0: the count is seen.)
    expect(entriesRead).toBeGreaterThan(0);
    expect(entriesRead).toBeLessThan(50);

    // Nothing due now: a claim finds nothing and reads as little.
    const idle = await claimAlone();
    expect(idle.claimed).toEqual([]);
    expect(idle.entriesRead).toBeLessThan(50);
  });

  it('completes successes on endpoints with nothing to clear without reading them, and still clears a failure streak', async () => {
    // As many as one claim takes (it locks up to 200 endpoints).
    const idle = Array.from({ length: 190 }, (_, i) => `idle-${String(i * 100 + 1).padStart(6, '0')}`);
    await pool.query(`UPDATE ${tables.endpoints} SET consecutive_failures = 2, failing_since = $2 WHERE id = $1`, [idle[0], now]);
    const client = await pool.connect();
    try {
      await new DeliveryStore(pool, tables).record(client, idle.map((endpointId, i) => ({ eventId: `ok-${i}`, eventType: 'invoice.paid', aggregateId: 'inv-2', body: '{}', producedAt: now, endpointIds: [endpointId] })), () => now);
    } finally {
      client.release();
    }
    const { deliveries } = await claimAlone();
    // The claim took them (the first test's two, leased, are not due again yet).
    expect(new Set(deliveries.map((delivery) => delivery.endpointId))).toEqual(new Set(idle));

    const ok: AttemptResult = { outcome: 'delivered', statusCode: 200, latencyMs: 5, retryAfterMs: null, response: null, error: null };
    const policy = { scheduleMs: [0, 5_000], maxRetryAfterMs: 3_600_000 };
    const completions = deliveries.map((delivery) => ({ delivery, startedAt: now, result: ok, verdict: judgeAttempt(policy, delivery.failures, ok, now) }));
    const { entriesRead } = await alone((store) => store.write({ owner: 'claim-cost', now, events: [], owed: [], completions, givenBack: [] }, RULES));
    // The one endpoint with a streak is read and cleared; a read of each would be 190.
    expect(entriesRead).toBeLessThan(20);
    const { rows } = await pool.query(`SELECT consecutive_failures, failing_since FROM ${tables.endpoints} WHERE id = $1`, [idle[0]]);
    expect(rows[0]).toEqual({ consecutive_failures: 0, failing_since: null });
    const { rows: delivered } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${tables.deliveries} WHERE status = 'delivered'`);
    expect(delivered[0]!.n).toBe(idle.length);
  });

  it('counts open circuits and disabled endpoints for the gauges without reading the others', async () => {
    await pool.query(`UPDATE ${tables.endpoints} SET consecutive_failures = $2, paused_until = $3 WHERE id = $1`, ['idle-000002', RULES.circuitFailures, new Date(now.getTime() + 30_000)]);
    // The disabled endpoint's delivery is held: not a backlog the oldest-pending gauge shows.
    const client = await pool.connect();
    try {
      await new DeliveryStore(pool, tables).record(client, [{ eventId: 'held', eventType: 'invoice.paid', aggregateId: 'inv-3', body: '{}', producedAt: now, endpointIds: ['idle-000003'] }], () => now);
    } finally {
      client.release();
    }
    await pool.query(`UPDATE ${tables.endpoints} SET disabled_at = $2, disabled_reason = 'by the test' WHERE id = $1`, ['idle-000003', now]);
    await pool.query(`ANALYZE ${tables.endpoints}`);
    const { result: gauges, entriesRead } = await alone((_, session) => new DeliveryQueries(session, tables).gauges(now, RULES.circuitFailures));
    expect(gauges).toMatchObject({ openCircuits: 1, disabledEndpoints: 1 });
    const oldest = gauges.oldestPending.map((pending) => pending.endpointId);
    expect(oldest).toContain('idle-010000');
    expect(oldest).not.toContain('idle-000003');
    // Counted over every endpoint, they read all 20,002 (and more).
    expect(entriesRead).toBeLessThan(50);
  });
});

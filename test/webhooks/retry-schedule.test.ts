// vitest: runs alone (it counts deliveries inside a 300 ms window)
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { AddressGuard } from '../../src/webhooks/address-guard.js';
import { DeliveryStore, type EndpointRules } from '../../src/webhooks/delivery-store.js';
import { Dispatcher } from '../../src/webhooks/dispatcher.js';
import { EndpointShares } from '../../src/webhooks/endpoint-shares.js';
import { ENDPOINT_DEFAULTS, EndpointStore } from '../../src/webhooks/endpoint-store.js';
import { WebhookSender } from '../../src/webhooks/http-sender.js';
import { createWebhookMetrics } from '../../src/webhooks/metrics.js';
import { firstAttemptAt, type RetryPolicy } from '../../src/webhooks/retry-policy.js';
import { createWebhookTables, WebhookTables } from '../../src/webhooks/webhook-tables.js';
import { eventually } from '../harness/relay-process.js';
import { WebhookReceiver } from '../harness/webhooks.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const STANDARD_SCHEDULE = [0, 5_000, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR];

/**
 * The schedule and the endpoint rules over days, on an injected clock: the store and the
 * dispatcher take every "now" from it, so hours pass in milliseconds. Real Postgres, a real
 * receiver and the real HTTP client; only time is the test's.
 */
describe('webhook retry schedule and endpoint rules, on an injected clock', () => {
  const pool = new pg.Pool({ connectionString: inject('services').databaseUrl, max: 6 });
  const tables = new WebhookTables(`wh_clock_${randomUUID().replaceAll('-', '').slice(0, 8)}`);
  const store = new DeliveryStore(pool, tables);
  const endpoints = new EndpointStore(pool, tables, new AddressGuard(['127.0.0.1']));
  const sender = new WebhookSender({ connectTimeoutMs: 1_000, timeoutMs: 2_000, responseSnippetBytes: 256, guard: new AddressGuard(['127.0.0.1']), connectionsPerOrigin: 10, userAgent: 'test' });
  const rules: EndpointRules = { circuitFailures: 5, circuitCooldownMs: 30_000, disableAfterMs: 5 * DAY };
  const policy: RetryPolicy = { scheduleMs: STANDARD_SCHEDULE, maxRetryAfterMs: HOUR };
  const receiver = new WebhookReceiver();
  let now = new Date('2026-12-02T00:00:00Z');
  const clock = () => now;

  beforeAll(async () => {
    await createWebhookTables(pool, tables);
    await receiver.start();
  });

  afterAll(async () => {
    await receiver.stop();
    await sender.close();
    await pool.query(`DROP SCHEMA IF EXISTS ${tables.schema} CASCADE`);
    await pool.end();
  });

  async function endpoint(eventType: string, maxInFlight = 10): Promise<string> {
    return (await endpoints.add({ ...ENDPOINT_DEFAULTS, customerId: null, platformWide: true, url: receiver.url(`/${eventType}`), eventTypes: [eventType], maxInFlight })).id;
  }

  async function recordEvents(eventType: string, endpointId: string, count = 1): Promise<string[]> {
    const ids = Array.from({ length: count }, () => randomUUID());
    const client = await pool.connect();
    try {
      await store.record(
        client,
        ids.map((eventId) => ({ eventId, eventType, aggregateId: `agg-${eventId}`, body: JSON.stringify({ id: eventId }), producedAt: now, endpointIds: [endpointId] })),
        () => firstAttemptAt(policy, clock()),
      );
    } finally {
      client.release();
    }
    return ids;
  }

  async function delivery(endpointId: string): Promise<{ status: string; attempts: number; failures: number; next_attempt_at: Date }> {
    const { rows } = await pool.query(`SELECT status, attempts, failures, next_attempt_at FROM ${tables.deliveries} WHERE endpoint_id = $1 ORDER BY id LIMIT 1`, [endpointId]);
    return rows[0];
  }

  async function endpointState(endpointId: string): Promise<{ consecutive_failures: number; failing_since: Date | null; paused_until: Date | null; disabled_at: Date | null; disabled_reason: string | null }> {
    const { rows } = await pool.query(`SELECT consecutive_failures, failing_since, paused_until, disabled_at, disabled_reason FROM ${tables.endpoints} WHERE id = $1`, [endpointId]);
    return rows[0];
  }

  /** Claims what is due now (the dispatcher's first step) and completes it with one answer. */
  async function attemptDue(answer: number): Promise<number> {
    receiver.answerWith(() => ({ status: answer }));
    const dispatcher = new Dispatcher({ store, sender, policy, rules, concurrency: 50, leaseMs: 10_000, pollMs: 10, owner: 'clock-test', slots: EndpointShares.alone('clock-test'), clock, logger: pino({ level: 'silent' }), metrics: createWebhookMetrics() });
    const before = receiver.requests.length;
    dispatcher.start();
    // The dispatcher claims, sends and records; with the clock standing still nothing becomes due again.
    await new Promise((resolve) => setTimeout(resolve, 300));
    await dispatcher.stop(5_000);
    return receiver.requests.length - before;
  }

  it('walks the Standard Webhooks schedule (immediately, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h), then fails the delivery', async () => {
    const id = await endpoint('schedule.walk');
    await recordEvents('schedule.walk', id);
    const waited: number[] = [];
    for (let attempt = 1; attempt <= STANDARD_SCHEDULE.length; attempt += 1) {
      expect(await attemptDue(500)).toBe(1);
      const state = await delivery(id);
      expect(state.attempts).toBe(attempt);
      if (attempt === STANDARD_SCHEDULE.length) {
        expect(state).toMatchObject({ status: 'failed', failures: 8 });
        break;
      }
      expect(state.status).toBe('pending');
      const wait = state.next_attempt_at.getTime() - now.getTime();
      waited.push(wait);
      // Nothing is sent before its time.
      now = new Date(state.next_attempt_at.getTime() - 1_000);
      expect(await attemptDue(500)).toBe(0);
      now = state.next_attempt_at;
      // The circuit opened after the 5th failure holds the endpoint for 30 s: the schedule's gaps are longer.
      const paused = (await endpointState(id)).paused_until;
      if (paused && paused > now) now = paused;
    }
    STANDARD_SCHEDULE.slice(1).forEach((delayMs, i) => {
      expect(waited[i]!, `wait before attempt ${i + 2}`).toBeGreaterThanOrEqual(delayMs * 0.8);
      expect(waited[i]!, `wait before attempt ${i + 2}`).toBeLessThanOrEqual(delayMs * 1.2);
    });
  });

  it('opens the circuit after 5 failures in a row, probes with one attempt after the cooldown, and closes on its success', async () => {
    const id = await endpoint('circuit.probe');
    await recordEvents('circuit.probe', id, 5);
    expect(await attemptDue(503)).toBe(5);
    const opened = await endpointState(id);
    expect(opened.consecutive_failures).toBe(5);
    expect(opened.paused_until!.getTime() - now.getTime()).toBe(30_000);
    await recordEvents('circuit.probe', id, 5);
    now = new Date(now.getTime() + 29_000);
    expect(await attemptDue(200)).toBe(0);
    now = new Date(now.getTime() + 2_000);
    // Half-open: one probe, however many are due; it fails and the circuit opens again.
    expect(await attemptDue(503)).toBe(1);
    expect(await endpointState(id)).toMatchObject({ consecutive_failures: 6, paused_until: new Date(now.getTime() + 30_000) });
    now = new Date(now.getTime() + 31_000);
    // The next probe succeeds: the circuit closes and every due delivery goes.
    expect(await attemptDue(200)).toBe(10);
    expect((await endpointState(id)).consecutive_failures).toBe(0);
  });

  it('disables an endpoint failing for 5 days without one success, naming why; a success in between starts the count again', async () => {
    const id = await endpoint('disable.after');
    const start = now;
    const at = (days: number) => (now = new Date(start.getTime() + days * DAY));
    await recordEvents('disable.after', id);
    expect(await attemptDue(500)).toBe(1);
    at(2);
    await recordEvents('disable.after', id);
    expect(await attemptDue(200)).toBeGreaterThanOrEqual(1);
    expect((await endpointState(id)).failing_since).toBeNull();
    at(3);
    await recordEvents('disable.after', id);
    expect(await attemptDue(500)).toBe(1);
    at(7.9);
    await recordEvents('disable.after', id);
    expect(await attemptDue(500)).toBeGreaterThanOrEqual(1);
    // Failing since day 3: 4.9 days.
    expect((await endpointState(id)).disabled_at).toBeNull();
    at(8.1);
    await recordEvents('disable.after', id);
    expect(await attemptDue(500)).toBeGreaterThanOrEqual(1);
    const disabled = await endpointState(id);
    expect(disabled.disabled_at).toEqual(now);
    const day3 = new Date(start.getTime() + 3 * DAY).toISOString().replace(/\.\d{3}Z$/, 'Z');
    expect(disabled.disabled_reason).toBe(`failing since ${day3}, longer than OUTBOX_WEBHOOK_DISABLE_AFTER (5d); last attempt: HTTP 500`);
    // Disabled: nothing more is sent, and new deliveries are held.
    at(9);
    await recordEvents('disable.after', id);
    expect(await attemptDue(200)).toBe(0);
    await eventually('held deliveries pending', async () => {
      const { rows } = await pool.query(`SELECT count(*)::int AS n FROM ${tables.deliveries} WHERE endpoint_id = $1 AND status = 'pending'`, [id]);
      return rows[0].n >= 1 ? true : undefined;
    });
  });

  it('keeps a Retry-After pause when a success ends beside it: nothing is claimed for the endpoint before the time it asked for', async () => {
    const id = await endpoint('retry.after');
    await recordEvents('retry.after', id, 5);
    const before = receiver.requests.length;
    // The 429 ends first; four requests already on their way succeed after it, in the same batch of completions or the next.
    receiver.answerWith((_request, index) => (index === before ? { status: 429, headers: { 'retry-after': '2' } } : { status: 204, delayMs: 50 }));
    const dispatcher = new Dispatcher({ store, sender, policy, rules, concurrency: 50, leaseMs: 10_000, pollMs: 10, owner: 'clock-test', slots: EndpointShares.alone('clock-test'), clock, logger: pino({ level: 'silent' }), metrics: createWebhookMetrics() });
    dispatcher.start();
    await new Promise((resolve) => setTimeout(resolve, 400));
    await dispatcher.stop(5_000);
    expect(receiver.requests.length - before).toBe(5);
    const paused = await endpointState(id);
    expect(paused.paused_until).toEqual(new Date(now.getTime() + 2_000));
    expect(paused.consecutive_failures).toBe(0);
    // The throttled delivery and new ones wait out the pause, then go.
    await recordEvents('retry.after', id, 3);
    now = new Date(now.getTime() + 1_900);
    expect(await attemptDue(204)).toBe(0);
    now = new Date(now.getTime() + 200);
    expect(await attemptDue(204)).toBe(4);
    expect((await endpointState(id)).paused_until).toBeNull();
  });
});

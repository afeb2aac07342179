import { describe, expect, it } from 'vitest';
import type { AttemptRow } from '../../src/webhooks/delivery-queries.js';
import { useTestOutbox } from '../harness/fixture.js';
import { billingEvent } from '../harness/outbox.js';
import { cli } from '../harness/cli.js';
import { eventually } from '../harness/relay-process.js';
import { useTestWebhooks, useWebhooksPipeline } from '../harness/webhooks.js';

/** Requests in flight from the process: it holds four times as many deliveries, 8 slots for a fan-out of 25. */
const CONCURRENCY = 2;
const ENDPOINTS = 25;
const EVENTS = 4;

/**
 * An event owed to more endpoints than the process has slots for: split over chunks as slots
 * free, every delivery sent at once and then written once with its result, none recorded due
 * for a claim to take later (a second write of each row); every endpoint gets every event once.
 */
describe('webhooks: a fan-out larger than the free slots', () => {
  const { outbox } = useTestOutbox({ aggregateTypes: ['invoice'] });
  const webhooks = useTestWebhooks(outbox);
  const pipeline = useWebhooksPipeline(outbox, webhooks, { OUTBOX_WEBHOOK_CONCURRENCY: String(CONCURRENCY) });

  it('sends it a chunk of endpoints at a time, each delivery written once after its attempt, and every endpoint gets every event once', async () => {
    const { receiver, dispatcher } = pipeline;
    // Slow enough that every slot is taken for a while, fast enough that none stalls (250 ms without a freed slot records the rest due).
    receiver.answerWith(() => ({ status: 200, body: 'fan-out ok', delayMs: 40 }));
    const endpoints = [];
    for (let i = 0; i < ENDPOINTS; i += 1) endpoints.push(await webhooks.addEndpoint(receiver.url(`/ep-${i}`), 'fanout.invoice.paid'));
    // An event no endpoint is owed has the consumer load the subscriptions: it sizes the events
    // that follow by them (an index a transaction old would size them by no endpoint at all).
    await outbox.insert([billingEvent('fanout-warm-up', 0, 'warm-up.invoice.paid')]);
    await eventually('the consumer knows the endpoints', async () => (dispatcher.logs.some((line) => line.msg === 'webhooks: subscriptions loaded' && line.endpoints === ENDPOINTS) ? true : undefined), 30_000);
    const rows = Array.from({ length: EVENTS }, (_, i) => billingEvent(`fanout-inv-${i}`, i, 'fanout.invoice.paid'));
    let mostRecordedDue = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const [row] = await webhooks.query<{ n: number }>(`SELECT count(*)::int AS n FROM wh.deliveries WHERE status = 'pending' AND lease_owner IS NULL`);
        mostRecordedDue = Math.max(mostRecordedDue, row!.n);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    await outbox.insert(rows);
    try {
      await eventually('every delivery delivered', async () => ((await webhooks.query<{ n: number }>(`SELECT count(*)::int AS n FROM wh.deliveries WHERE status = 'delivered'`))[0]!.n === ENDPOINTS * EVENTS ? true : undefined), 90_000);
    } finally {
      sampling = false;
      await sampler;
    }
    const received = receiver.requests.map((request) => `${request.path} ${request.id}`);
    expect(received).toHaveLength(ENDPOINTS * EVENTS);
    expect(new Set(received)).toEqual(new Set(endpoints.flatMap((_, i) => rows.map((row) => `/ep-${i} ${row.eventId}`))));
    expect(mostRecordedDue).toBe(0);
    // Sent before it was recorded: the first attempt started before the row was written.
    const [written] = await webhooks.query<{ n: number }>(`SELECT count(*)::int AS n FROM wh.deliveries d JOIN wh.all_attempts a ON a.delivery_id = d.id AND a.attempt = 1 WHERE a.started_at < d.created_at`);
    expect(written!.n).toBe(ENDPOINTS * EVENTS);
    // Written once means one row: an attempt that ended before its delivery was recorded is kept
    // in the delivery's row; only one still in flight then (leased, its completion written
    // later) has a row of attempts. Every delivery has its attempt 1 in exactly one of them.
    const [kept] = await webhooks.query<{ in_row: number; in_attempts: number; both: number }>(
      `SELECT count(*) FILTER (WHERE d.first_started_at IS NOT NULL)::int AS in_row, count(a.delivery_id)::int AS in_attempts,
              count(*) FILTER (WHERE d.first_started_at IS NOT NULL AND a.delivery_id IS NOT NULL)::int AS both
       FROM wh.deliveries d LEFT JOIN wh.attempts a ON a.delivery_id = d.id AND a.attempt = 1`,
    );
    expect(kept!.in_row + kept!.in_attempts).toBe(ENDPOINTS * EVENTS);
    // The receiver answers in 40 ms: nearly every attempt ended before its chunk was recorded.
    expect(kept!.in_row).toBeGreaterThan((ENDPOINTS * EVENTS) / 2);
    expect(kept!.both).toBe(0);
    // And the operator still sees one kept in its row, as `webhooks attempts` shows every attempt.
    const [delivery] = await webhooks.query<{ id: string; created_at: Date }>(`SELECT id::text AS id, created_at FROM wh.deliveries WHERE first_started_at IS NOT NULL LIMIT 1`);
    const shown = await cli(['webhooks', 'attempts', '--delivery', delivery!.id, '--json'], webhooks.env());
    expect(shown.code, shown.stderr).toBe(0);
    const [attempt, ...more] = JSON.parse(shown.stdout) as (Omit<AttemptRow, 'startedAt'> & { startedAt: string })[];
    expect(more).toEqual([]);
    expect(attempt).toMatchObject({ attempt: 1, outcome: 'delivered', statusCode: 200, error: null, response: 'fan-out ok', process: expect.stringMatching(/./) });
    // The receiver waits 40 ms before it answers; the attempt started before its row was written.
    expect(attempt!.latencyMs).toBeGreaterThanOrEqual(40);
    expect(Date.parse(attempt!.startedAt)).toBeLessThan(delivery!.created_at.getTime());
  });
});

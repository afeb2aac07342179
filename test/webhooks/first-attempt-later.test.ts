import { describe, expect, it } from 'vitest';
import { useTestOutbox } from '../harness/fixture.js';
import { billingEvent } from '../harness/outbox.js';
import { eventually } from '../harness/relay-process.js';
import { useTestWebhooks, useWebhooksPipeline } from '../harness/webhooks.js';

/**
 * A schedule whose first attempt is not immediate: the consumer reserves no slots and leases
 * nothing, it records each delivery due at the first delay, and the dispatcher claims it then.
 */
describe('webhooks whose first attempt comes later', () => {
  const { outbox } = useTestOutbox({ aggregateTypes: ['invoice'] });
  const webhooks = useTestWebhooks(outbox);
  const pipeline = useWebhooksPipeline(outbox, webhooks, { OUTBOX_WEBHOOK_RETRY_SCHEDULE: '1s,1s' });

  it('records each delivery due at the first delay and sends it once it is due, not before', async () => {
    const { receiver } = pipeline;
    const endpoint = await webhooks.addEndpoint(receiver.url(), 'later.*');
    const rows = Array.from({ length: 20 }, (_, i) => billingEvent(`later-inv-${i % 3}`, i, 'later.invoice.paid'));
    await outbox.insert(rows);
    await eventually('every later event delivered', async () => (receiver.requests.length >= rows.length ? true : undefined), 60_000);
    expect(new Set(receiver.ids())).toEqual(new Set(rows.map((row) => row.eventId)));
    const waits = await webhooks.query<{ ms: number }>(
      `SELECT extract(epoch FROM a.started_at - d.created_at)::float8 * 1000 AS ms FROM wh.all_attempts a JOIN wh.deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = $1 AND a.attempt = 1`,
      [endpoint.id],
    );
    expect(waits).toHaveLength(rows.length);
    // 1 s, less the schedule's 20% jitter: none was sent at once.
    for (const { ms } of waits) expect(ms).toBeGreaterThanOrEqual(790);
  });
});

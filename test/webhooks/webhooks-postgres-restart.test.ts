import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serviceAction } from '../harness/control.js';
import { useTestOutbox } from '../harness/fixture.js';
import { get } from '../harness/http.js';
import { testKafkaClients } from '../harness/kafka-clients.js';
import { billingEvent } from '../harness/outbox.js';
import { freePort } from '../harness/ports.js';
import { delay, eventually, RelayProcess } from '../harness/relay-process.js';
import { useTestWebhooks, WebhookReceiver } from '../harness/webhooks.js';

/**
 * The delivery store restarted while the webhooks process records and completes deliveries: the
 * consumer records again from the last offset it recorded, the completions are written once it
 * is back, nothing is lost, and the process says it is ready again. On each Kafka client the
 * consumer can run on.
 */
describe.each(testKafkaClients())('webhooks through a Postgres restart (consumer on %s)', (kafkaClient) => {
  const { outbox } = useTestOutbox({ aggregateTypes: ['invoice'] });
  const webhooks = useTestWebhooks(outbox);
  let relay: RelayProcess;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    relay = new RelayProcess(outbox.relayEnv()).start();
    await relay.waitActive();
    receiver = await new WebhookReceiver().start();
  });

  afterAll(async () => {
    await serviceAction('start', 'pg');
    await relay?.stop();
    await receiver?.stop();
  });

  it('records and completes every delivery after a clean stop and a kill -9 of Postgres, and is ready again', async () => {
    // 20 ms an answer, 10 at once: 1,500 deliveries take about 3 s, so both restarts hit a backlog.
    receiver.answerWith(() => ({ status: 204, delayMs: 20 }));
    const endpoint = await webhooks.addEndpoint(receiver.url(), 'pg.invoice.paid');
    const rows = Array.from({ length: 1_500 }, (_, i) => billingEvent(`pg-agg-${i % 7}`, i, 'pg.invoice.paid'));
    for (let i = 0; i < rows.length; i += 100) await outbox.insert(rows.slice(i, i + 100));
    const httpPort = await freePort();
    const process = new RelayProcess(webhooks.env({ OUTBOX_KAFKA_CLIENT: kafkaClient, OUTBOX_WEBHOOK_CONCURRENCY: '10', OUTBOX_HTTP_PORT: String(httpPort) }), [], 'webhooks').start();
    try {
      await eventually('the first deliveries', async () => (receiver.requests.length > 0 ? true : undefined), 60_000, 50);
      for (const action of ['stop', 'kill'] as const) {
        await serviceAction(action, 'pg');
        await delay(1_000);
        await serviceAction('start', 'pg');
        await delay(500);
      }
      await eventually(
        'every delivery delivered',
        async () => {
          const [counts] = await webhooks.query<{ delivered: number; total: number }>(`SELECT count(*) FILTER (WHERE status = 'delivered')::int AS delivered, count(*)::int AS total FROM wh.deliveries WHERE endpoint_id = $1`, [endpoint.id]);
          if (counts!.delivered === rows.length) return true;
          throw new Error(`${counts!.delivered} of ${rows.length} delivered, ${counts!.total} recorded, ${receiver.requests.length} requests received; the webhooks process's log:\n${process.tail(40)}`);
        },
        120_000,
        250,
      );
      // Every event arrived; a repeat is the same webhook-id (an attempt whose result was not yet written).
      expect(new Set(receiver.ids())).toEqual(new Set(rows.map((row) => row.eventId)));
      const [rowsPerEvent] = await webhooks.query<{ most: number }>('SELECT max(n)::int AS most FROM (SELECT count(*) AS n FROM wh.deliveries WHERE endpoint_id = $1 GROUP BY event_id) per_event', [endpoint.id]);
      expect(rowsPerEvent!.most).toBe(1);
      // The outage was seen and said, and the process is ready again without a restart.
      expect(process.logs.some((line) => line.level >= 50 && /webhooks: /.test(line.msg))).toBe(true);
      await eventually('ready again', async () => ((await get(httpPort, '/readyz')).status === 200 ? true : undefined), 30_000, 250);
      console.info(`${kafkaClient}: Postgres stopped and killed under load: ${rows.length} deliveries, 0 missing, ${receiver.requests.length - rows.length} repeated (same webhook-id)`);
    } finally {
      await process.stop();
    }
  });
});

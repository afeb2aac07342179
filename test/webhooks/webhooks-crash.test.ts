import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestOutbox } from '../harness/fixture.js';
import { testKafkaClients } from '../harness/kafka-clients.js';
import { billingEvent, type OutboxRow } from '../harness/outbox.js';
import { delay, eventually, RelayProcess } from '../harness/relay-process.js';
import { kafkaClient as kafkaOf } from '../harness/kafka.js';
import { useTestWebhooks, verifiedBody, WebhookReceiver } from '../harness/webhooks.js';

/**
 * Durable delivery under kill -9: deliveries are recorded before offsets are committed and
 * completed only after the attempt, so a killed process loses nothing; what it had in flight
 * is sent again (same webhook-id) once its lease runs out. On each Kafka client the consumer can
 * run on (OUTBOX_KAFKA_CLIENT).
 */
describe.each(testKafkaClients())('webhooks survive kill -9 (consumer on %s)', (kafkaClient) => {
  const { outbox } = useTestOutbox({ aggregateTypes: ['invoice'] });
  const webhooks = useTestWebhooks(outbox);
  const receivers: WebhookReceiver[] = [];
  const processes: RelayProcess[] = [];
  let relay: RelayProcess;
  // 1 s attempts: a killed process's leases run out after 4 × 1 s + 5 s (leaseFor).
  const env = () => webhooks.env({ OUTBOX_KAFKA_CLIENT: kafkaClient, OUTBOX_WEBHOOK_RETRY_SCHEDULE: '0s,200ms,500ms,1s,2s,5s,10s,10s', OUTBOX_WEBHOOK_TIMEOUT: '1s', OUTBOX_WEBHOOK_CONCURRENCY: '50' });

  function startWebhooks(): RelayProcess {
    const started = new RelayProcess(env(), [], 'webhooks').start();
    processes.push(started);
    return started;
  }

  async function receiver(delayMs: number): Promise<WebhookReceiver> {
    const started = await new WebhookReceiver().start();
    started.answerWith(() => ({ status: 204, delayMs }));
    receivers.push(started);
    return started;
  }

  /** Inserts `total` events of `eventType` in transactions of `perTransaction`, `everyMs` apart. */
  async function load(eventType: string, total: number, perTransaction: number, everyMs: number): Promise<OutboxRow[]> {
    const rows: OutboxRow[] = [];
    for (let i = 0; i < total; i += perTransaction) {
      const batch = Array.from({ length: Math.min(perTransaction, total - i) }, (_, j) => billingEvent(`${eventType}-agg-${(i + j) % 17}`, i + j, eventType));
      await outbox.insert(batch);
      rows.push(...batch);
      await delay(everyMs);
    }
    return rows;
  }

  async function expectEveryDeliveryMade(rows: readonly OutboxRow[], endpoints: readonly { id: string; secret: string; receiver: WebhookReceiver }[]): Promise<{ duplicates: number }> {
    const expected = rows.length * endpoints.length;
    await eventually(
      `all ${expected} deliveries delivered`,
      async () => {
        const [counts] = await webhooks.query<{ delivered: number; total: number }>(
          `SELECT count(*) FILTER (WHERE status = 'delivered')::int AS delivered, count(*)::int AS total FROM wh.deliveries WHERE endpoint_id = ANY($1)`,
          [endpoints.map((e) => e.id)],
        );
        return counts!.delivered === expected ? true : undefined;
      },
      120_000,
      250,
    );
    let duplicates = 0;
    const committed = new Set(rows.map((row) => row.eventId));
    for (const endpoint of endpoints) {
      const received = endpoint.receiver.ids();
      // Nothing lost: every event arrived at every endpoint; nothing foreign arrived.
      expect(new Set(received)).toEqual(committed);
      duplicates += received.length - committed.size;
      // A duplicate is the same message: same webhook-id, same body, a valid signature.
      const bodies = new Map<string, string>();
      for (const request of endpoint.receiver.requests) {
        verifiedBody(endpoint.secret, request);
        const first = bodies.get(request.id);
        if (first !== undefined) expect(request.body).toBe(first);
        else bodies.set(request.id, request.body);
      }
    }
    // Every delivered delivery has its successful attempt on record.
    const [unrecorded] = await webhooks.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM wh.deliveries d WHERE d.endpoint_id = ANY($1) AND NOT EXISTS (SELECT 1 FROM wh.all_attempts a WHERE a.delivery_id = d.id AND a.outcome = 'delivered')`,
      [endpoints.map((e) => e.id)],
    );
    expect(unrecorded!.n).toBe(0);
    return { duplicates };
  }

  beforeAll(async () => {
    relay = new RelayProcess(outbox.relayEnv()).start();
    await relay.waitActive();
  });

  afterAll(async () => {
    for (const process of processes) await process.stop().catch(() => undefined);
    await relay?.stop();
    await Promise.all(receivers.map((r) => r.stop()));
  });

  it('kill -9 of the webhooks process under load, three times: no delivery lost, duplicates only of the same webhook-id', async () => {
    const [a, b] = [await receiver(3), await receiver(3)];
    const endpoints = [
      { ...(await webhooks.addEndpoint(a.url(), 'kill.*')), receiver: a },
      { ...(await webhooks.addEndpoint(b.url(), 'kill.invoice.paid')), receiver: b },
    ];
    let current = startWebhooks();
    await current.waitForLog(/consuming and dispatching/);
    const loading = load('kill.invoice.paid', 3_000, 20, 40);
    for (let kill = 0; kill < 3; kill += 1) {
      await delay(1_500);
      await current.kill9();
      current = startWebhooks();
    }
    const rows = await loading;
    const { duplicates } = await expectEveryDeliveryMade(rows, endpoints);
    const [attempts] = await webhooks.query<{ n: number }>('SELECT count(*)::int AS n FROM wh.all_attempts a JOIN wh.deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = ANY($1)', [endpoints.map((e) => e.id)]);
    await current.stop();
    console.info(`${kafkaClient}: kill -9 ×3: ${rows.length} events, ${rows.length * endpoints.length} deliveries, 0 missing, ${duplicates} duplicates (same webhook-id), ${attempts!.n} attempts recorded`);
  });

  /** Per partition of the events' topic, its end offset now. */
  async function topicEnds(): Promise<{ partition: number; offset: string }[]> {
    const admin = kafkaOf().admin();
    await admin.connect();
    try {
      return (await admin.fetchTopicOffsets(outbox.topic('invoice'))).map(({ partition, offset }) => ({ partition, offset }));
    } finally {
      await admin.disconnect();
    }
  }

  it('events the store has, read again (as after a crash inside the offset-commit interval), are recorded first and not sent again', async () => {
    const quick = await receiver(0);
    const endpoint = { ...(await webhooks.addEndpoint(quick.url(), 'reread.invoice.paid')), receiver: quick };
    const before = await topicEnds();
    const first = startWebhooks();
    await first.waitForLog(/consuming and dispatching/);
    const rows = await load('reread.invoice.paid', 300, 50, 10);
    await eventually(
      'every reread delivery recorded',
      async () => ((await webhooks.query<{ n: number }>(`SELECT count(*)::int AS n FROM wh.deliveries WHERE endpoint_id = $1 AND status = 'delivered'`, [endpoint.id]))[0]!.n === rows.length ? true : undefined),
      60_000,
    );
    await first.stop();
    // The group's offsets moved back to before these events: the next process reads all of them
    // again, as it reads what a killed one recorded but had not yet committed.
    const admin = kafkaOf().admin();
    await admin.connect();
    try {
      await admin.setOffsets({ groupId: webhooks.group, topic: outbox.topic('invoice'), partitions: before });
    } finally {
      await admin.disconnect();
    }
    const next = startWebhooks();
    await next.waitForLog(/consuming and dispatching/);
    // Later events on every partition (the same aggregates): each partition is read in order, so
    // once they arrive, what was read again before them has been taken.
    const later = await load('reread.invoice.paid', 34, 34, 0);
    await eventually('the later events delivered', async () => (later.every((row) => quick.ids().includes(row.eventId)) ? true : undefined), 60_000);
    await next.stop();
    // Every event once: what was read again was in the store, recorded first, and sent no more.
    expect(quick.ids().sort()).toEqual([...rows, ...later].map((row) => row.eventId).sort());
    console.info(`${kafkaClient}: ${rows.length} events read again, ${quick.requests.length - rows.length - later.length} sent twice`);
  });

  it('two processes share the work; one killed -9: every delivery made, per-endpoint limit and order kept across them', async () => {
    // Slow enough that its limit of 4 binds under the load: first attempts sent before they are
    // recorded take the endpoint's slots in Postgres first, so the limit holds across processes.
    const plain = await receiver(20);
    const ordered = await receiver(10);
    const endpoints = [
      { ...(await webhooks.addEndpoint(plain.url(), 'pair.invoice.paid', ['--max-in-flight', '4'])), receiver: plain },
      { ...(await webhooks.addEndpoint(ordered.url(), 'pair.invoice.paid', ['--ordered', '--max-in-flight', '3'])), receiver: ordered },
    ];
    const [first, second] = [startWebhooks(), startWebhooks()];
    await first.waitForLog(/consuming and dispatching/);
    await second.waitForLog(/consuming and dispatching/);
    const loading = load('pair.invoice.paid', 1_500, 10, 30);
    // Killed once it has sent some of them (on a busy machine its share of the partitions can
    // come seconds after the load began): what it had in flight is what the other must finish.
    await eventually('the second process to attempt deliveries', async () => {
      const [attempts] = await webhooks.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM wh.all_attempts a JOIN wh.deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = ANY($1) AND a.process LIKE $2`,
        [endpoints.map((e) => e.id), `%:${second.pid}:%`],
      );
      return attempts!.n > 0 ? true : undefined;
    }, 60_000);
    const killedAt = Date.now();
    await second.kill9();
    const rows = await loading;
    const { duplicates } = await expectEveryDeliveryMade(rows, endpoints);
    const byProcess = await webhooks.query<{ process: string; n: number }>(
      `SELECT a.process, count(*)::int AS n FROM wh.all_attempts a JOIN wh.deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = ANY($1) GROUP BY a.process`,
      [endpoints.map((e) => e.id)],
    );
    // Both processes did part of the work.
    expect(byProcess.length).toBe(2);
    // Duplicates only of what the killed process had in flight, sent after the kill.
    for (const endpoint of endpoints) {
      const seen = new Set<string>();
      for (const request of endpoint.receiver.requests) {
        if (seen.has(request.id)) expect(request.at).toBeGreaterThanOrEqual(killedAt);
        seen.add(request.id);
      }
    }
    // Each endpoint's limit held over both processes, and was reached.
    expect(plain.mostInFlight).toBe(4);
    expect(ordered.mostInFlight).toBeLessThanOrEqual(3);
    // Per aggregate, the ordered endpoint received each event only after the previous one.
    const sequence = new Map(rows.map((row) => [row.eventId, (row.payload as { sequence: number }).sequence]));
    const aggregate = new Map(rows.map((row) => [row.eventId, row.aggregateId]));
    const last = new Map<string, number>();
    for (const request of ordered.requests) {
      const key = aggregate.get(request.id)!;
      const at = sequence.get(request.id)!;
      // A resend after the kill may repeat the latest event of its aggregate, never an older one.
      expect(at, `aggregate ${key}`).toBeGreaterThanOrEqual(last.get(key) ?? -1);
      last.set(key, at);
    }
    console.info(`${kafkaClient}: two processes, one killed -9: ${rows.length} events, ${rows.length * endpoints.length} deliveries, 0 missing, ${duplicates} duplicates (same webhook-id, after the kill), attempts by process ${byProcess.map((p) => p.n).join(' + ')}, plain endpoint at most ${plain.mostInFlight} in flight (limit 4), ordered endpoint at most ${ordered.mostInFlight} (limit 3)`);
  });
});

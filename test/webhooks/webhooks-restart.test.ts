// vitest: runs alone (it asserts the time from a restart to the first delivery)
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestOutbox } from '../harness/fixture.js';
import { testKafkaClients } from '../harness/kafka-clients.js';
import { kafkaClient as kafkaOf } from '../harness/kafka.js';
import { billingEvent, type OutboxRow } from '../harness/outbox.js';
import { delay, eventually, RelayProcess } from '../harness/relay-process.js';
import { useTestWebhooks, WebhookReceiver } from '../harness/webhooks.js';

/** What the restarted process must stay under, from its start to its first delivery of a new event. */
const RESTART_TO_DELIVERY_MS = 10_000;
/** How long the process with a slow endpoint must keep its place in the group. */
const STEADY_MS = 35_000;

/**
 * A webhooks process killed -9 and started again delivers new events within seconds: the
 * group's session timeout (the dead member's partitions are handed out only once it expires)
 * is short, and the consumer still keeps its session through batches that take seconds (a
 * slow endpoint holding every slot), so the group does not rebalance while it works. On each
 * Kafka client the consumer can run on (OUTBOX_KAFKA_CLIENT).
 */
describe.each(testKafkaClients())('webhooks restart after kill -9 (consumer on %s)', (kafkaClient) => {
  const { outbox } = useTestOutbox({ aggregateTypes: ['invoice'] });
  const webhooks = useTestWebhooks(outbox);
  const receivers: WebhookReceiver[] = [];
  const processes: RelayProcess[] = [];
  let relay: RelayProcess;

  function startWebhooks(extra: Record<string, string> = {}): RelayProcess {
    const started = new RelayProcess(webhooks.env({ OUTBOX_KAFKA_CLIENT: kafkaClient, ...extra }), [], 'webhooks').start();
    processes.push(started);
    return started;
  }

  /** Inserts one `eventType` event every `everyMs` until stopped; each with the time it was committed. */
  function steadyLoad(eventType: string, everyMs: number): { readonly rows: { row: OutboxRow; at: number }[]; stop(): Promise<void> } {
    const rows: { row: OutboxRow; at: number }[] = [];
    let running = true;
    const loading = (async () => {
      for (let i = 0; running; i += 1) {
        const row = billingEvent(`${eventType}-agg-${i % 7}`, i, eventType);
        await outbox.insert([row]);
        rows.push({ row, at: Date.now() });
        await delay(everyMs);
      }
    })();
    return {
      rows,
      async stop() {
        running = false;
        await loading;
      },
    };
  }

  beforeAll(async () => {
    relay = new RelayProcess(outbox.relayEnv()).start();
    await relay.waitActive();
  });

  afterAll(async () => {
    for (const started of processes) await started.stop().catch(() => undefined);
    await relay?.stop();
    await Promise.all(receivers.map((r) => r.stop()));
  });

  it(`a process killed -9 and started again delivers a new event within ${RESTART_TO_DELIVERY_MS / 1000} s of its start`, async () => {
    const receiver = await new WebhookReceiver().start();
    receivers.push(receiver);
    await webhooks.addEndpoint(receiver.url(), 'restart.invoice.paid');
    const first = startWebhooks();
    await first.waitForLog(/consuming and dispatching/);
    const load = steadyLoad('restart.invoice.paid', 100);
    let second: RelayProcess | null = null;
    try {
      // Steady: events flowing, delivered, their offsets committed.
      await eventually('20 events delivered before the kill', async () => (receiver.requests.length >= 20 ? true : undefined), 60_000, 100);
      await delay(1_500);
      await first.kill9();
      const killedAt = Date.now();
      const restartedAt = Date.now();
      second = startWebhooks();
      const startedUp = second.waitForLog(/consuming and dispatching/).then(() => Date.now(), () => Number.NaN);
      // The first request for an event committed after the kill: the restarted process is consuming.
      const firstNew = await eventually(
        'a delivery of an event inserted after the kill',
        async () => {
          const after = new Set(load.rows.filter(({ at }) => at > killedAt).map(({ row }) => row.eventId));
          return receiver.requests.find((request) => request.at >= restartedAt && after.has(request.id));
        },
        90_000,
        20,
      );
      const tookMs = firstNew.at - restartedAt;
      const startupMs = (await startedUp) - restartedAt;
      console.info(`${kafkaClient}: restart after kill -9: process up (consuming and dispatching) after ${(startupMs / 1000).toFixed(1)} s, first delivery of a new event ${(tookMs / 1000).toFixed(1)} s after the restart`);
      expect(tookMs).toBeLessThan(RESTART_TO_DELIVERY_MS);
    } finally {
      await load.stop();
      // Out of the group before the next test, whatever failed above.
      await second?.stop();
    }
  });

  it(`with a slow endpoint (answers in 1-2 s, batches wait for slots) the group does not rebalance for ${STEADY_MS / 1000} s`, async () => {
    const receiver = await new WebhookReceiver().start();
    receivers.push(receiver);
    receiver.answerWith(() => ({ status: 204, delayMs: 1_000 + Math.floor(Math.random() * 1_000) }));
    const endpoint = await webhooks.addEndpoint(receiver.url(), 'slow.invoice.paid');
    // Two requests at once, eight deliveries held: the endpoint's own limit (10) never frees a
    // slot before the process does, so a chunk of a batch waits for one (up to 5 s,
    // MAX_RESERVE_WAIT_MS). Without heartbeats of its own during a batch, kafkajs's consumer
    // went 5.0 s between heartbeats here: a hair under a 6 s session.
    const slow = startWebhooks({ OUTBOX_WEBHOOK_CONCURRENCY: '2' });
    await slow.waitForLog(/consuming and dispatching/);
    const admin = kafkaOf().admin();
    await admin.connect();
    const load = steadyLoad('slow.invoice.paid', 100);
    try {
      await eventually('a first delivery to the slow endpoint', async () => (receiver.requests.length > 0 ? true : undefined), 60_000, 100);
      // Watched from the broker: the group's state and its members, every 200 ms.
      const members = new Set<string>();
      const states = new Map<string, number>();
      const changes: string[] = [];
      const logged = slow.logs.length;
      const since = Date.now();
      const until = since + STEADY_MS;
      let seen = '';
      while (Date.now() < until) {
        const { groups } = await admin.describeGroups([webhooks.group]);
        const group = groups[0]!;
        states.set(group.state, (states.get(group.state) ?? 0) + 1);
        for (const member of group.members) members.add(member.memberId);
        const now = `${group.state} [${group.members.map((member) => member.memberId.slice(-8)).join(', ')}]`;
        if (now !== seen) changes.push(`${((Date.now() - since) / 1000).toFixed(1)} s: ${now}`);
        seen = now;
        await delay(200);
      }
      await load.stop();
      const [recorded] = await webhooks.query<{ n: number }>(`SELECT count(*)::int AS n FROM wh.deliveries WHERE endpoint_id = $1`, [endpoint.id]);
      // What the process said about its group meanwhile: it logs no join, but kafkajs warns "The
      // group is rebalancing, re-joining" and errs "The coordinator is not aware of this member",
      // librdkafka's warnings name their facility (a session timed out, a poll interval exceeded),
      // and a failed consumer is "webhooks: the consumer failed".
      const warnings = slow.logs.slice(logged).filter((line) => line.level >= 40);
      const groupLines = warnings.filter((line) => /rebalanc|re-?join|not aware of this member|session|heartbeat|poll|assign|revok|consumer failed/i.test(`${line.msg} ${String(line.kafkajs ?? '')} ${String(line.librdkafka ?? '')} ${String(line.err ?? '')}`));
      const warned = new Map<string, number>();
      for (const line of warnings) warned.set(line.msg, (warned.get(line.msg) ?? 0) + 1);
      console.info(
        `${kafkaClient}: slow endpoint for ${STEADY_MS / 1000} s: group states seen ${[...states].map(([state, n]) => `${state}×${n}`).join(', ')}, members ${members.size} (${changes.join('; ')}), ` +
          `${load.rows.length} events inserted, ${recorded!.n} recorded, ${receiver.requests.length} requests; about the group in the log: ${groupLines.length} lines${groupLines.map((line) => `\n  ${JSON.stringify(line)}`).join('')}` +
          `; other warnings: ${[...warned].map(([msg, n]) => `${n}× ${msg.slice(0, 60)}`).join('; ') || 'none'}`,
      );
      // The intake was still behind the load at the end: its batches were waiting for slots.
      expect(recorded!.n).toBeLessThan(load.rows.length);
      expect([...states.keys()]).toEqual(['Stable']);
      expect(members.size).toBe(1);
      expect(groupLines).toEqual([]);
    } finally {
      await load.stop();
      await admin.disconnect();
      await slow.stop();
    }
  });
});

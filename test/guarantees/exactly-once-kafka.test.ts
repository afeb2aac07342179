import { describe, expect, it } from 'vitest';
import { serviceAction } from '../harness/control.js';
import { EXACTLY_ONCE, expectExactlyOnce, useExactlyOnceOutbox } from '../harness/exactly-once.js';
import { useTestOutbox } from '../harness/fixture.js';
import { testKafkaClients } from '../harness/kafka-clients.js';
import { kafkaClient, openForgottenTransaction, TopicReader, waitForLeaders } from '../harness/kafka.js';
import { OutboxLoad } from '../harness/load.js';
import { billingEvent } from '../harness/outbox.js';
import { delay, eventually, RelayProcess } from '../harness/relay-process.js';

/**
 * OUTBOX_DELIVERY=exactly-once where Kafka is in the fault: a broker restart mid-transaction,
 * a transaction another producer left open on the progress topic, one of the slot's own that
 * the coordinator forgot, a progress topic that can never commit. Kafka's side alone decides
 * these, so they run once (on Postgres 15), not on every Postgres version.
 */
describe.each(testKafkaClients())('exactly-once delivery on %s, Kafka faults', (client) => {
  describe('broker restart', () => {
    const { outbox, env } = useExactlyOnceOutbox(client);

    it('a broker restart mid-transaction loses nothing and duplicates nothing', async () => {
      const relay = new RelayProcess(env()).start();
      const load = new OutboxLoad(outbox, { writers: 2, rowsPerTransaction: 2, aggregates: 10, pauseMs: 3 }).start();
      try {
        await relay.waitActive();
        await delay(1_500);
        await serviceAction('kill', 'kafka');
        await delay(3_000);
        await serviceAction('start', 'kafka');
        await delay(3_000);
      } finally {
        await load.stop();
        await serviceAction('start', 'kafka');
      }
      await expectExactlyOnce(outbox, load.rolledBackIds, () => relay.tail());
      expect(await relay.stop()).toBe(0);
    });
  });

  describe('a transaction left open on a shared progress topic', () => {
    const { outbox, env } = useExactlyOnceOutbox(client);

    it('waits for it, saying which partition and offset hold it back, and delivers once it ends', async () => {
      const progressTopic = `${outbox.topicPrefix}.progress`;
      // Another relay group's producer on the same progress topic, its transaction left open (as
      // a crashed one leaves it, or as a broker restart can leave an abort the coordinator lost).
      await createProgressTopic(progressTopic);
      const other = kafkaClient().producer({ transactionalId: `${outbox.slot}.other`, idempotent: true, maxInFlightRequests: 1, transactionTimeout: 60_000 });
      await other.connect();
      let open: Awaited<ReturnType<typeof other.transaction>> | null = null;
      let relay: RelayProcess | null = null;
      try {
        open = await other.transaction();
        await open.send({ topic: progressTopic, messages: [{ key: 'another-system/another-slot', value: '{}' }] });
        await outbox.insert([billingEvent('inv-open-1', 1)]);
        relay = new RelayProcess(env()).start();
        const started = relay;
        const stalled = await eventually('the relay to say what holds it back', async () => started.logs.find((line) => /has not moved for/.test(String(line.err))), 45_000).catch((error: Error) => {
          throw new Error(`${error.message}; last lines:\n${started.tail()}`);
        });
        expect(String(stalled.err)).toContain(`${progressTopic}-0: its last stable offset stays at 0, below its end 1`);
        expect(relay.logs.some((line) => /^active:/.test(line.msg))).toBe(false);
        await open.abort();
        await relay.waitActive(30_000);
        const reader = await new TopicReader().start([outbox.topic('invoice')]);
        try {
          await reader.until('the event', (records) => records.length >= 1, 30_000, () => relay?.tail() ?? '');
          await delay(2_000); // a duplicate would come with the same fetches
          expect(reader.records.map((record) => record.headers.event_id)).toEqual([(await outbox.committedIds())[0]]);
        } finally {
          await reader.stop();
        }
      } finally {
        if (open?.isActive()) await open.abort();
        await other.disconnect();
        await relay?.stop();
      }
    });
  });

  describe("a transaction of the slot's own id that the coordinator forgot", () => {
    const { outbox, env } = useExactlyOnceOutbox(client);

    it('is ended by the marker of a transaction the relay commits on the progress partition, and the stream goes on', async () => {
      const progressTopic = `${outbox.topicPrefix}.progress`;
      await createProgressTopic(progressTopic);
      // What a broker restart left in CI: an earlier session's transaction open on the progress
      // partition, its markers skipped, so fencing (InitProducerId) does not abort it.
      await openForgottenTransaction(`outbox-relay.${outbox.slot}`, progressTopic, 0, { key: 'left-open-by-an-earlier-session', value: '{}' });
      await outbox.insert([billingEvent('inv-forgotten-1', 1)]);
      const relay = new RelayProcess(env()).start();
      try {
        await relay.waitActive(60_000);
        expect(relay.logs.some((line) => /is held by a transaction that fencing did not end: committing one of this slot's own on it/.test(line.msg)), relay.tail()).toBe(true);
        const reader = await new TopicReader().start([outbox.topic('invoice')]);
        try {
          await reader.until('the event', (records) => records.length >= 1, 30_000, () => relay.tail());
          await delay(2_000); // a duplicate would come with the same fetches
          expect(reader.records.map((record) => record.headers.event_id)).toEqual([(await outbox.committedIds())[0]]);
        } finally {
          await reader.stop();
        }
      } finally {
        await relay.stop();
      }
    });
  });

  describe('a progress topic that cannot commit', () => {
    const { outbox } = useTestOutbox({ kafkaClient: client });

    it('stops at start, naming min.insync.replicas, instead of retrying transactions that can never commit', async () => {
      const progressTopic = `${outbox.topicPrefix}.progress`;
      const admin = kafkaClient().admin();
      await admin.connect();
      try {
        await admin.createTopics({ topics: [{ topic: progressTopic, numPartitions: 1, replicationFactor: 1, configEntries: [{ name: 'min.insync.replicas', value: '2' }, { name: 'cleanup.policy', value: 'compact' }] }], waitForLeaders: true });
      } finally {
        await admin.disconnect();
      }
      const relay = new RelayProcess(outbox.relayEnv({ ...EXACTLY_ONCE, OUTBOX_PROGRESS_TOPIC: progressTopic })).start();
      expect(await relay.waitExit(60_000)).not.toBe(0);
      const stopped = relay.logs.find((line) => line.code === 'SINK_EXACTLY_ONCE');
      expect(stopped?.err ?? stopped?.msg, relay.tail()).toMatch(/min\.insync\.replicas=2 exceeds replication\.factor=1/);
    });
  });
});

/**
 * The progress topic as the relay creates it: one partition, compacted, the brokers' default
 * replication (so that the suite also runs against the three-broker cluster, whose
 * min.insync.replicas=2 the relay rightly refuses on a single replica).
 */
async function createProgressTopic(progressTopic: string): Promise<void> {
  const admin = kafkaClient().admin();
  await admin.connect();
  try {
    await admin.createTopics({ topics: [{ topic: progressTopic, numPartitions: 1, configEntries: [{ name: 'cleanup.policy', value: 'compact' }] }] });
    await waitForLeaders(admin, [progressTopic]);
  } finally {
    await admin.disconnect();
  }
}

import { describe, expect, it } from 'vitest';
import type { KafkaClientName } from '../../src/sink/producer.js';
import { serviceAction } from '../harness/control.js';
import { expectOrderPerAggregate, useTestOutbox } from '../harness/fixture.js';
import { testKafkaClients } from '../harness/kafka-clients.js';
import { kafkaClient, openForgottenTransaction, TopicReader, waitForLeaders, type ConsumedRecord } from '../harness/kafka.js';
import { OutboxLoad } from '../harness/load.js';
import { billingEvent, type TestOutbox } from '../harness/outbox.js';
import { delay, eventually, RelayProcess } from '../harness/relay-process.js';

const EXACTLY_ONCE = { OUTBOX_DELIVERY: 'exactly-once' };

/**
 * OUTBOX_DELIVERY=exactly-once against the real broker: whatever kills the relay, a consumer
 * reading committed records sees every committed event once, in order per aggregate, and no
 * rolled-back one. Returns the read_committed records and how many copies a read_uncommitted
 * consumer saw (what at-least-once consumers would have had to dedupe).
 */
async function expectExactlyOnce(outbox: TestOutbox, load: OutboxLoad, context: () => string): Promise<{ records: readonly ConsumedRecord[]; uncommittedDuplicates: number }> {
  const committed = await outbox.committedIds();
  const topics = [outbox.topic('invoice')];
  const committedReader = await new TopicReader().start(topics);
  const uncommittedReader = await new TopicReader(undefined, true).start(topics);
  try {
    await committedReader.until(`all ${committed.length} committed events`, (records) => records.length >= committed.length, 120_000, context);
    // Anything more (a duplicate) would come with the same fetches: wait a little for it.
    await delay(2_000);
    await uncommittedReader.until('the uncommitted reader to catch up', (records) => new Set(records.map((r) => r.headers.event_id)).size >= committed.length, 60_000);
    const ids = committedReader.records.map((record) => record.headers.event_id!);
    const counts = new Map<string, number>();
    for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
    const duplicated = [...counts].filter(([, count]) => count > 1).map(([id]) => id);
    expect(duplicated, `${duplicated.length} events delivered more than once to a read_committed consumer\n${context()}`).toEqual([]);
    expect([...counts.keys()].sort()).toEqual([...committed].sort());
    const rolledBack = new Set(load.rolledBackIds);
    expect(ids.filter((id) => rolledBack.has(id))).toEqual([]);
    expectOrderPerAggregate(committedReader.records);
    return { records: committedReader.records, uncommittedDuplicates: uncommittedReader.records.length - new Set(uncommittedReader.records.map((r) => r.headers.event_id)).size };
  } finally {
    await committedReader.stop();
    await uncommittedReader.stop();
  }
}

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

/** A fresh outbox (table, slot, topics) per test: each counts its own events. */
function useExactlyOnceOutbox(kafkaClient: KafkaClientName) {
  const { outbox } = useTestOutbox({ kafkaClient });
  return { outbox, env: () => outbox.relayEnv({ ...EXACTLY_ONCE, OUTBOX_PROGRESS_TOPIC: `${outbox.topicPrefix}.progress` }) };
}

describe.each(testKafkaClients())('exactly-once delivery on %s', (client) => {
  describe('kill -9 under load', () => {
    const { outbox, env } = useExactlyOnceOutbox(client);

    it('kill -9 ten times under load: a read_committed consumer sees every committed event exactly once', async () => {
      const load = new OutboxLoad(outbox, { writers: 4, rowsPerTransaction: 3, aggregates: 20, pauseMs: 2, rollbackEvery: 7 }).start();
      const kills = 10;
      let relay = new RelayProcess(env()).start();
      try {
        await relay.waitActive();
        for (let kill = 0; kill < kills; kill += 1) {
          await delay(600 + Math.floor(Math.random() * 1_200));
          await relay.kill9();
          await eventually('the slot to be released', async () => ((await outbox.slotState()).active ? undefined : true));
          relay = new RelayProcess(env()).start();
          await relay.waitActive();
        }
      } finally {
        await load.stop();
      }
      const { records, uncommittedDuplicates } = await expectExactlyOnce(outbox, load, () => relay.tail());
      expect(relay.logs.some((line) => /exactly-once: events up to this point are in Kafka/.test(line.msg))).toBe(true);
      await relay.stop();
      process.stdout.write(`exactly-once (${client}): ${records.length} committed events after ${kills} kills, 0 duplicates read_committed, ${uncommittedDuplicates} duplicates read_uncommitted, ${load.rolledBackIds.length} rolled back\n`);
    });
  });

  describe('standby takeover', () => {
    const { outbox, env } = useExactlyOnceOutbox(client);

    it('a standby taking over from a killed active instance sends nothing twice', async () => {
      const load = new OutboxLoad(outbox, { writers: 2, rowsPerTransaction: 2, aggregates: 10, pauseMs: 3 }).start();
      const active = new RelayProcess(env()).start();
      let standby: RelayProcess | null = null;
      try {
        await active.waitActive();
        standby = new RelayProcess(env()).start();
        await standby.waitForLog(/^standby/);
        await delay(1_500);
        await active.kill9();
        await standby.waitActive(30_000);
        await delay(1_500);
      } finally {
        await load.stop();
      }
      await expectExactlyOnce(outbox, load, () => standby?.tail() ?? '');
      await standby.stop();
    });
  });

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
      await expectExactlyOnce(outbox, load, () => relay.tail());
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

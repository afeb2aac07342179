import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KAFKA_CLIENTS } from '../../src/sink/producer.js';
import { expectEveryCommittedEventDelivered, expectOrderPerAggregate } from '../harness/fixture.js';
import { get, metric } from '../harness/http.js';
import { useKafkaCluster, type BrokerId } from '../harness/kafka-cluster.js';
import { OutboxLoad } from '../harness/load.js';
import { billingEvent, TestOutbox } from '../harness/outbox.js';
import { freePort } from '../harness/ports.js';
import { delay, eventually, RelayProcess } from '../harness/relay-process.js';

/** What the relay logs (src/relay.ts) each time it starts a session again from the confirmed position. */
const STREAM_RESUMED = 'stream interrupted; resuming from the confirmed position';

/**
 * A three-broker cluster (replication factor 3, min.insync.replicas 2, no unclean leader
 * election) whose brokers die, restart and go away under load. Partition leaders move while a
 * produce request is in flight: every committed event must still arrive, in order per
 * aggregate, and none of a rolled-back transaction.
 */
describe.each(KAFKA_CLIENTS)('Kafka leader changes in a three-broker cluster (%s)', (kafkaClient) => {
  const cluster = useKafkaCluster();
  let outbox: TestOutbox;

  // Each test its own outbox and topic: its writers' sequences start again at 1.
  beforeEach(async () => {
    // A broker restarted by the previous test answers before the controller counts it in again.
    await cluster.untilAllBrokersServe();
    outbox = new TestOutbox({ kafkaClient });
    await outbox.create();
    await cluster.createTopics([outbox.topic('invoice')]);
  });

  // A failed test must not leave its relay holding the slot for the next one.
  const relays: RelayProcess[] = [];
  afterEach(async () => {
    await Promise.all(relays.splice(0).map((relay) => relay.kill9()));
    await outbox.destroy();
  });

  function startRelay(extra: Record<string, string> = {}): RelayProcess {
    const relay = new RelayProcess(outbox.relayEnv({ KAFKA_BROKERS: cluster.brokers, ...extra })).start();
    relays.push(relay);
    return relay;
  }

  function startLoad(): OutboxLoad {
    return new OutboxLoad(outbox, { writers: 3, rowsPerTransaction: 2, aggregates: 15, pauseMs: 3, rollbackEvery: 20 }).start();
  }

  /**
   * Everything committed arrived, nothing rolled back did, order per aggregate held; returns the
   * figures, with the relay's stream resumes (each re-sends what was not confirmed yet: where
   * duplicates come from) and their error codes.
   */
  async function expectNothingLostNorReordered(load: OutboxLoad, relay: RelayProcess): Promise<{ committed: number; duplicates: number; resumes: string }> {
    const records = await expectEveryCommittedEventDelivered(outbox, () => relay.tail(), cluster.brokers);
    const delivered = new Set(records.map((record) => record.headers.event_id));
    expect(load.rolledBackIds.length).toBeGreaterThan(0);
    expect(load.rolledBackIds.filter((id) => delivered.has(id))).toEqual([]);
    expectOrderPerAggregate(records);
    const resumes = relay.logs.filter((line) => line.msg === STREAM_RESUMED).map((line) => String(line.code));
    return { committed: delivered.size, duplicates: records.length - delivered.size, resumes: `${resumes.length} stream resumes${resumes.length > 0 ? ` (${resumes.join(', ')})` : ''}` };
  }

  it('loses nothing when partition leaders are killed -9 and restarted, one at a time', { timeout: 360_000 }, async () => {
    const relay = startRelay();
    const load = startLoad();
    const recoveries: number[] = [];
    try {
      await relay.waitActive();
      for (let kill = 0; kill < 4; kill += 1) {
        await delay(4_000);
        const victim = await cluster.leaderOf(outbox.topic('invoice'), kill % 6);
        const killedAt = Date.now();
        await cluster.broker('kill', victim);
        // Recovered = events committed after the kill (some on the dead leader's partitions,
        // which need their new leader) are confirmed: Kafka acknowledged them.
        const walAfterKill = await outbox.currentWalLsn();
        const recovered = eventually('the slot to pass the kill', async () => ((await outbox.slotState()).confirmed >= walAfterKill ? Date.now() : undefined), 90_000, 100);
        await delay(6_000);
        await cluster.broker('start', victim);
        recoveries.push((await recovered) - killedAt);
        process.stdout.write(`leader kills (${kafkaClient}): broker ${victim} killed, events committed after the kill confirmed ${recoveries.at(-1)} ms after it\n`);
      }
      await delay(3_000);
    } finally {
      await load.stop();
    }
    const { committed, duplicates, resumes } = await expectNothingLostNorReordered(load, relay);
    expect(await relay.stop()).toBe(0);
    process.stdout.write(`leader kills (${kafkaClient}): ${committed} committed, 0 missing, ${duplicates} duplicates, ${resumes}, ${load.rolledBackIds.length} rolled back; recovery per kill (ms): ${recoveries.join(', ')}\n`);
  });

  it('loses nothing through a rolling restart (each broker stopped cleanly and started again)', { timeout: 300_000 }, async () => {
    const relay = startRelay();
    const load = startLoad();
    try {
      await relay.waitActive();
      for (const id of [1, 2, 3] as BrokerId[]) {
        await delay(3_000);
        await cluster.broker('stop', id);
        await delay(2_000);
        await cluster.broker('start', id);
      }
      await delay(3_000);
    } finally {
      await load.stop();
    }
    const { committed, duplicates, resumes } = await expectNothingLostNorReordered(load, relay);
    expect(await relay.stop()).toBe(0);
    process.stdout.write(`rolling restart (${kafkaClient}): ${committed} committed, 0 missing, ${duplicates} duplicates, ${resumes}\n`);
  });

  it('holds the slot and says why while two of three brokers are down, then delivers everything', { timeout: 300_000 }, async () => {
    const port = await freePort();
    const relay = startRelay({ OUTBOX_HTTP_PORT: String(port) });
    const load = startLoad();
    const confirmedDuringOutage: bigint[] = [];
    try {
      await relay.waitActive();
      await delay(2_000);
      await cluster.broker('kill', 2);
      await cluster.broker('kill', 3);
      // The controller fences them after its session timeout (4 s); then every partition has
      // one in-sync replica, below min.insync.replicas: Kafka refuses writes.
      await delay(8_000);
      const committedBefore = (await outbox.committedIds()).length;
      // Longer than the producer's retries of one batch (~20 s): the stream restarts meanwhile.
      for (let sample = 0; sample < 30; sample += 1) {
        confirmedDuringOutage.push((await outbox.slotState()).confirmed);
        await delay(1_000);
      }
      expect((await outbox.committedIds()).length).toBeGreaterThan(committedBefore);
      const { body } = await get(port, '/metrics');
      expect(metric(body, 'outbox_relay_produce_errors_total', 'error="NOT_ENOUGH_REPLICAS"'), body).toBeGreaterThan(0);
      expect(relay.logs.some((line) => line.level === 40 && line.error === 'NOT_ENOUGH_REPLICAS'), relay.tail()).toBe(true);
      await cluster.broker('start', 2);
    } finally {
      await load.stop();
      // Both, whatever failed above (a running one is left as it is): the next test needs all three.
      await cluster.broker('start', 2);
      await cluster.broker('start', 3);
    }
    expect(new Set(confirmedDuringOutage).size, `confirmed positions during the outage: ${[...new Set(confirmedDuringOutage)].join(', ')}`).toBe(1);
    const { committed, duplicates, resumes } = await expectNothingLostNorReordered(load, relay);
    expect(await relay.stop()).toBe(0);
    process.stdout.write(`two brokers down (${kafkaClient}): ${committed} committed, 0 missing, ${duplicates} duplicates, ${resumes}\n`);
  });

  it('warns at the first event of a topic whose settings can lose acknowledged events', async () => {
    const careless = outbox.topic('refund');
    await cluster.createTopics([careless], { replicationFactor: 1, minInsyncReplicas: 1 });
    const relay = startRelay();
    await relay.waitActive();
    await outbox.insert([billingEvent('inv_1', 1), { ...billingEvent('ref_1', 1, 'refund.issued'), aggregateType: 'refund' }]);
    const warning = await relay.waitForLog(new RegExp(`^topic ${careless} can lose acknowledged events`));
    expect(warning).toMatchObject({ level: 40, replicationFactor: 1, minInsyncReplicas: 1, uncleanLeaderElection: false });
    await relay.waitForLog(new RegExp(`^topic ${outbox.topic('invoice')}: replication settings keep acknowledged events`));
    expect(await relay.stop()).toBe(0);
  });
});

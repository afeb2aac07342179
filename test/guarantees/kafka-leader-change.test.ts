import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { KafkaClientName } from '../../src/kafka/ports.js';
import { testKafkaClients } from '../harness/kafka-clients.js';
import { expectEveryCommittedEventDelivered, expectOrderPerAggregate } from '../harness/fixture.js';
import { get, metric } from '../harness/http.js';
import { useKafkaCluster, type BrokerId } from '../harness/kafka-cluster.js';
import { OutboxLoad } from '../harness/load.js';
import { billingEvent, TestOutbox } from '../harness/outbox.js';
import { freePort } from '../harness/ports.js';
import { delay, eventually, RelayProcess } from '../harness/relay-process.js';

/** What the relay logs (src/relay.ts) each time it starts a session again from the confirmed position. */
const STREAM_RESUMED = 'stream interrupted; resuming from the confirmed position';

/** One Kafka client's relay: its own outbox, slot, topic and writers, through the same broker faults as the others. */
interface Lane {
  readonly client: KafkaClientName;
  readonly outbox: TestOutbox;
  relay: RelayProcess;
  load: OutboxLoad;
}

/**
 * A three-broker cluster (replication factor 3, min.insync.replicas 2, no unclean leader
 * election) whose brokers die, restart and go away under load. Partition leaders move while a
 * produce request is in flight: every committed event must still arrive, in order per
 * aggregate, and none of a rolled-back transaction.
 *
 * Every Kafka client runs at once, one relay each, through the same kills and restarts: a
 * broker restart takes ~20 s on a loaded machine, and one round of faults for all clients
 * instead of one per client halves the file's time without sparing any client a fault.
 */
/** The clients side by side: every one the suites run on, or those OUTBOX_TEST_KAFKA_CLIENTS names. */
const CLIENTS = testKafkaClients();

describe(`Kafka leader changes in a three-broker cluster (${CLIENTS.join(' and ')} side by side)`, () => {
  const cluster = useKafkaCluster();
  let outboxes: TestOutbox[] = [];
  const relays: RelayProcess[] = [];

  // Each test its own outboxes and topics: its writers' sequences start again at 1.
  beforeEach(async () => {
    // A broker restarted by the previous test answers before the controller counts it in again.
    await cluster.untilAllBrokersServe();
    outboxes = CLIENTS.map((kafkaClient) => new TestOutbox({ kafkaClient }));
    await Promise.all(outboxes.map((outbox) => outbox.create()));
    await cluster.createTopics(outboxes.map((outbox) => outbox.topic('invoice')));
  });

  // A failed test must not leave its relays holding the slots for the next one.
  afterEach(async () => {
    await Promise.all(relays.splice(0).map((relay) => relay.kill9()));
    await Promise.all(outboxes.map((outbox) => outbox.destroy()));
  });

  function startRelay(outbox: TestOutbox, extra: Record<string, string> = {}): RelayProcess {
    const relay = new RelayProcess(outbox.relayEnv({ KAFKA_BROKERS: cluster.brokers, ...extra })).start();
    relays.push(relay);
    return relay;
  }

  /** A relay and writers per client, once every relay is active. */
  async function startLanes(extra: (client: KafkaClientName) => Record<string, string> = () => ({})): Promise<Lane[]> {
    const lanes = outboxes.map((outbox) => {
      const client = outbox.kafkaClient!;
      // Each client's writers at about half the rate one client's had: the machine's load stays
      // what it was, and a broker still restarts in the time the faults below allow it.
      return { client, outbox, relay: startRelay(outbox, extra(client)), load: new OutboxLoad(outbox, { writers: 3, rowsPerTransaction: 2, aggregates: 15, pauseMs: 6, rollbackEvery: 20 }).start() };
    });
    await Promise.all(lanes.map((lane) => lane.relay.waitActive()));
    return lanes;
  }

  async function stopLoads(lanes: readonly Lane[]): Promise<void> {
    await Promise.all(lanes.map((lane) => lane.load.stop()));
  }

  /**
   * Everything committed arrived, nothing rolled back did, order per aggregate held; returns the
   * figures, with the relay's stream resumes (each re-sends what was not confirmed yet: where
   * duplicates come from) and their error codes.
   */
  async function expectNothingLostNorReordered({ outbox, relay, load, client }: Lane): Promise<string> {
    const records = await expectEveryCommittedEventDelivered(outbox, () => `${client}\n${relay.tail()}`, cluster.brokers);
    const delivered = new Set(records.map((record) => record.headers.event_id));
    expect(load.rolledBackIds.length).toBeGreaterThan(0);
    expect(load.rolledBackIds.filter((id) => delivered.has(id)), `${client}: rolled-back events in Kafka`).toEqual([]);
    expectOrderPerAggregate(records);
    expect(await relay.stop(), `${client}: the relay's exit code`).toBe(0);
    const resumes = relay.logs.filter((line) => line.msg === STREAM_RESUMED).map((line) => String(line.code));
    return `${delivered.size} committed, 0 missing, ${records.length - delivered.size} duplicates, ${resumes.length} stream resumes${resumes.length > 0 ? ` (${resumes.join(', ')})` : ''}, ${load.rolledBackIds.length} rolled back`;
  }

  /**
   * A broker leading partitions of every lane's topic (each kill must move a leader under every
   * client); of those, the one killed least so far, so that the kills go round the brokers.
   */
  async function leaderOfEveryLane(lanes: readonly Lane[], killed: readonly BrokerId[]): Promise<BrokerId> {
    const leads = await Promise.all(lanes.map((lane) => cluster.leadersOf(lane.outbox.topic('invoice'))));
    const candidates = ([1, 2, 3] as BrokerId[]).filter((broker) => leads.every((leaders) => leaders.includes(broker)));
    expect(candidates, `no broker leads partitions of every topic: ${leads.map((leaders) => leaders.join(',')).join(' / ')}`).not.toEqual([]);
    const kills = (broker: BrokerId) => killed.filter((victim) => victim === broker).length;
    return candidates.reduce((least, broker) => (kills(broker) < kills(least) ? broker : least));
  }

  it('loses nothing when partition leaders are killed -9 and restarted, one at a time', { timeout: 420_000 }, async () => {
    const lanes = await startLanes();
    const recoveries = new Map<KafkaClientName, number[]>(lanes.map((lane) => [lane.client, []]));
    const killed: BrokerId[] = [];
    try {
      for (let kill = 0; kill < 4; kill += 1) {
        await delay(4_000);
        const victim = await leaderOfEveryLane(lanes, killed);
        killed.push(victim);
        const killedAt = Date.now();
        await cluster.broker('kill', victim);
        // Recovered = events committed after the kill (some on the dead leader's partitions,
        // which need their new leader) are confirmed: Kafka acknowledged them.
        const recovered = lanes.map(async ({ outbox, client }) => {
          const walAfterKill = await outbox.currentWalLsn();
          const at = await eventually(`${client}: the slot to pass the kill`, async () => ((await outbox.slotState()).confirmed >= walAfterKill ? Date.now() : undefined), 90_000, 100);
          recoveries.get(client)!.push(at - killedAt);
        });
        await delay(6_000);
        await cluster.broker('start', victim);
        await Promise.all(recovered);
        process.stdout.write(`leader kills: broker ${victim} killed, events committed after the kill confirmed ${lanes.map(({ client }) => `${recoveries.get(client)!.at(-1)} ms (${client})`).join(', ')} after it\n`);
      }
      await delay(3_000);
    } finally {
      await stopLoads(lanes);
    }
    for (const lane of lanes) {
      const figures = await expectNothingLostNorReordered(lane);
      process.stdout.write(`leader kills (${lane.client}): ${figures}; recovery per kill (ms): ${recoveries.get(lane.client)!.join(', ')}\n`);
    }
  });

  it('loses nothing through a rolling restart (each broker stopped cleanly and started again)', { timeout: 300_000 }, async () => {
    const lanes = await startLanes();
    try {
      for (const id of [1, 2, 3] as BrokerId[]) {
        await delay(3_000);
        await cluster.broker('stop', id);
        await delay(2_000);
        await cluster.broker('start', id);
      }
      await delay(3_000);
    } finally {
      await stopLoads(lanes);
    }
    for (const lane of lanes) process.stdout.write(`rolling restart (${lane.client}): ${await expectNothingLostNorReordered(lane)}\n`);
  });

  it('holds the slot and says why while two of three brokers are down, then delivers everything', { timeout: 300_000 }, async () => {
    const ports = new Map<KafkaClientName, number>();
    for (const client of CLIENTS) ports.set(client, await freePort());
    const lanes = await startLanes((client) => ({ OUTBOX_HTTP_PORT: String(ports.get(client)) }));
    const confirmedDuringOutage = new Map<KafkaClientName, bigint[]>(lanes.map((lane) => [lane.client, []]));
    try {
      await delay(2_000);
      await cluster.broker('kill', 2);
      await cluster.broker('kill', 3);
      // The controller fences them after its session timeout (4 s); then every partition has
      // one in-sync replica, below min.insync.replicas: Kafka refuses writes.
      await delay(8_000);
      const committedBefore = await Promise.all(lanes.map(async (lane) => (await lane.outbox.committedIds()).length));
      // Longer than the producer's retries of one batch (~20 s): the stream restarts meanwhile.
      for (let sample = 0; sample < 30; sample += 1) {
        for (const lane of lanes) confirmedDuringOutage.get(lane.client)!.push((await lane.outbox.slotState()).confirmed);
        await delay(1_000);
      }
      for (const [index, lane] of lanes.entries()) {
        expect((await lane.outbox.committedIds()).length, `${lane.client}: writes went on`).toBeGreaterThan(committedBefore[index]!);
        const { body } = await get(ports.get(lane.client)!, '/metrics');
        expect(metric(body, 'outbox_relay_produce_errors_total', 'error="NOT_ENOUGH_REPLICAS"'), `${lane.client}\n${body}`).toBeGreaterThan(0);
        expect(lane.relay.logs.some((line) => line.level === 40 && line.error === 'NOT_ENOUGH_REPLICAS'), `${lane.client}\n${lane.relay.tail()}`).toBe(true);
      }
      await cluster.broker('start', 2);
    } finally {
      await stopLoads(lanes);
      // Both, whatever failed above (a running one is left as it is): the next test needs all three.
      await cluster.broker('start', 2);
      await cluster.broker('start', 3);
    }
    for (const lane of lanes) {
      const positions = new Set(confirmedDuringOutage.get(lane.client));
      expect(positions.size, `${lane.client}: confirmed positions during the outage: ${[...positions].join(', ')}`).toBe(1);
      process.stdout.write(`two brokers down (${lane.client}): ${await expectNothingLostNorReordered(lane)}\n`);
    }
  });

  it.each(CLIENTS)('warns at the first event of a topic whose settings can lose acknowledged events (%s)', async (client) => {
    const outbox = outboxes.find((candidate) => candidate.kafkaClient === client)!;
    const careless = outbox.topic('refund');
    await cluster.createTopics([careless], { replicationFactor: 1, minInsyncReplicas: 1 });
    const relay = startRelay(outbox);
    await relay.waitActive();
    await outbox.insert([billingEvent('inv_1', 1), { ...billingEvent('ref_1', 1, 'refund.issued'), aggregateType: 'refund' }]);
    const warning = await relay.waitForLog(new RegExp(`^topic ${careless} can lose acknowledged events`));
    expect(warning).toMatchObject({ level: 40, replicationFactor: 1, minInsyncReplicas: 1, uncleanLeaderElection: false });
    await relay.waitForLog(new RegExp(`^topic ${outbox.topic('invoice')}: replication settings keep acknowledged events`));
    expect(await relay.stop()).toBe(0);
  });
});

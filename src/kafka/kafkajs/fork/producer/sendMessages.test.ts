import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { createSendMessages, KAFKAJS_SEND_MESSAGES } from './sendMessages.js';

const require = createRequire(import.meta.url);

/** kafkajs's own sendMessages, loaded fresh from disk, leaving the module cache as it was. */
function kafkajsSendMessages(): typeof createSendMessages {
  const path = require.resolve(KAFKAJS_SEND_MESSAGES);
  const cached = require.cache[path];
  delete require.cache[path];
  try {
    return require(path) as typeof createSendMessages;
  } finally {
    if (cached) require.cache[path] = cached;
  }
}

const TOPIC = 'billing.invoice';

interface Message {
  readonly key: string;
  readonly value: string;
  readonly partition: number;
}

interface ProduceCall {
  readonly broker: number;
  readonly partitions: { partition: number; firstSequence: number; values: string[] }[];
}

/** Kafka error shapes as kafkajs raises them. */
function protocolError(type: string, retriable = true): Error {
  return Object.assign(new Error(type), { name: 'KafkaJSProtocolError', type, retriable });
}
function connectionClosed(): Error {
  return Object.assign(new Error('Closed connection'), { name: 'KafkaJSConnectionClosedError', retriable: true });
}

/**
 * A cluster of fake brokers at kafkajs's ports (cluster, broker, eosManager, retrier). `leaders`
 * is partition -> broker; a broker's `failures` are thrown by its next produce calls, and
 * `onFailure` can move leaders the way the controller would (seen at the next metadata refresh).
 */
class FakeCluster {
  readonly calls: ProduceCall[] = [];
  readonly sequences = new Map<number, number>();
  /** What each partition's leader log holds, in order. */
  readonly logs = new Map<number, string[]>();
  private metadataLeaders: Map<number, number>;
  failures = new Map<number, Error[]>();
  onFailure: (broker: number) => void = () => undefined;

  constructor(private leaders: Map<number, number>) {
    this.metadataLeaders = new Map(leaders);
  }

  moveLeader(partition: number, broker: number): void {
    this.leaders.set(partition, broker);
  }

  dependencies() {
    const broker = (nodeId: number) => ({
      nodeId,
      produce: async ({ topicData }: { topicData: { topic: string; partitions: { partition: number; firstSequence: number; messages: Message[] }[] }[] }) => {
        const partitions = topicData.flatMap((topic) => topic.partitions);
        this.calls.push({ broker: nodeId, partitions: partitions.map(({ partition, firstSequence, messages }) => ({ partition, firstSequence, values: messages.map((m) => m.value) })) });
        const failure = this.failures.get(nodeId)?.shift();
        if (failure) {
          this.onFailure(nodeId);
          throw failure;
        }
        for (const { partition, firstSequence, messages } of partitions) {
          if (this.leaders.get(partition) !== nodeId) throw protocolError('NOT_LEADER_OR_FOLLOWER');
          // The idempotent broker: a resend of what it has is acknowledged and not appended again.
          const log = this.logs.get(partition) ?? [];
          if (firstSequence < log.length) continue;
          if (firstSequence > log.length) throw protocolError('OUT_OF_ORDER_SEQUENCE_NUMBER', false);
          log.push(...messages.map((m) => m.value));
          this.logs.set(partition, log);
        }
        return { topics: topicData.map(({ topic, partitions: list }) => ({ topicName: topic, partitions: list.map(({ partition }) => ({ partition, errorCode: 0, baseOffset: '0' })) })) };
      },
    });
    const cluster = {
      addMultipleTargetTopics: async () => undefined,
      refreshMetadataIfNecessary: async () => undefined,
      refreshMetadata: async () => {
        this.metadataLeaders = new Map(this.leaders);
      },
      findTopicPartitionMetadata: () => [...this.metadataLeaders].map(([partitionId, leader]) => ({ partitionId, leader })),
      findLeaderForPartitions: (_topic: string, partitions: string[]) => {
        const result: Record<number, number[]> = {};
        for (const id of partitions) (result[this.metadataLeaders.get(Number(id))!] ??= []).push(Number(id));
        return result;
      },
      findBroker: async ({ nodeId }: { nodeId: string | number }) => brokers.get(Number(nodeId))!,
      isConnected: () => true,
      connect: async () => undefined,
      removeBroker: () => undefined,
    };
    const brokers = new Map([1, 2, 3].map((id) => [id, broker(id)]));
    const eosManager = {
      async acquireBrokerLock() {},
      releaseBrokerLock() {},
      isTransactional: () => false,
      async addPartitionsToTransaction() {},
      getTransactionalId: () => '',
      getProducerId: () => 1,
      getProducerEpoch: () => 0,
      getSequence: (_topic: string, partition: number) => this.sequences.get(partition) ?? 0,
      updateSequence: (_topic: string, partition: number, increment: number) => this.sequences.set(partition, (this.sequences.get(partition) ?? 0) + increment),
    };
    // kafkajs's retrier: calls again on a thrown retriable error, up to a few times.
    const retrier = async <T>(attempt: (bail: (error: Error) => void, retryCount: number, retryTime: number) => Promise<T>): Promise<T> => {
      for (let retryCount = 0; ; retryCount++) {
        let bailed: Error | null = null;
        try {
          const result = await attempt((error) => (bailed = error), retryCount, 0);
          if (bailed) throw bailed;
          return result;
        } catch (error) {
          if (bailed || retryCount >= 5 || !(error as { retriable?: boolean }).retriable) throw error;
        }
      }
    };
    const logger = { debug() {}, warn() {}, error() {}, info() {} };
    const partitioner = ({ message }: { message: Message }) => message.partition;
    return { cluster, eosManager, retrier, logger, partitioner };
  }
}

const messages = (count: number, partitions: number): Message[] => Array.from({ length: count }, (_, i) => ({ key: `k${i}`, value: `m${i}`, partition: i % partitions }));

function send(create: typeof createSendMessages, cluster: FakeCluster, batch: Message[]) {
  return create(cluster.dependencies() as never)({ acks: -1, timeout: 30_000, topicMessages: [{ topic: TOPIC, messages: batch }] });
}

/** Every message in its partition's log, in send order. */
function expectAllDelivered(cluster: FakeCluster, batch: Message[]): void {
  for (const partition of new Set(batch.map((m) => m.partition))) {
    expect(cluster.logs.get(partition), `partition ${partition}`).toEqual(batch.filter((m) => m.partition === partition).map((m) => m.value));
  }
}

/** Broker 1 dies mid-request; the controller moves its partition to broker 2, which already answered. */
function leaderKilledScenario(): FakeCluster {
  const cluster = new FakeCluster(new Map([[0, 1], [1, 2], [2, 3]]));
  cluster.failures.set(1, [connectionClosed()]);
  cluster.onFailure = (broker) => {
    if (broker === 1) cluster.moveLeader(0, 2);
  };
  return cluster;
}

describe('sendMessages: acknowledgement per partition', () => {
  it("kafkajs's own resolves without resending a partition that moved to a broker that already answered (the loss)", async () => {
    const cluster = leaderKilledScenario();
    const batch = messages(9, 3);
    await send(kafkajsSendMessages(), cluster, batch);
    expect(cluster.logs.get(0)).toBeUndefined();
  });

  it('resends that partition to its new leader: nothing lost, with the same sequence numbers', async () => {
    const cluster = leaderKilledScenario();
    const batch = messages(9, 3);
    const responses = await send(createSendMessages, cluster, batch);
    expectAllDelivered(cluster, batch);
    expect(cluster.calls.filter((call) => call.partitions.some((p) => p.partition === 0)).map((call) => [call.broker, call.partitions.find((p) => p.partition === 0)!.firstSequence])).toEqual([[1, 0], [2, 0]]);
    expect(responses).toHaveLength(3);
  });

  it('resends only the partitions not yet acknowledged', async () => {
    const cluster = leaderKilledScenario();
    await send(createSendMessages, cluster, messages(9, 3));
    const retry = cluster.calls.slice(3);
    expect(retry.flatMap((call) => call.partitions.map((p) => p.partition))).toEqual([0]);
  });

  it('a refused partition (NOT_ENOUGH_REPLICAS) is retried until accepted; sequences are given back in between', async () => {
    const cluster = new FakeCluster(new Map([[0, 1], [1, 2]]));
    cluster.failures.set(1, [protocolError('NOT_ENOUGH_REPLICAS'), protocolError('NOT_ENOUGH_REPLICAS')]);
    const batch = messages(6, 2);
    await send(createSendMessages, cluster, batch);
    expectAllDelivered(cluster, batch);
    expect(cluster.calls.filter((call) => call.broker === 1).map((call) => call.partitions[0]!.firstSequence)).toEqual([0, 0, 0]);
    expect(cluster.sequences.get(0)).toBe(3);
  });

  it('a stale leader (NOT_LEADER_OR_FOLLOWER) sends the partition to the leader the refreshed metadata names', async () => {
    const cluster = new FakeCluster(new Map([[0, 1], [1, 2]]));
    cluster.moveLeader(0, 3); // the metadata still says 1
    const batch = messages(4, 2);
    await send(createSendMessages, cluster, batch);
    expectAllDelivered(cluster, batch);
    expect(cluster.calls.map((call) => call.broker)).toEqual([1, 2, 3]);
  });

  it('waits for every request of an attempt before retrying: a broker never has two requests of one send at once', async () => {
    const cluster = leaderKilledScenario();
    const deps = cluster.dependencies();
    const inFlight = new Map<number, number>();
    let most = 0;
    for (const id of [1, 2, 3]) {
      const broker = await deps.cluster.findBroker({ nodeId: id });
      const produce = broker.produce.bind(broker);
      // Broker 1 fails at once; the others answer later, while a retry could already start.
      broker.produce = async (args) => {
        inFlight.set(id, (inFlight.get(id) ?? 0) + 1);
        most = Math.max(most, inFlight.get(id)!);
        try {
          await new Promise((resolve) => setTimeout(resolve, id === 1 ? 0 : 20));
          return await produce(args);
        } finally {
          inFlight.set(id, inFlight.get(id)! - 1);
        }
      };
    }
    const batch = messages(9, 3);
    await createSendMessages(deps as never)({ acks: -1, timeout: 30_000, topicMessages: [{ topic: TOPIC, messages: batch }] });
    expectAllDelivered(cluster, batch);
    expect(most).toBe(1);
  });

  it('fails, never skips, when a partition has no leader', async () => {
    const cluster = new FakeCluster(new Map([[0, -1], [1, 2]]));
    await expect(send(createSendMessages, cluster, messages(4, 2))).rejects.toThrow(/no leader known for billing.invoice-0/);
    expect(cluster.logs.get(1)).toBeUndefined();
  });

  it('gives up with a non-retriable error at once', async () => {
    const cluster = new FakeCluster(new Map([[0, 1]]));
    cluster.failures.set(1, [protocolError('OUT_OF_ORDER_SEQUENCE_NUMBER', false)]);
    await expect(send(createSendMessages, cluster, messages(2, 1))).rejects.toThrow(/OUT_OF_ORDER_SEQUENCE_NUMBER/);
    expect(cluster.calls).toHaveLength(1);
  });
});

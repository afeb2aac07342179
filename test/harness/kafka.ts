import { randomUUID } from 'node:crypto';
import { Kafka, logLevel, type Consumer } from 'kafkajs';
// The client's header decoding (and its fix of kafkajs's, installed at import): tests read
// headers exactly as a consumer using outbox-relay/client does.
import { headerText } from '../../src/client/kafkajs-headers.js';
import { inject } from 'vitest';
import { waitForLeaders } from './leaders.js';

export { waitForLeaders };

export interface ConsumedRecord {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
  readonly key: string | null;
  readonly value: Buffer | null;
  readonly headers: Record<string, string>;
}

/** A client of the test Kafka, or of the brokers given (e.g. the three-broker cluster). */
export function kafkaClient(brokers: string = inject('services').kafkaBrokers): Kafka {
  return new Kafka({ clientId: 'outbox-relay-tests', brokers: brokers.split(','), logLevel: logLevel.NOTHING });
}

export async function createTopics(topics: readonly string[], partitions = 3): Promise<void> {
  await createTopicsOn(inject('services').kafkaBrokers, topics, partitions);
}

/** As createTopics, on the brokers given (a broker of the test's own). */
export async function createTopicsOn(brokers: string, topics: readonly string[], partitions = 3): Promise<void> {
  const admin = kafkaClient(brokers).admin();
  await admin.connect();
  try {
    await admin.createTopics({ topics: topics.map((topic) => ({ topic, numPartitions: partitions, replicationFactor: 1 })), waitForLeaders: false });
    await waitForLeaders(admin, topics);
  } finally {
    await admin.disconnect();
  }
}

/**
 * Reads topics from the beginning into memory, like any consumer that knows nothing of the
 * relay. `records` grows while it runs; `until` waits for a condition on it.
 */
export class TopicReader {
  readonly records: ConsumedRecord[] = [];
  private consumer: Consumer | null = null;

  /**
   * `source`: the test Kafka unless given brokers, or a client (e.g. of the secured Kafka).
   * `readUncommitted`: also records of open and aborted transactions (kafkajs reads committed by default).
   */
  constructor(
    private readonly source?: string | Kafka,
    private readonly readUncommitted = false,
  ) {}

  async start(topics: readonly string[]): Promise<this> {
    const kafka = typeof this.source === 'object' ? this.source : kafkaClient(this.source);
    this.consumer = kafka.consumer({ groupId: `reader-${randomUUID()}`, readUncommitted: this.readUncommitted, retry: { retries: 50, maxRetryTime: 2_000 } });
    await this.consumer.connect();
    await this.consumer.subscribe({ topics: [...topics], fromBeginning: true });
    await this.consumer.run({
      eachBatch: async ({ batch }) => {
        for (const message of batch.messages) {
          this.records.push({
            topic: batch.topic,
            partition: batch.partition,
            offset: message.offset,
            key: message.key?.toString('utf8') ?? null,
            value: message.value,
            headers: headerText(message.headers),
          });
        }
      },
    });
    return this;
  }

  /** `context` adds to the failure message, e.g. the relay's last log lines. */
  async until(what: string, condition: (records: readonly ConsumedRecord[]) => boolean, timeoutMs = 90_000, context: () => string = () => ''): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!condition(this.records)) {
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}; have ${this.records.length} records\n${context()}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  async stop(): Promise<void> {
    await this.consumer?.disconnect();
  }
}


export function eventIds(records: readonly ConsumedRecord[]): string[] {
  return records.map((record) => record.headers.event_id ?? '');
}

interface RawBroker {
  initProducerId(request: { transactionalId: string; transactionTimeout: number }): Promise<{ producerId: string | number; producerEpoch: number }>;
  produce(request: object): Promise<unknown>;
}
interface RawCluster {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  addTargetTopic(topic: string): Promise<void>;
  findTopicPartitionMetadata(topic: string): { partitionId: number; leader: number }[];
  findBroker(args: { nodeId: string }): Promise<RawBroker>;
  findGroupCoordinator(args: { groupId: string; coordinatorType: number }): Promise<RawBroker>;
}

const TRANSACTION_PARTITION_VERIFICATION = 'transaction.partition.verification.enable';

/**
 * Leaves a transaction of `transactionalId` open on `topic`-`partition` that its coordinator
 * does not know: a hanging transaction, as Kafka leaves one when it skips a transaction's
 * markers to a partition whose leader it could not find (after a single broker's restart). It
 * takes the id's producer id and epoch (InitProducerId) and appends one transactional record
 * without AddPartitionsToTxn, with the brokers' partition verification (KIP-890) turned off for
 * that moment and on again after.
 */
export async function openForgottenTransaction(transactionalId: string, topic: string, partition: number, record: { key: string; value: string }): Promise<void> {
  const kafka = kafkaClient();
  const admin = kafka.admin();
  await admin.connect();
  // Per broker (kafkajs refuses the cluster-wide default's empty name).
  const brokerIds = (await admin.describeCluster()).brokers.map((broker) => String(broker.nodeId));
  const verification = async (value: 'true' | 'false') =>
    admin.alterConfigs({ validateOnly: false, resources: brokerIds.map((name) => ({ type: 4 /* BROKER */, name, configEntries: [{ name: TRANSACTION_PARTITION_VERIFICATION, value }] })) });
  // kafkajs's cluster (as src/kafka/kafkajs/exactly-once.ts reaches it): the raw requests.
  const symbol = Object.getOwnPropertySymbols(kafka).find((candidate) => candidate.description === 'private:Kafka:createCluster')!;
  const cluster = ((kafka as unknown as Record<symbol, (options: object) => RawCluster>)[symbol]!)({ allowAutoTopicCreation: false, isolationLevel: 1 });
  await cluster.connect();
  try {
    await verification('false');
    // A coordinator still loading refuses InitProducerId; a broker that has not applied the
    // config change yet refuses the record (INVALID_TXN_STATE): both are retried.
    const { producerId, producerEpoch } = await retried(`InitProducerId for ${transactionalId}`, async () =>
      (await cluster.findGroupCoordinator({ groupId: transactionalId, coordinatorType: 1 })).initProducerId({ transactionalId, transactionTimeout: 60_000 }),
    );
    await cluster.addTargetTopic(topic);
    const leader = cluster.findTopicPartitionMetadata(topic).find((entry) => entry.partitionId === partition)!.leader;
    const broker = await cluster.findBroker({ nodeId: String(leader) });
    await retried(`a transactional record on ${topic}-${partition}`, () =>
      broker.produce({ transactionalId, producerId, producerEpoch, acks: -1, timeout: 10_000, topicData: [{ topic, partitions: [{ partition, firstSequence: 0, messages: [record] }] }] }),
    );
  } finally {
    await verification('true').catch(() => undefined);
    await cluster.disconnect().catch(() => undefined);
    await admin.disconnect();
  }
}

async function retried<T>(what: string, attempt: () => Promise<T>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (Date.now() > deadline) throw new Error(`${what} still refused after ${timeoutMs}ms: ${(error as Error).message}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

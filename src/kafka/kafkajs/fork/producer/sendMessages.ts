/**
 * Replaces kafkajs 2.2.4's `sendMessages` (kafkajs/src/producer/sendMessages.js), rewritten to
 * track acknowledgement per partition instead of per broker.
 *
 * The original keeps one response per broker across retries. When broker A fails and its
 * partitions move to broker B, which already answered for its own partitions, the retry skips
 * B: the moved partitions are never sent again and the send resolves as a success (events lost
 * on every leader kill in a three-broker cluster). It also retried while other brokers'
 * requests of the failed attempt were still in flight, so a retry could send a partition a
 * second time with the next sequence numbers: a duplicate the broker cannot recognise.
 *
 * Here, one send:
 * - groups its messages by partition once (a retry never moves a message to another partition);
 * - on each attempt, sends every partition not yet acknowledged to its current leader, and
 *   waits for every request of the attempt to settle before retrying;
 * - marks a partition acknowledged only when its leader's whole response had no error (kafkajs
 *   throws on the first partition error, so a response with one error counts for none of its
 *   partitions; the idempotent producer makes the resend of the others a no-op at the broker);
 * - fails the attempt, never skips, when a partition has no leader or no metadata.
 * Sequence numbers are taken before a request and given back if it fails, as in kafkajs, so
 * a resend after a failure carries the same sequence and the broker drops it if it had it.
 */
import { createRequire } from 'node:module';
import { kafkaErrorName } from '../../../failure.js';
import { PRODUCE_REQUEST_FAILED } from '../../../outage-log.js';

const require = createRequire(import.meta.url);
/** kafkajs's errors, read when kafkajs makes its first producer (not at import: a process that never makes one never loads kafkajs). */
const kafkajsErrors = () =>
  require('kafkajs/src/errors.js') as {
    KafkaJSMetadataNotLoaded: new (message: string) => Error;
    KafkaJSError: new (message: string, options?: { retriable?: boolean }) => Error;
  };

/** The module path kafkajs's messageProducer.js requires. */
export const KAFKAJS_SEND_MESSAGES = 'kafkajs/src/producer/sendMessages.js';

interface Broker {
  readonly nodeId: number;
  produce(request: Record<string, unknown>): Promise<unknown>;
}

interface PartitionMetadata {
  readonly partitionId: number;
  readonly leader: number;
}

interface Cluster {
  addMultipleTargetTopics(topics: string[]): Promise<void>;
  refreshMetadataIfNecessary(): Promise<void>;
  refreshMetadata(): Promise<void>;
  findTopicPartitionMetadata(topic: string): PartitionMetadata[];
  findBroker(args: { nodeId: string }): Promise<Broker>;
  isConnected(): boolean;
  connect(): Promise<void>;
  removeBroker(args: { host: string; port: number }): void;
}

interface EosManager {
  acquireBrokerLock(broker: Broker): Promise<void>;
  releaseBrokerLock(broker: Broker): Promise<void> | void;
  isTransactional(): boolean;
  addPartitionsToTransaction(topicData: TopicData[]): Promise<void>;
  getTransactionalId(): string;
  getProducerId(): unknown;
  getProducerEpoch(): unknown;
  getSequence(topic: string, partition: number): number;
  updateSequence(topic: string, partition: number, increment: number): void;
}

interface KafkaLogger {
  debug(message: string, extra?: object): void;
  warn(message: string, extra?: object): void;
  error(message: string, extra?: object): void;
}

type Retrier = <T>(attempt: (bail: (error: Error) => void, retryCount: number, retryTime: number) => Promise<T>) => Promise<T>;
type Partitioner = (args: { topic: string; partitionMetadata: PartitionMetadata[]; message: unknown }) => number;

interface SendMessagesDependencies {
  readonly logger: KafkaLogger;
  readonly cluster: Cluster;
  readonly partitioner: Partitioner;
  readonly eosManager: EosManager;
  readonly retrier: Retrier;
}

interface SendArgs {
  readonly acks: number;
  readonly timeout: number;
  readonly compression?: number;
  readonly topicMessages: readonly { readonly topic: string; readonly messages: unknown[] }[];
}

interface TopicData {
  readonly topic: string;
  readonly partitions: { partition: number; messages: unknown[]; firstSequence?: number }[];
}

interface ProduceResponse {
  readonly topics: readonly { readonly topicName: string; readonly partitions: readonly object[] }[];
}

/** A Kafka error as kafkajs builds it: `type` is Kafka's error name for protocol errors. */
interface KafkaJSErrorLike extends Error {
  readonly type?: string;
  readonly retriable?: boolean;
  readonly host?: string;
  readonly port?: number;
}

const STALE_METADATA = new Set(['UNKNOWN_TOPIC_OR_PARTITION', 'LEADER_NOT_AVAILABLE', 'NOT_LEADER_FOR_PARTITION', 'NOT_LEADER_OR_FOLLOWER']);

/**
 * The broker answers CONCURRENT_TRANSACTIONS to AddPartitionsToTxn while the previous
 * transaction's markers are still being written (a few milliseconds): retried here at once,
 * as the Java client does, instead of through the send's retries (200 ms and up) for each
 * transaction.
 */
const CONCURRENT_TRANSACTIONS_RETRY_MS = 5;
const CONCURRENT_TRANSACTIONS_ATTEMPTS = 200;

async function addPartitionsToTransaction(eosManager: EosManager, topicData: TopicData[]): Promise<void> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      await eosManager.addPartitionsToTransaction(topicData);
      return;
    } catch (error) {
      if (kafkaErrorName(error) !== 'CONCURRENT_TRANSACTIONS' || attempt >= CONCURRENT_TRANSACTIONS_ATTEMPTS) throw error;
      await new Promise((resolve) => setTimeout(resolve, CONCURRENT_TRANSACTIONS_RETRY_MS));
    }
  }
}

export function createSendMessages({ logger, cluster, partitioner, eosManager, retrier }: SendMessagesDependencies) {
  const { KafkaJSMetadataNotLoaded, KafkaJSError } = kafkajsErrors();
  return async ({ acks, timeout, compression, topicMessages }: SendArgs): Promise<object[]> => {
    /** topic -> partition -> messages, fixed at the first attempt that has metadata. */
    const unacknowledged = new Map<string, Map<number, unknown[]>>();
    const responses: object[] = [];
    const topics = topicMessages.map(({ topic }) => topic);

    const groupOnce = () => {
      for (const { topic, messages } of topicMessages) {
        if (unacknowledged.has(topic)) continue;
        const partitionMetadata = cluster.findTopicPartitionMetadata(topic);
        if (partitionMetadata.length === 0) throw new KafkaJSMetadataNotLoaded('Producing to topic without metadata');
        const byPartition = new Map<number, unknown[]>();
        for (const message of messages) {
          const partition = partitioner({ topic, partitionMetadata, message });
          let list = byPartition.get(partition);
          if (!list) byPartition.set(partition, (list = []));
          list.push(message);
        }
        unacknowledged.set(topic, byPartition);
      }
    };

    /** The partitions still to send, by the broker that leads them now. */
    const requestsPerLeader = () => {
      const perLeader = new Map<number, TopicData[]>();
      for (const [topic, byPartition] of unacknowledged) {
        if (byPartition.size === 0) continue;
        const metadata = new Map(cluster.findTopicPartitionMetadata(topic).map((entry) => [entry.partitionId, entry]));
        for (const [partition, messages] of byPartition) {
          const leader = metadata.get(partition)?.leader;
          // kafkajs's own lookup drops a partition it has no metadata for: never skip one.
          if (leader === undefined || leader === null || leader < 0) throw new KafkaJSError(`no leader known for ${topic}-${partition}`, { retriable: true });
          let topicData = perLeader.get(leader);
          if (!topicData) perLeader.set(leader, (topicData = []));
          let entry = topicData.find((data) => data.topic === topic);
          if (!entry) topicData.push((entry = { topic, partitions: [] }));
          entry.partitions.push({ partition, messages });
        }
      }
      return perLeader;
    };

    const produceTo = async (broker: Broker, topicData: TopicData[], retryCount: number): Promise<void> => {
      await eosManager.acquireBrokerLock(broker);
      try {
        if (eosManager.isTransactional()) await addPartitionsToTransaction(eosManager, topicData);
        for (const { topic, partitions } of topicData) {
          for (const entry of partitions) {
            entry.firstSequence = eosManager.getSequence(topic, entry.partition);
            eosManager.updateSequence(topic, entry.partition, entry.messages.length);
          }
        }
        let response: unknown;
        try {
          response = await broker.produce({
            transactionalId: eosManager.isTransactional() ? eosManager.getTransactionalId() : undefined,
            producerId: eosManager.getProducerId(),
            producerEpoch: eosManager.getProducerEpoch(),
            acks,
            timeout,
            compression,
            topicData,
          });
        } catch (error) {
          for (const { topic, partitions } of topicData) for (const entry of partitions) eosManager.updateSequence(topic, entry.partition, -entry.messages.length);
          logger.warn(PRODUCE_REQUEST_FAILED, {
            broker: broker.nodeId,
            error: kafkaErrorName(error),
            reason: (error as Error).message,
            partitions: topicData.flatMap(({ topic, partitions }) => partitions.map(({ partition }) => `${topic}-${partition}`)),
            retryCount,
          });
          throw error;
        }
        for (const { topic, partitions } of topicData) {
          const byPartition = unacknowledged.get(topic)!;
          for (const { partition } of partitions) byPartition.delete(partition);
        }
        if (acks !== 0) for (const { topicName, partitions } of (response as ProduceResponse).topics) for (const partition of partitions) responses.push({ topicName, ...partition });
      } finally {
        await eosManager.releaseBrokerLock(broker);
      }
    };

    return retrier(async (bail, retryCount, retryTime) => {
      await cluster.addMultipleTargetTopics(topics);
      try {
        await cluster.refreshMetadataIfNecessary();
        groupOnce();
        const requests = [...requestsPerLeader()].map(async ([nodeId, topicData]) => produceTo(await cluster.findBroker({ nodeId: String(nodeId) }), topicData, retryCount));
        // Every request of this attempt settles before the next attempt: a partition is never
        // in two requests at once, so its sequence numbers stay in order.
        const failed = (await Promise.allSettled(requests)).find((outcome) => outcome.status === 'rejected');
        if (failed) throw failed.reason;
        return responses;
      } catch (thrown) {
        const error = thrown as KafkaJSErrorLike;
        if (error.name === 'KafkaJSConnectionClosedError' && error.host !== undefined && error.port !== undefined) cluster.removeBroker({ host: error.host, port: error.port });
        if (!cluster.isConnected()) {
          logger.debug(`Cluster has disconnected, reconnecting: ${error.message}`, { retryCount, retryTime });
          await cluster.connect();
          await cluster.refreshMetadata();
          throw error;
        }
        if (
          STALE_METADATA.has(error.type ?? '') ||
          // A request timeout too: the leader may be gone without closing its connection.
          ['KafkaJSMetadataNotLoaded', 'KafkaJSConnectionError', 'KafkaJSConnectionClosedError', 'KafkaJSBrokerNotFound', 'KafkaJSRequestTimeoutError'].includes(error.name) ||
          (error.name === 'KafkaJSProtocolError' && error.retriable) ||
          (error.name === 'KafkaJSError' && error.retriable)
        ) {
          await cluster.refreshMetadata();
          throw error;
        }
        if (error.retriable) throw error;
        bail(error);
        return responses;
      }
    });
  };
}

import { createRequire } from 'node:module';
import type { Kafka } from './kafkajs.js';
import { RelayError } from '../../errors.js';
import { lastCommittedValue, type ProgressSettle } from '../committed-progress.js';
import { partitionForKey } from '../partitioner.js';

/**
 * What exactly-once needs from kafkajs beyond its producer, on kafkajs's own cluster client:
 * reading the last committed progress record as a read_committed consumer would, without
 * joining a consumer group (no group ACL, no rebalance delay at each start), and finding the
 * transaction coordinator with Kafka's own answer.
 */

const require = createRequire(import.meta.url);
/** kafkajs's decoder of a fetched partition, read at the first read back (a process that never makes a kafkajs producer never loads kafkajs). */
const kafkajsBatch = () => require('kafkajs/src/consumer/batch.js') as new (topic: string, fetchedOffset: string, partitionData: FetchedPartition) => FetchedBatch;

const READ_UNCOMMITTED = 0;
const READ_COMMITTED = 1;
const LATEST = -1;
const EARLIEST = -2;
const FETCH_MAX_BYTES = 1_048_576;

interface FetchedPartition {
  readonly partition: number;
  readonly errorCode: number;
  readonly highWatermark: string;
  readonly messages: unknown[];
}

interface FetchedBatch {
  readonly messages: readonly { readonly offset: string; readonly key: Buffer | null; readonly value: Buffer | null }[];
  isEmptyIncludingFiltered(): boolean;
  lastOffset(): string;
}

interface ClusterBroker {
  listOffsets(request: { isolationLevel: number; topics: { topic: string; partitions: { partition: number; timestamp: number }[] }[] }): Promise<{ responses: { partitions: { offset: string }[] }[] }>;
  fetch(request: { isolationLevel: number; maxWaitTime: number; minBytes: number; maxBytes: number; topics: { topic: string; partitions: { partition: number; fetchOffset: string; maxBytes: number }[] }[] }): Promise<{ responses: { partitions: FetchedPartition[] }[] }>;
}

interface Cluster {
  connect(): Promise<void>;
  refreshMetadata(): Promise<void>;
  findControllerBroker(): Promise<{ findGroupCoordinator(request: { groupId: string; coordinatorType: number }): Promise<unknown> }>;
  disconnect(): Promise<void>;
  addTargetTopic(topic: string): Promise<void>;
  findTopicPartitionMetadata(topic: string): { partitionId: number; leader: number }[];
  findBroker(args: { nodeId: string }): Promise<ClusterBroker>;
}

type CreateCluster = (options: { allowAutoTopicCreation: boolean; isolationLevel: number }) => Cluster;

const TRANSACTION_COORDINATOR = 1;

/**
 * Asks for the transaction coordinator of `transactionalId` as kafkajs does at the first
 * transaction, and throws Kafka's answer if it is a refusal: kafkajs replaces
 * TRANSACTIONAL_ID_AUTHORIZATION_FAILED with "Failed to find group coordinator" and retries it
 * forever. Other failures are left to kafkajs's own retries.
 */
export async function checkTransactionalIdAccess(kafka: Kafka, transactionalId: string, isRefusal: (error: unknown) => boolean): Promise<void> {
  const cluster = createCluster(kafka)({ allowAutoTopicCreation: false, isolationLevel: READ_COMMITTED });
  try {
    await cluster.connect();
    await cluster.refreshMetadata();
    const broker = await cluster.findControllerBroker();
    await broker.findGroupCoordinator({ groupId: transactionalId, coordinatorType: TRANSACTION_COORDINATOR });
  } catch (error) {
    if (isRefusal(error)) throw error;
  } finally {
    await cluster.disconnect().catch(() => undefined);
  }
}

/** The value (null: a tombstone) of the last committed record with `key`, or undefined if it has none. */
export async function readLastCommitted(kafka: Kafka, topic: string, key: string, settle: ProgressSettle): Promise<Buffer | null | undefined> {
  const cluster = createCluster(kafka)({ allowAutoTopicCreation: false, isolationLevel: READ_COMMITTED });
  await cluster.connect();
  try {
    await cluster.addTargetTopic(topic);
    const partitions = cluster.findTopicPartitionMetadata(topic);
    const partition = partitionForKey(key, partitions.length);
    const leader = partitions.find((entry) => entry.partitionId === partition)?.leader;
    if (leader === undefined || leader < 0) throw new RelayError('SINK_PUBLISH', `no leader known for ${topic}-${partition}`, { details: { topic, partition } });
    const broker = await cluster.findBroker({ nodeId: String(leader) });
    const offset = async (isolationLevel: number, timestamp: number) =>
      BigInt((await broker.listOffsets({ isolationLevel, topics: [{ topic, partitions: [{ partition, timestamp }] }] })).responses[0]!.partitions[0]!.offset);
    return await lastCommittedValue(
      {
        topic,
        partition,
        latest: (isolation) => offset(isolation === 'committed' ? READ_COMMITTED : READ_UNCOMMITTED, LATEST),
        earliest: () => offset(READ_COMMITTED, EARLIEST),
        lastValueIn: (wanted, from, to) => lastValueOf(broker, topic, partition, wanted, from, to),
      },
      key,
      settle,
    );
  } finally {
    await cluster.disconnect().catch(() => undefined);
  }
}

async function lastValueOf(broker: ClusterBroker, topic: string, partition: number, key: string, from: bigint, to: bigint): Promise<Buffer | null | undefined> {
  let found: Buffer | null | undefined;
  for (let next = from; next < to; ) {
    const fetchOffset = String(next);
    const response = await broker.fetch({
      isolationLevel: READ_COMMITTED,
      maxWaitTime: 0,
      minBytes: 0,
      maxBytes: FETCH_MAX_BYTES,
      topics: [{ topic, partitions: [{ partition, fetchOffset, maxBytes: FETCH_MAX_BYTES }] }],
    });
    const data = response.responses[0]!.partitions[0]!;
    const batch = new (kafkajsBatch())(topic, fetchOffset, data);
    // Below the last stable offset there is always a record to read: an empty answer means the range was read.
    if (batch.isEmptyIncludingFiltered()) break;
    for (const message of batch.messages) {
      if (BigInt(message.offset) >= to) return found;
      if (message.key?.toString() === key) found = message.value;
    }
    next = BigInt(batch.lastOffset()) + 1n;
  }
  return found;
}

function createCluster(kafka: Kafka): CreateCluster {
  const symbol = Object.getOwnPropertySymbols(kafka).find((candidate) => candidate.description === 'private:Kafka:createCluster');
  const create = symbol === undefined ? undefined : (kafka as unknown as Record<symbol, unknown>)[symbol];
  if (typeof create !== 'function') throw new RelayError('SINK_CLIENT', 'kafkajs has no cluster factory where 2.2.4 has it: the exactly-once progress cannot be read with this kafkajs version');
  return create as CreateCluster;
}

import { Admin, FetchIsolationLevels, ListOffsetTimestamps, type BaseOptions, type KafkaRecord } from '@platformatic/kafka';
import { RelayError } from '../../errors.js';
import { finishesWithin } from '../../time.js';
import { lastCommittedValue, type ProgressSettle } from '../committed-progress.js';
import { partitionForKey } from '../partitioner.js';
import { topicMetadata } from './admin.js';
import { DISCONNECT_TIMEOUT_MS, namedPlatformaticError } from './library.js';
import { ReadCommittedConsumer } from './read-committed-consumer.js';

/**
 * Reading the exactly-once progress back on @platformatic/kafka: the partition's offsets from the
 * admin client (ListOffsets with the isolation level asked for), its records with the consumer's
 * plain fetch, read_committed (read-committed.ts: aborted transactions' records dropped as Kafka defines it),
 * without joining a group: no group ACL, no rebalance at each start.
 */

const FETCH_MAX_BYTES = 1_048_576;
/** Set in a record batch's attributes: a transaction marker, not records. */
const IS_CONTROL = 1 << 5;

/** The value (null: a tombstone) of the last committed record with `key`, or undefined if it has none. */
export async function readLastCommitted(options: BaseOptions, topic: string, key: string, settle: ProgressSettle): Promise<Buffer | null | undefined> {
  const admin = new Admin(options);
  // groupId is required by the constructor; no group is joined (fetch only).
  const consumer = new ReadCommittedConsumer({ ...options, groupId: 'outbox-relay-progress-reader' });
  try {
    const metadata = await topicMetadata(admin, [topic]);
    const described = metadata?.topics.get(topic);
    if (!described) throw new RelayError('SINK_PUBLISH', `the progress topic ${topic} does not exist`, { details: { topic } });
    const partition = partitionForKey(key, described.partitionsCount);
    const offset = async (timestamp: bigint, isolationLevel: number) => {
      try {
        const [listed] = await admin.listOffsets({ topics: [{ name: topic, partitions: [{ partitionIndex: partition, timestamp }] }], isolationLevel: isolationLevel as 0 });
        return listed!.partitions[0]!.offset;
      } catch (error) {
        throw namedPlatformaticError(error);
      }
    };
    return await lastCommittedValue(
      {
        topic,
        partition,
        latest: (isolation) => offset(ListOffsetTimestamps.LATEST, isolation === 'committed' ? FetchIsolationLevels.READ_COMMITTED : FetchIsolationLevels.READ_UNCOMMITTED),
        earliest: () => offset(ListOffsetTimestamps.EARLIEST, FetchIsolationLevels.READ_COMMITTED),
        lastValueIn: async (wanted, from, to) => {
          let found: Buffer | null | undefined;
          for (let next = from; next < to; ) {
            // The leader may have moved since the metadata was read: asked again each round.
            const leader = (await topicMetadata(consumer, [topic]))?.topics.get(topic)?.partitions[partition]?.leader;
            if (leader === undefined || leader < 0) throw new RelayError('SINK_PUBLISH', `no leader known for ${topic}-${partition}`, { details: { topic, partition } });
            let response;
            try {
              response = await consumer.fetch({
                node: leader,
                isolationLevel: FetchIsolationLevels.READ_COMMITTED,
                maxWaitTime: 0,
                minBytes: 0,
                maxBytes: FETCH_MAX_BYTES,
                topics: [{ topicId: described.id, partitions: [{ partition, fetchOffset: next, currentLeaderEpoch: -1, lastFetchedEpoch: -1, partitionMaxBytes: FETCH_MAX_BYTES }] }],
              });
            } catch (error) {
              throw namedPlatformaticError(error);
            }
            const batches = response.responses[0]?.partitions[0]?.records ?? [];
            // Below the last stable offset there is always a batch to read: an empty answer means the range was read.
            if (batches.length === 0) break;
            for (const batch of batches) {
              const records: readonly KafkaRecord[] = batch.attributes & IS_CONTROL ? [] : batch.records;
              for (const record of records) {
                const at = batch.firstOffset + BigInt(record.offsetDelta);
                if (at < next) continue;
                if (at >= to) return found;
                if (record.key?.toString() === wanted) found = record.value;
              }
              next = batch.firstOffset + BigInt(batch.lastOffsetDelta) + 1n;
            }
          }
          return found;
        },
      },
      key,
      settle,
    );
  } finally {
    await finishesWithin(Promise.all([admin.close().catch(() => undefined), consumer.close(true).catch(() => undefined)]), DISCONNECT_TIMEOUT_MS);
  }
}

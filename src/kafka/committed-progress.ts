import type { Logger } from 'pino';
import { RelayError } from '../errors.js';
import { sleep } from '../time.js';
import { kafkaFailure } from './failure.js';
import type { RecordProducer } from './ports.js';

/**
 * Reading the exactly-once progress back: the last committed record of one key on the progress
 * topic's partition, as a read_committed reader sees it. The algorithm is here once; each Kafka
 * client supplies the partition's offsets and a read of a range (kafkajs/exactly-once.ts,
 * librdkafka/producer.ts).
 */
export interface CommittedPartition {
  readonly topic: string;
  readonly partition: number;
  /** The partition's end (high watermark) or, read_committed, its last stable offset. */
  latest(isolation: 'committed' | 'uncommitted'): Promise<bigint>;
  earliest(): Promise<bigint>;
  /** The last value (null: a tombstone) of `key` among the committed records at offsets [from, to); undefined if none. */
  lastValueIn(key: string, from: bigint, to: bigint): Promise<Buffer | null | undefined>;
}

export interface ProgressSettle {
  /** How long transactions still open on the partition may hold the read. */
  readonly timeoutMs: number;
  /** How long its last stable offset may stand still before the read acts (once), then gives up (and the session fences again). */
  readonly stallMs: number;
  /**
   * Commits a transaction of this slot's transactional id holding one record of its own on the
   * partition. Its marker, written with the producer id an earlier session of this id had, ends a
   * transaction that session left open there and that the coordinator no longer knows (a hanging
   * one: Kafka skips a transaction's markers to a partition whose leader it cannot find, as after
   * a single broker's restart).
   */
  readonly closeOwnHangingTransaction: (partition: number) => Promise<void>;
}

/** The first window read back from the end; it grows fourfold while the key is not found. */
const FIRST_WINDOW = 512n;

/** The value (null: a tombstone) of the last committed record with `key`, or undefined if it has none. */
export async function lastCommittedValue(log: CommittedPartition, key: string, settle: ProgressSettle): Promise<Buffer | null | undefined> {
  const { topic, partition } = log;
  // Transactions still open on this partition (another relay's, sharing the topic) hide every
  // later record from a read_committed reader: wait until all that were open when reading began
  // have ended, so that no committed progress of this key is missed.
  const end = await log.latest('uncommitted');
  const deadline = Date.now() + settle.timeoutMs;
  let stable = await log.latest('committed');
  let movedAt = Date.now();
  let closedOwn = false;
  while (stable < end) {
    const now = Date.now();
    const where = `${topic}-${partition}: its last stable offset stays at ${stable}, below its end ${end}`;
    if (now > deadline) throw new RelayError('SINK_PUBLISH', `${where}: a transaction has been open on it for over ${settle.timeoutMs}ms (kafka-transactions.sh find-hanging names it)`, { details: { topic, partition } });
    if (now - movedAt > settle.stallMs) {
      // Nothing ended for a while, although this session fenced every earlier producer of the
      // slot's id (which aborts a transaction the coordinator knows). What holds the partition
      // may be one of theirs that the coordinator forgot: a marker with the same producer id
      // ends it. Committing it is safe: the relay writes nothing before this read succeeds, so
      // that transaction is the id's last, and it holds its own progress record with its events.
      if (!closedOwn) {
        closedOwn = true;
        await settle.closeOwnHangingTransaction(partition);
        movedAt = Date.now();
        continue;
      }
      // Still held: another relay group's transaction on a shared topic, or this id's with an
      // older producer id. The next session fences (and tries) again.
      throw new RelayError('SINK_PUBLISH', `${where}, and has not moved for ${settle.stallMs}ms, not even after this slot's producer committed a transaction on it: a transaction of another producer is open on it; fencing this slot's earlier producers again (one that never ends is hanging: kafka-transactions.sh find-hanging names it, kafka-transactions.sh abort ends it)`, { details: { topic, partition } });
    }
    await sleep(20);
    const next = await log.latest('committed');
    if (next !== stable) movedAt = Date.now();
    stable = next;
  }
  const start = await log.earliest();
  let window = FIRST_WINDOW;
  for (let to = end; to > start; window *= 4n) {
    const from = to - window > start ? to - window : start;
    const found = await log.lastValueIn(key, from, to);
    if (found !== undefined) return found;
    to = from;
  }
  return undefined;
}

/** How long the progress partition's last stable offset may stand still before the session acts on it. */
const PROGRESS_STALL_MS = 10_000;

/** Appended to the progress key for the record that ends a hanging transaction of the slot's id. */
const HANGING_TRANSACTION_KEY_SUFFIX = '#end-hanging-transaction';

/**
 * A producer's `readProgress` (exactly-once with a progress record; none otherwise) on a client's
 * read of the partition. Transactions open on the topic end within their timeout: the read waits
 * that long, and one produce request's timeout more.
 */
export function progressReading(
  exactlyOnce: { readonly transactionalId: string; readonly transactionTimeoutMs: number; readonly progress: { readonly topic: string; readonly key: string } | null } | null | undefined,
  requestTimeoutMs: number,
  read: (topic: string, key: string, settle: ProgressSettle) => Promise<Buffer | null | undefined>,
  commitOne: (record: { readonly topic: string; readonly partition: number; readonly key: string }) => Promise<void>,
  logger: Logger,
): Pick<RecordProducer, 'readProgress'> {
  const progress = exactlyOnce?.progress;
  if (!exactlyOnce || !progress) return {};
  return {
    readProgress: async () => {
      const { topic, key } = progress;
      const closeOwnHangingTransaction = async (partition: number) => {
        logger.warn(
          { topic, partition, transactionalId: exactlyOnce.transactionalId },
          `the exactly-once progress partition ${topic}-${partition} is held by a transaction that fencing did not end: committing one of this slot's own on it, whose marker ends one an earlier session of ${exactlyOnce.transactionalId} left open and the coordinator forgot`,
        );
        // A tombstone under a key of its own: compaction removes it, and no progress key changes.
        await commitOne({ topic, partition, key: `${key}${HANGING_TRANSACTION_KEY_SUFFIX}` });
      };
      try {
        return await read(topic, key, { timeoutMs: exactlyOnce.transactionTimeoutMs + requestTimeoutMs, stallMs: PROGRESS_STALL_MS, closeOwnHangingTransaction });
      } catch (error) {
        throw kafkaFailure(error, `cannot read the exactly-once progress of ${key} from ${topic}`, exactlyOnce);
      }
    },
  };
}

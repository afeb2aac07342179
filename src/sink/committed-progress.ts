import { RelayError } from '../errors.js';
import { sleep } from '../time.js';
import { kafkaFailure } from './kafka-failure.js';
import type { RecordProducer } from './producer.js';

/**
 * Reading the exactly-once progress back: the last committed record of one key on the progress
 * topic's partition, as a read_committed reader sees it. The algorithm is here once; each Kafka
 * client supplies the partition's offsets and a read of a range (kafkajs-exactly-once.ts,
 * librdkafka-client.ts).
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
  /** How long its last stable offset may stand still before the read gives up (and the session fences again). */
  readonly stallMs: number;
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
  while (stable < end) {
    const now = Date.now();
    const where = `${topic}-${partition}: its last stable offset stays at ${stable}, below its end ${end}`;
    if (now > deadline) throw new RelayError('SINK_PUBLISH', `${where}: a transaction has been open on it for over ${settle.timeoutMs}ms (kafka-transactions.sh find-hanging names it)`, { details: { topic, partition } });
    // Nothing ended for a while: the transaction holding it may be this slot's own, left by a
    // predecessor, whose abort the coordinator may have lost while reloading its state after a
    // broker restart. A new session's producer fences again, and that aborts it.
    if (now - movedAt > settle.stallMs) throw new RelayError('SINK_PUBLISH', `${where}, and has not moved for ${settle.stallMs}ms: a transaction is open on it; fencing this slot's earlier producers again (one that never ends is hanging: kafka-transactions.sh find-hanging names it)`, { details: { topic, partition } });
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

/** How long the progress partition's last stable offset may stand still before the session fences again. */
const PROGRESS_STALL_MS = 10_000;

/**
 * A producer's `readProgress` (exactly-once with a progress record; none otherwise) on a client's
 * read of the partition. Transactions open on the topic end within their timeout: the read waits
 * that long, and one produce request's timeout more.
 */
export function progressReading(
  exactlyOnce: { readonly transactionalId: string; readonly transactionTimeoutMs: number; readonly progress: { readonly topic: string; readonly key: string } | null } | null | undefined,
  requestTimeoutMs: number,
  read: (topic: string, key: string, settle: ProgressSettle) => Promise<Buffer | null | undefined>,
): Pick<RecordProducer, 'readProgress'> {
  const progress = exactlyOnce?.progress;
  if (!exactlyOnce || !progress) return {};
  return {
    readProgress: async () => {
      const { topic, key } = progress;
      try {
        return await read(topic, key, { timeoutMs: exactlyOnce.transactionTimeoutMs + requestTimeoutMs, stallMs: PROGRESS_STALL_MS });
      } catch (error) {
        throw kafkaFailure(error, `cannot read the exactly-once progress of ${key} from ${topic}`, exactlyOnce);
      }
    },
  };
}

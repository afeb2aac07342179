/**
 * The port to a Kafka consumer group, for the webhooks intake: a consumer on the client
 * OUTBOX_KAFKA_CLIENT names (kafkajs/group-consumer.ts, librdkafka/group-consumer.ts; open.ts
 * opens the one configured). Whichever it is, offsets are committed only up to what the taker
 * said it recorded, so a crash re-reads what was not.
 */
import { sleep } from '../time.js';

/** A record's headers by name (a name given twice: a list), as both clients hand them over. */
export interface ConsumedHeaders {
  readonly [name: string]: Buffer | string | (Buffer | string)[] | undefined;
}

/** A record as read, whichever client fetched it. */
export interface ConsumedMessage {
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly headers?: ConsumedHeaders;
  readonly offset: string;
  /** The record's timestamp, ms since the epoch, as text. */
  readonly timestamp: string;
}

/** Messages of one partition, in offset order. */
export interface ConsumedBatch {
  readonly topic: string;
  readonly partition: number;
  readonly messages: readonly ConsumedMessage[];
  /** Every message up to and including `offset` is recorded: its offset may be committed now (at most OFFSET_COMMIT_MS later). */
  recorded(offset: string): Promise<void>;
  /** False once the consumer stops or the group takes the partition away: the rest of the batch is its next reader's. */
  owned(): boolean;
}

/** What the consumer tells the process about its group (readiness, the error log). */
export interface GroupConsumerEvents {
  /** Partitions were assigned, or reading and recording work again after a failure: the consumer is reading. */
  joined(): void;
  /** Reading or recording failed; the consumer goes on from the last recorded offset by itself. */
  failed(error: unknown): void;
}

export interface GroupConsumer {
  /**
   * Joins the group and reads `topics` read_committed (an aborted exactly-once transaction is
   * never an event), a group without offsets from their beginning: events produced before the
   * first webhooks process started are owed too. Each partition's batches go to `take` one at a
   * time, in offset order; the partitions at once.
   */
  start(topics: readonly string[], take: (batch: ConsumedBatch) => Promise<void>): Promise<void>;
  /** Leaves the group once the batches being taken are (the offsets they recorded committed). */
  stop(): Promise<void>;
}

/** How long a failed batch waits before it is taken again, by how many times it failed in a row. */
export const BATCH_RETRY_MS = [250, 500, 1_000, 2_000, 5_000] as const;

export function batchRetryWait(failures: number): number {
  return BATCH_RETRY_MS[Math.min(failures, BATCH_RETRY_MS.length - 1)]!;
}

/**
 * A partition's batch given to `take` until every message is recorded or the partition is no
 * longer `owned`; a batch whose recording failed is taken again from its first message not
 * recorded, after a wait: the partition's order holds, and nothing after a failure is committed
 * before it. `stored` hears each recorded offset (the client's way to have it committed). Every
 * client's group consumer takes its batches through this one loop.
 */
export async function takeUntilRecorded(
  partition: { readonly topic: string; readonly partition: number; readonly owned: () => boolean },
  messages: readonly ConsumedMessage[],
  take: (batch: ConsumedBatch) => Promise<void>,
  events: GroupConsumerEvents,
  stored: (offset: string) => void,
): Promise<void> {
  let next = 0;
  let failures = 0;
  while (next < messages.length && partition.owned()) {
    try {
      await take({
        topic: partition.topic,
        partition: partition.partition,
        messages: next === 0 ? messages : messages.slice(next),
        recorded: async (offset) => {
          while (next < messages.length && messages[next]!.offset !== offset) next += 1;
          next += 1;
          stored(offset);
        },
        owned: partition.owned,
      });
      if (failures > 0) events.joined();
      return;
    } catch (error) {
      if (failures === 0) events.failed(error);
      await sleep(batchRetryWait(failures));
      failures += 1;
    }
  }
}

/** A new consumer in `groupId`: the intake opens one for each set of topics it follows. */
export type OpenGroupConsumer = (groupId: string, events: GroupConsumerEvents) => GroupConsumer;

/** The cluster's topics, for a topic pattern to be matched against (again, while it runs). */
export interface TopicLister {
  listTopics(): Promise<string[]>;
  close(): Promise<void>;
}

/**
 * The group session: how long the broker waits for a member that went silent (a process killed
 * -9) before it hands that member's partitions to the others, or to the process started in its
 * place. A restarted process delivers again about this long after the kill, whatever it does
 * (28-30 s with kafkajs's default of 30 s, 7.6-9.5 s with librdkafka at 10 s). 6 s is
 * the least a broker accepts by default (group.min.session.timeout.ms); a broker that raises it
 * refuses the join (INVALID_SESSION_TIMEOUT, in the consumer's failure log). Both consumers keep
 * the session while a batch waits for slots or for Postgres (kafkajs: keepSession), so a batch
 * however long does not make the group rebalance.
 */
export const SESSION_TIMEOUT_MS = 6_000;

/** A heartbeat this often: a session outlives five missed ones. */
export const HEARTBEAT_INTERVAL_MS = 1_000;

/** How often a consumer commits the offsets of what was recorded: a crash re-reads at most that much, recorded already, which adds nothing. */
export const OFFSET_COMMIT_MS = 1_000;

/**
 * Fetches of at most this much a partition, and 4 × as much in all: kafkajs decodes a whole fetch
 * at once, and a bigger one holds up every answer the dispatcher's requests are waiting for
 * (tens of milliseconds).
 */
export const FETCH_BYTES_PER_PARTITION = 256 * 1024;

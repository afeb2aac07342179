import type { TrackedTransaction } from './checkpoint/commit-tracker.js';
import type { HeaderBlock } from './sink/kafkajs-record.js';

/** One outbox row, decoded. The payload stays as Postgres gave it: parsed jsonb, or a JsonText for the JSON format. */
export interface OutboxEvent {
  readonly eventId: string;
  /** Null when the table has no aggregate type column (OUTBOX_COLUMN_AGGREGATE_TYPE empty): no such header. */
  readonly aggregateType: string | null;
  readonly aggregateId: string;
  readonly eventType: string;
  readonly payload: unknown;
  /** The row's own headers (trace context and the like), values as strings. */
  readonly headers: Readonly<Record<string, string>>;
  /** ISO 8601 UTC, to the millisecond. */
  readonly createdAt: string | null;
}

/** The headers of a row that has none: one shared object, as most rows have none. */
export const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

/** A record ready for Kafka, tied to the transaction whose checkpoint waits for its ack. */
export interface OutgoingMessage {
  readonly topic: string;
  readonly key: Buffer | string | null;
  readonly value: Buffer | string;
  readonly headers: Record<string, string>;
  /** `headers` encoded as the Kafka record carries them (what the relay's encoder writes). */
  readonly headerBlock: HeaderBlock;
  /** Estimated bytes in a record batch (see sink/record-size.ts): what batching is bounded by. */
  readonly size: number;
  readonly transaction: TrackedTransaction;
  /** Its place among the transaction's outbox rows, from 1: with the commit LSN, what identifies it across restarts (sink/progress.ts). */
  readonly position: number;
  /** For metrics: event type, or the dead-letter reason code. */
  readonly label: string;
  readonly deadLetter: boolean;
  /** The largest record batch its topic takes (max.message.bytes, or OUTBOX_MAX_MESSAGE_BYTES if smaller): a partition's batch must stay under it. */
  readonly batchLimit: number;
}

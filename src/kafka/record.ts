import type { TrackedTransaction } from '../checkpoint/commit-tracker.js';
import type { HeaderBlock } from './record-format.js';

/** A record ready for Kafka, tied to the transaction whose checkpoint waits for its ack. */
export interface OutgoingMessage {
  readonly topic: string;
  readonly key: Buffer | string | null;
  readonly value: Buffer | string;
  readonly headers: Record<string, string>;
  /** `headers` encoded as the Kafka record carries them (what the relay's encoder writes). */
  readonly headerBlock: HeaderBlock;
  /** Estimated bytes in a record batch (see record-size.ts): what batching is bounded by. */
  readonly size: number;
  readonly transaction: TrackedTransaction;
  /** Its place among the transaction's outbox rows, from 1: with the commit LSN, what identifies it across restarts (src/sink/progress.ts). */
  readonly position: number;
  /** For metrics: event type, or the dead-letter reason code. */
  readonly label: string;
  /** For metrics: the outbox as declared (OutboxRoute.declared). */
  readonly outbox: string;
  readonly deadLetter: boolean;
  /** The largest record batch its topic takes (max.message.bytes, or OUTBOX_MAX_MESSAGE_BYTES if smaller): a partition's batch must stay under it. */
  readonly batchLimit: number;
}

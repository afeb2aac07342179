import { kafkaFailure } from './failure.js';
import type { ExactlyOnceOptions } from './ports.js';
import { progressMessage } from './progress-record.js';
import type { OutgoingMessage } from './record.js';

/** One transactional producer's calls, as each client makes them (kafkajs/producer.ts, librdkafka/producer.ts). */
export interface TransactionCalls {
  begin(): Promise<void>;
  /** Resolves once Kafka acknowledged every message, in the open transaction. */
  send(messages: readonly OutgoingMessage[]): Promise<void>;
  /** A tombstone under `key` on that one partition, in the open transaction. */
  sendTombstone(record: { readonly topic: string; readonly partition: number; readonly key: string }): Promise<void>;
  commit(): Promise<void>;
  /** Aborts the open transaction; never throws, and gives up after a bound (the next session's fencing aborts it then). */
  abort(): Promise<void>;
}

/**
 * The exactly-once produce, written once for both clients: each produce request goes into the
 * open transaction (one is begun if none is) with the progress record of its last event, so
 * whichever request ends a transaction, the committed progress covers exactly what it holds;
 * `commit` ends it; a failed one is aborted at once, not left to its timeout.
 */
export class Transactions {
  private open = false;
  private openedAt = 0;

  constructor(
    private readonly calls: TransactionCalls,
    private readonly options: Pick<ExactlyOnceOptions, 'progress' | 'transactionTimeoutMs' | 'transactionalId'>,
  ) {}

  async add(messages: readonly OutgoingMessage[]): Promise<void> {
    await this.begin();
    const { progress } = this.options;
    await this.calls.send(progress ? [...messages, progressMessage(progress, messages)] : messages);
  }

  /** Commits the open transaction (if any); a failed commit is aborted and thrown as the relay's error (kafkaFailure). */
  async commit(): Promise<void> {
    if (!this.open) return;
    try {
      await this.calls.commit();
      this.open = false;
    } catch (error) {
      throw kafkaFailure(error, `Kafka did not commit a transaction${await this.abortFailed()}`, this.options);
    }
  }

  /**
   * Ends a failed transaction before its timeout, so that read_committed consumers of its
   * partitions are not held back. Returns what the failure's message should add when the
   * broker had already aborted it for time.
   */
  async abortFailed(): Promise<string> {
    if (!this.open) return '';
    this.open = false;
    await this.calls.abort();
    const took = Date.now() - this.openedAt;
    const timeoutMs = this.options.transactionTimeoutMs;
    return took >= timeoutMs ? `; it was open ${took}ms, over OUTBOX_TRANSACTION_TIMEOUT (${timeoutMs}ms), so the broker aborted it` : '';
  }

  /** A tombstone committed in a transaction of its own: what ends a hanging transaction on its partition (committed-progress.ts). */
  async commitTombstone(record: { readonly topic: string; readonly partition: number; readonly key: string }): Promise<void> {
    await this.begin();
    try {
      await this.calls.sendTombstone(record);
    } catch (error) {
      await this.abortFailed();
      throw error;
    }
    await this.commit();
  }

  private async begin(): Promise<void> {
    if (this.open) return;
    await this.calls.begin();
    this.open = true;
    this.openedAt = Date.now();
  }
}

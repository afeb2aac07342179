import { RelayError } from '../errors.js';
import { Fifo } from '../fifo.js';
import { formatLsn, maxLsn, type Lsn } from '../lsn.js';

/** A transaction as the checkpoint sees it: how many of its events Kafka has not yet acknowledged. */
export interface TrackedTransaction {
  readonly commitLsn: Lsn;
  /** `commitLsn` as X/Y, formatted once for every event's header. */
  readonly commitLsnText: string;
  readonly commitTime: Date;
  outstanding: number;
  /** The end LSN, known once the Commit message arrived; until then the transaction is open. */
  endLsn: Lsn | null;
}

/**
 * Decides the one position the relay ever confirms to Postgres: the end LSN of the last
 * transaction that is complete and all of whose events — and every earlier transaction's —
 * Kafka acknowledged. Postgres skips, on restart, every transaction whose commit starts before
 * the confirmed position, and the next transaction may start exactly at the previous one's
 * end; so the confirmed value is that end LSN exactly, never a received position.
 */
export class CommitTracker {
  private readonly queue = new Fifo<TrackedTransaction>();
  private open: TrackedTransaction | null = null;
  private confirmedLsn: Lsn;

  constructor(startLsn: Lsn) {
    this.confirmedLsn = startLsn;
  }

  get confirmed(): Lsn {
    return this.confirmedLsn;
  }

  /** Commit time of the oldest transaction not yet confirmed, for lag in seconds. */
  get oldestUnconfirmedCommitTime(): Date | null {
    return this.queue.peek()?.commitTime ?? null;
  }

  begin(commitLsn: Lsn, commitTime: Date): TrackedTransaction {
    if (this.open) throw new RelayError('INTERNAL', `transaction at ${formatLsn(commitLsn)} began before the one at ${formatLsn(this.open.commitLsn)} committed`);
    const transaction: TrackedTransaction = { commitLsn, commitLsnText: formatLsn(commitLsn), commitTime, outstanding: 0, endLsn: null };
    this.queue.push(transaction);
    this.open = transaction;
    return transaction;
  }

  addEvent(transaction: TrackedTransaction): void {
    transaction.outstanding += 1;
  }

  acknowledge(transaction: TrackedTransaction): void {
    if (transaction.outstanding <= 0) throw new RelayError('INTERNAL', `acknowledged more events than were sent for the transaction at ${transaction.commitLsnText}`);
    transaction.outstanding -= 1;
    if (transaction.outstanding === 0) this.advance();
  }

  commit(transaction: TrackedTransaction, endLsn: Lsn): void {
    if (this.open !== transaction) throw new RelayError('INTERNAL', `commit for the transaction at ${transaction.commitLsnText}, which is not the open one`);
    transaction.endLsn = endLsn;
    this.open = null;
    this.advance();
  }

  /**
   * A keepalive: the server has sent everything before `lsn`. With no transaction open, that
   * point is confirmable as soon as everything queued before it is.
   */
  position(lsn: Lsn): void {
    if (this.open) return;
    this.queue.push({ commitLsn: lsn, commitLsnText: '', commitTime: new Date(), outstanding: 0, endLsn: lsn });
    this.advance();
  }

  private advance(): void {
    for (;;) {
      const head = this.queue.peek();
      if (!head || head.endLsn === null || head.outstanding > 0) return;
      this.confirmedLsn = maxLsn(this.confirmedLsn, head.endLsn);
      this.queue.shift();
    }
  }
}

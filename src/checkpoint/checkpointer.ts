import type { Lsn } from '../lsn.js';
import type { CommitTracker, TrackedTransaction } from './commit-tracker.js';

/** Where the confirmed position goes: the replication connection's standby status update. */
export interface StatusReporter {
  sendStatus(lsn: Lsn, replyRequested?: boolean): void;
}

/**
 * The one owner of the acknowledgement -> confirmed position -> Postgres path. It receives
 * Kafka's acknowledgements, asks the CommitTracker what is now confirmed, and is the only code
 * that sends a position: every `intervalMs`, at once when a keepalive asks for a reply, and a
 * last time when the session closes. Whatever it sends is the tracker's confirmed position, so
 * nothing is ever confirmed ahead of an unacknowledged event.
 */
export class Checkpointer {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly tracker: CommitTracker,
    private readonly reporter: StatusReporter,
    private readonly intervalMs: number,
  ) {}

  get confirmed(): Lsn {
    return this.tracker.confirmed;
  }

  /** Commit time of the oldest transaction not yet confirmed, for lag in seconds. */
  get oldestUnconfirmedCommitTime(): Date | null {
    return this.tracker.oldestUnconfirmedCommitTime;
  }

  /** Starts the periodic status update. */
  start(): void {
    this.timer ??= setInterval(() => this.reporter.sendStatus(this.tracker.confirmed), this.intervalMs);
  }

  /** Kafka acknowledged these events. */
  acknowledged(events: Iterable<{ readonly transaction: TrackedTransaction }>): void {
    for (const { transaction } of events) this.tracker.acknowledge(transaction);
  }

  /** A keepalive: the server sent everything before `lsn`; answered now if it asks for a reply. */
  keepalive(lsn: Lsn, replyRequested: boolean): void {
    this.tracker.position(lsn);
    if (replyRequested) this.reporter.sendStatus(this.tracker.confirmed);
  }

  /** Sends what is confirmed and stops the timer: the last word of a session, whatever ended it. */
  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.reporter.sendStatus(this.tracker.confirmed);
  }
}

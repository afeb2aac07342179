import type { Lsn } from '../lsn.js';

/**
 * Whether the relay makes progress, across sessions: the liveness probe and the stall alert
 * read it. A relay that is alive but stuck (a broker that never answers, a Postgres connection
 * that went silent) keeps its process and its HTTP server; only this tells it apart.
 *
 * - stalled: events wait (received, not yet confirmed) and neither the confirmed position moved
 *   nor Kafka acknowledged anything for that long. A long backlog, or one huge transaction,
 *   being published is progress; Kafka not acknowledging is not.
 * - source silent: nothing heard from Postgres on the replication connection for that long.
 *
 * Between sessions (reconnecting) both keep growing from their last value; a standby (another
 * reader holds the slot) is neither stalled nor silent: it has no work of its own.
 */
export class ProgressWatch {
  private lastConfirmed: Lsn | null = null;
  private lastAcknowledged = -1;
  private progressAt: number;
  private pending = false;
  private heardAt: number;

  constructor(private readonly clock: () => number = Date.now) {
    this.progressAt = clock();
    this.heardAt = clock();
  }

  /**
   * A running session's state: its confirmed position, how many events Kafka acknowledged so
   * far (a count that only grows), whether events wait, how long Postgres has been silent.
   */
  observe(confirmed: Lsn, acknowledged: number, pending: boolean, sourceSilentMs: number): void {
    const now = this.clock();
    if (confirmed !== this.lastConfirmed || acknowledged !== this.lastAcknowledged || !pending) this.progressAt = now;
    this.lastConfirmed = confirmed;
    this.lastAcknowledged = acknowledged;
    this.pending = pending;
    this.heardAt = Math.max(this.heardAt, now - sourceSilentMs);
  }

  /** No work of its own (a standby): nothing to stall on, nothing to hear. */
  idle(): void {
    this.pending = false;
    this.heardAt = this.progressAt = this.clock();
  }

  /** How long events have waited with no position confirmed; 0 when none wait. */
  stalledMs(): number {
    return this.pending ? this.clock() - this.progressAt : 0;
  }

  sourceSilentMs(): number {
    return this.clock() - this.heardAt;
  }
}

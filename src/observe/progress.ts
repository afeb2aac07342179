import type { Lsn } from '../lsn.js';

/**
 * Whether the relay makes progress, across sessions: the liveness probe and the stall alert
 * read it. A relay that is alive but stuck (a broker that never answers, a Postgres connection
 * that went silent) keeps its process and its HTTP server; only this tells it apart.
 *
 * - stalled: events wait (received, not yet confirmed) and the confirmed position has not moved
 *   for that long. A long backlog being drained is progress; Kafka not acknowledging is not.
 * - source silent: nothing heard from Postgres on the replication connection for that long.
 *
 * Between sessions (reconnecting) both keep growing from their last value; a standby (another
 * reader holds the slot) is neither stalled nor silent: it has no work of its own.
 */
export class ProgressWatch {
  private lastConfirmed: Lsn | null = null;
  private progressAt: number;
  private pending = false;
  private heardAt: number;

  constructor(private readonly clock: () => number = Date.now) {
    this.progressAt = clock();
    this.heardAt = clock();
  }

  /** A running session's state: its confirmed position, whether events wait behind it, how long Postgres has been silent. */
  observe(confirmed: Lsn, pending: boolean, sourceSilentMs: number): void {
    const now = this.clock();
    if (confirmed !== this.lastConfirmed || !pending) this.progressAt = now;
    this.lastConfirmed = confirmed;
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

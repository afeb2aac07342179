import { RelayError } from '../errors.js';
import type { OutgoingMessage } from '../kafka/record.js';
import { formatLsn, parseLsn, type Lsn } from '../lsn.js';
import type { SourceOrigin } from '../source/source.js';

/**
 * Exactly-once delivery's memory: how far the relay's committed Kafka transactions reached,
 * written as one record in each transaction, beside the events it covers.
 *
 * An event is identified across restarts by its transaction's commit LSN (where the commit
 * record starts: unique per transaction and the same every time Postgres decodes it again)
 * and its place among that transaction's outbox rows, from 1 (pgoutput sends a transaction's
 * rows in the same order every time). Postgres resends from the slot's confirmed position,
 * which is never past what a committed Kafka transaction covers; the relay skips what the
 * progress covers and publishes the rest, so each event is in exactly one committed transaction.
 * A progress record is only visible to a read_committed reader once its transaction committed,
 * so nothing is skipped that Kafka does not have: an aborted transaction's progress is never read.
 */

/** The last event a committed transaction covers. */
export interface ResumePoint {
  readonly commitLsn: Lsn;
  readonly position: number;
  /** The timeline it was published from. */
  readonly timeline: number;
}

export const PROGRESS_FORMAT = 1;

/**
 * The progress record's key: one per slot and server. A restored or re-initialised database (a
 * new system identifier, LSNs starting over) has no progress, so it can only cause duplicates,
 * never skip an event.
 */
export function progressKey(slot: string, origin: Pick<SourceOrigin, 'systemId'>): string {
  return `${origin.systemId}/${slot}`;
}

/** The progress record for a batch: its last event, which in commit order covers every earlier one. */
export function progressValue(batch: readonly OutgoingMessage[], slot: string, origin: SourceOrigin): string {
  const last = batch.at(-1);
  if (!last) throw new RelayError('INTERNAL', 'progress for an empty batch');
  return JSON.stringify({
    format: PROGRESS_FORMAT,
    slot,
    systemId: origin.systemId,
    timeline: origin.timeline,
    commitLsn: last.transaction.commitLsnText,
    position: last.position,
    at: new Date().toISOString(),
  });
}

/** A progress record's value, checked; a record the relay cannot read stops it (skipping on a guess could lose events). */
export function parseProgress(value: Buffer | string, key: string): ResumePoint {
  let parsed: { format?: unknown; timeline?: unknown; commitLsn?: unknown; position?: unknown };
  try {
    parsed = JSON.parse(value.toString()) as typeof parsed;
    if (parsed.format !== PROGRESS_FORMAT) throw new Error(`format ${JSON.stringify(parsed.format)}, expected ${PROGRESS_FORMAT}`);
    if (typeof parsed.commitLsn !== 'string' || !Number.isSafeInteger(parsed.position) || !Number.isSafeInteger(parsed.timeline)) {
      throw new Error('expected commitLsn (X/Y), position and timeline (integers)');
    }
    return { commitLsn: parseLsn(parsed.commitLsn), position: parsed.position as number, timeline: parsed.timeline as number };
  } catch (error) {
    throw new RelayError('SINK_PROGRESS', `the exactly-once progress record for ${key} cannot be read (${(error as Error).message}): it was not written by this relay version`, { cause: error });
  }
}

/** Whether Kafka already has the event at `position` in the transaction committing at `commitLsn`. */
export function covers(resume: ResumePoint | null, commitLsn: Lsn, position: number): boolean {
  if (resume === null) return false;
  return commitLsn < resume.commitLsn || (commitLsn === resume.commitLsn && position <= resume.position);
}

/**
 * Refuses progress from a timeline this server did not continue at that point. After a
 * failover, the old primary may have sent the relay WAL the promoted server never received:
 * the events published from it are not this server's, and the LSNs after the switch point
 * belong to other transactions here. Skipping by them would lose events.
 *
 * The record's timeline is the one its transaction's WAL was read on: a session takes it from
 * the server at its start, and on a standby, which can change timelines under it, ends before it
 * publishes anything of the next one (source/timeline-gate.ts). So progress past the end of its
 * timeline here is WAL this server never had, never this server's own after its promotion.
 * The record holds where the last transaction's commit record starts; the switch point is where
 * the last record of the old timeline this server replayed ends, a record boundary. A commit that
 * starts before it also ends at or before it (the same record on both servers: the transaction
 * is this server's); one that starts at or after it is not this server's.
 */
export function checkTimeline(resume: ResumePoint, origin: SourceOrigin, key: string): void {
  if (resume.timeline === origin.timeline) return;
  if (resume.timeline > origin.timeline) {
    throw new RelayError('SOURCE_TIMELINE_DIVERGED', `Kafka's exactly-once progress for ${key} was written from timeline ${resume.timeline}, but this server is on timeline ${origin.timeline}: the relay is connected to an older server (an old primary after a failover?). Connect it to the current primary.`);
  }
  const end = origin.timelineEnds.get(resume.timeline);
  if (end === undefined || resume.commitLsn >= end) {
    const where = end === undefined ? `this server's history (timeline ${origin.timeline}) does not contain timeline ${resume.timeline}` : `timeline ${resume.timeline} ended at ${formatLsn(end)} on this server`;
    throw new RelayError(
      'SOURCE_TIMELINE_DIVERGED',
      `Kafka has events up to ${formatLsn(resume.commitLsn)} #${resume.position} published from timeline ${resume.timeline}, but ${where}: ` +
        'they came from WAL this server never received (an asynchronous standby was promoted). Skipping by those positions could lose events of this server. ' +
        'Compare the events in Kafka with the outbox table, then remove the progress record (docs/delivery-modes.md#after-a-failover-to-a-standby-that-lacked-wal) to go on.',
    );
  }
}

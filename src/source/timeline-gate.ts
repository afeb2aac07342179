import { RelayError } from '../errors.js';
import { formatLsn, ZERO_LSN, type Lsn } from '../lsn.js';
import type { SourceMessage } from './messages.js';

/** A server's timeline and how far it had replayed, read in that order (what it had replayed is on that timeline). */
export interface ServerTimeline {
  readonly timeline: number;
  /** pg_last_wal_replay_lsn(): the end of the last record replayed. */
  readonly replayedTo: Lsn;
}

/**
 * Exactly-once progress names the timeline its positions were read from (sink/progress.ts), and
 * the session takes it from the server once, at its start. A primary's timeline never changes
 * under a session; a standby's does: when it is promoted (or follows its own upstream's
 * promotion), its logical walsender streams on, past the switch point, into the next timeline's
 * WAL. Progress written from there with the session's timeline would say "timeline 1 past its
 * end", which the next session must refuse as WAL this server never had.
 *
 * So on a standby, a transaction reaches the pipeline only once the server was seen on the
 * session's timeline after the transaction was received: a standby's walsender sends only WAL it
 * has replayed, and everything replayed before a timeline read that still says the session's
 * timeline is that timeline's WAL. One read vouches for everything below what it says was
 * replayed, so a busy stream reads rarely. A server seen on another timeline ends the session
 * (SOURCE_TIMELINE_SWITCHED, retriable) before that transaction is published: the next session
 * takes the new timeline and its history from the server, and every progress record stays true.
 */
export class TimelineGate {
  /** Transactions whose commit starts below this are known to be on the session's timeline. */
  private vouchedBelow: Lsn = ZERO_LSN;

  constructor(
    private readonly timeline: number,
    private readonly readTimeline: () => Promise<ServerTimeline>,
  ) {}

  /** Resolves when `message` may be published; throws SOURCE_TIMELINE_SWITCHED when it may not be told apart from the next timeline's WAL. */
  async admit(message: SourceMessage): Promise<void> {
    const lsn = startOf(message);
    if (lsn === null || lsn < this.vouchedBelow) return;
    const server = await this.readTimeline();
    if (server.timeline !== this.timeline) {
      throw new RelayError(
        'SOURCE_TIMELINE_SWITCHED',
        `the slot's server switched from timeline ${this.timeline} to ${server.timeline} (promoted, or following a promoted upstream) while the relay read it: ` +
          'starting a new session there, so that Kafka\'s exactly-once progress names the timeline of what it covers',
      );
    }
    if (lsn >= server.replayedTo) {
      // Cannot be on a standby in recovery (it sends only what it replayed); told apart from a
      // switch by nobody, so handled as one.
      throw new RelayError('SOURCE_TIMELINE_SWITCHED', `a transaction at ${formatLsn(lsn)} arrived from past what the server says it replayed (${formatLsn(server.replayedTo)}) on timeline ${this.timeline}: starting a new session to read its timeline again`);
    }
    this.vouchedBelow = server.replayedTo;
  }
}

/** Where the WAL of what `message` starts lies: a transaction's commit, a message outside one; null for what publishes nothing of its own. */
function startOf(message: SourceMessage): Lsn | null {
  if (message.kind === 'begin') return message.commitLsn;
  if (message.kind === 'message' && !message.transactional) return message.lsn;
  return null;
}

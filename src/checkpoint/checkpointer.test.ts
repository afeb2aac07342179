import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Lsn } from '../lsn.js';
import { Checkpointer, type StatusReporter } from './checkpointer.js';
import { CommitTracker } from './commit-tracker.js';

const at = (offset: number) => BigInt(offset) as Lsn;
const now = new Date();

/** The replication connection at the checkpointer's port: every status update it was asked to send. */
class RecordingReporter implements StatusReporter {
  readonly sent: { lsn: Lsn; replyRequested: boolean }[] = [];
  sendStatus(lsn: Lsn, replyRequested = false): void {
    this.sent.push({ lsn, replyRequested });
  }
}

/** A committed transaction of one event, not yet acknowledged. */
function oneEvent(tracker: CommitTracker, commitLsn: number, endLsn: number) {
  const transaction = tracker.begin(at(commitLsn), now);
  tracker.addEvent(transaction);
  tracker.commit(transaction, at(endLsn));
  return transaction;
}

function checkpointerFrom(start: number, intervalMs = 1_000) {
  const tracker = new CommitTracker(at(start));
  const reporter = new RecordingReporter();
  return { tracker, reporter, checkpointer: new Checkpointer(tracker, reporter, intervalMs) };
}

describe('Checkpointer', () => {
  afterEach(() => vi.useRealTimers());

  it('never sends a position ahead of an unacknowledged event, by timer, reply or close', () => {
    vi.useFakeTimers();
    const { tracker, reporter, checkpointer } = checkpointerFrom(0);
    oneEvent(tracker, 10, 20);
    const second = oneEvent(tracker, 20, 30);
    checkpointer.start();
    checkpointer.acknowledged([{ transaction: second }]);
    checkpointer.keepalive(at(40), true);
    vi.advanceTimersByTime(3_000);
    checkpointer.close();
    expect(new Set(reporter.sent.map(({ lsn }) => lsn))).toEqual(new Set([at(0)]));

    const again = checkpointerFrom(0);
    const only = oneEvent(again.tracker, 10, 20);
    again.checkpointer.acknowledged([{ transaction: only }]);
    again.checkpointer.close();
    expect(again.reporter.sent.at(-1)!.lsn).toBe(at(20));
  });

  it('answers a keepalive that asks for a reply at once, with the confirmed position', () => {
    const { reporter, checkpointer } = checkpointerFrom(5);
    checkpointer.keepalive(at(50), false);
    expect(reporter.sent).toEqual([]);
    checkpointer.keepalive(at(60), true);
    // An idle outbox: the keepalive's position is confirmable at once, so the WAL is not held.
    expect(reporter.sent).toEqual([{ lsn: at(60), replyRequested: false }]);
  });

  it('sends the confirmed position every interval until closed, and once more at close', () => {
    vi.useFakeTimers();
    const { tracker, reporter, checkpointer } = checkpointerFrom(0, 200);
    checkpointer.start();
    const transaction = oneEvent(tracker, 10, 20);
    vi.advanceTimersByTime(200);
    checkpointer.acknowledged([{ transaction }]);
    vi.advanceTimersByTime(400);
    checkpointer.close();
    vi.advanceTimersByTime(1_000);
    expect(reporter.sent.map(({ lsn }) => lsn)).toEqual([at(0), at(20), at(20), at(20)]);
  });
});

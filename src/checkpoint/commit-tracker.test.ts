import { describe, expect, it } from 'vitest';
import type { Lsn } from '../lsn.js';
import { CommitTracker } from './commit-tracker.js';

const at = (n: number) => BigInt(n) as Lsn;
const now = new Date();

describe('CommitTracker', () => {
  it('confirms the exact end LSN of the last fully acknowledged transaction, not one byte more', () => {
    const tracker = new CommitTracker(at(100));
    const first = tracker.begin(at(110), now);
    tracker.addEvent(first);
    tracker.commit(first, at(200));
    expect(tracker.confirmed).toBe(at(100));
    tracker.acknowledge(first);
    expect(tracker.confirmed).toBe(at(200));
  });

  it('holds an adjacent transaction that starts exactly at the confirmed end until it is acknowledged', () => {
    const tracker = new CommitTracker(at(0));
    const first = tracker.begin(at(10), now);
    tracker.addEvent(first);
    tracker.commit(first, at(50));
    const adjacent = tracker.begin(at(50), now);
    tracker.addEvent(adjacent);
    tracker.commit(adjacent, at(90));
    tracker.acknowledge(first);
    expect(tracker.confirmed).toBe(at(50));
    tracker.acknowledge(adjacent);
    expect(tracker.confirmed).toBe(at(90));
  });

  it('never confirms past an earlier transaction that is still unacknowledged', () => {
    const tracker = new CommitTracker(at(0));
    const first = tracker.begin(at(10), now);
    tracker.addEvent(first);
    tracker.commit(first, at(20));
    const second = tracker.begin(at(30), now);
    tracker.addEvent(second);
    tracker.commit(second, at(40));
    tracker.acknowledge(second);
    expect(tracker.confirmed).toBe(at(0));
    tracker.acknowledge(first);
    expect(tracker.confirmed).toBe(at(40));
  });

  it('does not confirm an open transaction even when all its events so far are acknowledged', () => {
    const tracker = new CommitTracker(at(0));
    const open = tracker.begin(at(10), now);
    tracker.addEvent(open);
    tracker.acknowledge(open);
    expect(tracker.confirmed).toBe(at(0));
    tracker.position(at(500));
    expect(tracker.confirmed).toBe(at(0));
    tracker.commit(open, at(60));
    expect(tracker.confirmed).toBe(at(60));
  });

  it('follows keepalive positions when idle, and queues them behind unacknowledged work', () => {
    const tracker = new CommitTracker(at(0));
    tracker.position(at(1000));
    expect(tracker.confirmed).toBe(at(1000));
    const busy = tracker.begin(at(1100), now);
    tracker.addEvent(busy);
    tracker.commit(busy, at(1200));
    tracker.position(at(5000));
    expect(tracker.confirmed).toBe(at(1000));
    tracker.acknowledge(busy);
    expect(tracker.confirmed).toBe(at(5000));
  });

  it('confirms a transaction with no outbox events at its commit', () => {
    const tracker = new CommitTracker(at(0));
    const empty = tracker.begin(at(10), now);
    tracker.commit(empty, at(30));
    expect(tracker.confirmed).toBe(at(30));
  });

  it('never moves backwards', () => {
    const tracker = new CommitTracker(at(900));
    tracker.position(at(100));
    expect(tracker.confirmed).toBe(at(900));
  });

  it('reports the commit time of the oldest unconfirmed transaction', () => {
    const tracker = new CommitTracker(at(0));
    const early = new Date(1_000);
    const first = tracker.begin(at(10), early);
    tracker.addEvent(first);
    tracker.commit(first, at(20));
    expect(tracker.oldestUnconfirmedCommitTime).toEqual(early);
    tracker.acknowledge(first);
    expect(tracker.oldestUnconfirmedCommitTime).toBeNull();
  });

  it('refuses more acknowledgements than events', () => {
    const tracker = new CommitTracker(at(0));
    const txn = tracker.begin(at(10), now);
    // A broken invariant is a bug, not a lost connection: not retriable, so the relay stops (exit 1) instead of looping.
    expect(() => tracker.acknowledge(txn)).toThrow(expect.objectContaining({ code: 'INTERNAL', retriable: false, message: expect.stringMatching(/acknowledged more events/) }));
  });
});

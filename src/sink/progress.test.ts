import { describe, expect, it } from 'vitest';
import type { TrackedTransaction } from '../checkpoint/commit-tracker.js';
import { RelayError } from '../errors.js';
import type { OutgoingMessage } from '../kafka/record.js';
import { parseLsn } from '../lsn.js';
import type { SourceOrigin } from '../source/source.js';
import { checkTimeline, covers, parseProgress, progressKey, progressValue, type ResumePoint } from './progress.js';

const lsn = (text: string) => parseLsn(text);
const origin = (timeline: number, ends: [number, string][] = []): SourceOrigin => ({ systemId: '7313', timeline, timelineEnds: new Map(ends.map(([t, end]) => [t, lsn(end)])) });
const message = (commitLsnText: string, position: number) => ({ transaction: { commitLsnText } as TrackedTransaction, position }) as OutgoingMessage;

describe('exactly-once progress', () => {
  it('records the last event of a batch and reads it back', () => {
    const value = progressValue([message('0/10', 3), message('0/20', 1), message('0/20', 2)], 'outbox_relay', origin(2));
    expect(parseProgress(Buffer.from(value), 'k')).toEqual({ commitLsn: lsn('0/20'), position: 2, timeline: 2 });
    expect(JSON.parse(value)).toMatchObject({ slot: 'outbox_relay', systemId: '7313' });
  });

  it('keys progress by server and slot: a restored database (new system id) finds none and skips nothing', () => {
    expect(progressKey('outbox_relay', { systemId: '7313' })).toBe('7313/outbox_relay');
    expect(progressKey('outbox_relay', { systemId: '9999' })).not.toBe(progressKey('outbox_relay', { systemId: '7313' }));
  });

  it('covers earlier transactions, and the same transaction up to the recorded place only', () => {
    const resume: ResumePoint = { commitLsn: lsn('0/100'), position: 2, timeline: 1 };
    expect(covers(resume, lsn('0/FF'), 99)).toBe(true);
    expect(covers(resume, lsn('0/100'), 2)).toBe(true);
    expect(covers(resume, lsn('0/100'), 3)).toBe(false);
    expect(covers(resume, lsn('0/101'), 1)).toBe(false);
    expect(covers(null, lsn('0/1'), 1)).toBe(false);
  });

  it('refuses a record it cannot read instead of guessing', () => {
    for (const bad of ['not json', '{"format":2,"commitLsn":"0/1","position":1,"timeline":1}', '{"format":1,"commitLsn":"zz","position":1,"timeline":1}', '{"format":1,"commitLsn":"0/1","timeline":1}']) {
      expect(() => parseProgress(bad, '7313/slot')).toThrow(expect.objectContaining({ code: 'SINK_PROGRESS', message: expect.stringContaining('7313/slot') }));
    }
  });

  describe('timelines', () => {
    const at = (commitLsn: string, timeline: number): ResumePoint => ({ commitLsn: lsn(commitLsn), position: 1, timeline });

    it('accepts progress from this timeline, or from an earlier one before it ended here', () => {
      expect(() => checkTimeline(at('0/5000', 2), origin(2, [[1, '0/3000']]), 'k')).not.toThrow();
      expect(() => checkTimeline(at('0/2FFF', 1), origin(2, [[1, '0/3000']]), 'k')).not.toThrow();
    });

    it('refuses progress past the point where its timeline ended here: that WAL never reached this server', () => {
      const error = (() => {
        try {
          checkTimeline(at('0/3000', 1), origin(2, [[1, '0/3000']]), 'k');
        } catch (thrown) {
          return thrown as RelayError;
        }
        return null;
      })();
      expect(error?.code).toBe('SOURCE_TIMELINE_DIVERGED');
      expect(error?.message).toMatch(/timeline 1 ended at 0\/3000/);
    });

    it('refuses progress from a timeline this server does not know, or a later one (an old primary)', () => {
      expect(() => checkTimeline(at('0/10', 1), origin(3, [[2, '0/3000']]), 'k')).toThrow(/does not contain timeline 1/);
      expect(() => checkTimeline(at('0/10', 3), origin(2, [[1, '0/3000']]), 'k')).toThrow(/older server/);
    });
  });
});

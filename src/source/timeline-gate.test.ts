import { describe, expect, it } from 'vitest';
import { RelayError } from '../errors.js';
import { parseLsn, type Lsn } from '../lsn.js';
import type { SourceMessage } from './messages.js';
import { TimelineGate, type ServerTimeline } from './timeline-gate.js';

const begin = (lsn: string): SourceMessage => ({ kind: 'begin', commitLsn: parseLsn(lsn), commitTime: new Date() });
const insert: SourceMessage = { kind: 'insert', relation: { schema: 'public', name: 'event_outbox' }, row: {} };

/** A server whose answers the test sets, counting the reads. */
function server(initial: ServerTimeline) {
  const state = { answer: initial, reads: 0 };
  return { state, read: async () => { state.reads += 1; return state.answer; } };
}

const at = (timeline: number, lsn: string): ServerTimeline => ({ timeline, replayedTo: parseLsn(lsn) as Lsn });

describe('TimelineGate: a standby session publishes nothing of a timeline it did not start on', () => {
  it('admits a transaction once the server, read after it arrived, is still on the session\'s timeline; one read vouches for all below what it replayed', async () => {
    const { state, read } = server(at(1, '0/3000000'));
    const gate = new TimelineGate(1, read);
    await gate.admit(begin('0/1000000'));
    await gate.admit(insert);
    await gate.admit(begin('0/2FFFFFF'));
    expect(state.reads).toBe(1);
    state.answer = at(1, '0/4000000');
    await gate.admit(begin('0/3000000'));
    expect(state.reads).toBe(2);
  });

  it('ends the session (SOURCE_TIMELINE_SWITCHED, retriable) when the server is on another timeline: promoted under the stream', async () => {
    const { state, read } = server(at(1, '0/3000000'));
    const gate = new TimelineGate(1, read);
    await gate.admit(begin('0/1000000'));
    // Promoted at 0/3000000: what comes after is timeline 2's WAL.
    state.answer = at(2, '0/3000000');
    const refused = await gate.admit(begin('0/3000100')).then(() => null, (error: unknown) => error);
    expect(refused).toBeInstanceOf(RelayError);
    expect(refused).toMatchObject({ code: 'SOURCE_TIMELINE_SWITCHED', retriable: true });
    expect((refused as Error).message).toMatch(/switched from timeline 1 to 2/);
    // Vouched for before the switch: still admitted without a read.
    await gate.admit(begin('0/2000000'));
  });

  it('refuses a transaction past what the server says it replayed, which a standby never sends', async () => {
    const { read } = server(at(1, '0/1000000'));
    await expect(new TimelineGate(1, read).admit(begin('0/1000000'))).rejects.toMatchObject({ code: 'SOURCE_TIMELINE_SWITCHED' });
  });

  it('reads for a message outside any transaction at its own LSN, and not for a transactional one', async () => {
    const { state, read } = server(at(1, '0/5000000'));
    const gate = new TimelineGate(1, read);
    await gate.admit({ kind: 'message', transactional: true, lsn: parseLsn('0/6000000'), prefix: 'outbox', content: Buffer.from('{}') });
    expect(state.reads).toBe(0);
    await gate.admit({ kind: 'message', transactional: false, lsn: parseLsn('0/4000000'), prefix: 'outbox', content: Buffer.from('{}') });
    expect(state.reads).toBe(1);
  });
});

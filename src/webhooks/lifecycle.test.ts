import { describe, expect, it } from 'vitest';
import type { ClaimedDelivery, Completion } from './delivery-store.js';
import { ResultWriter, type Ended } from './lifecycle.js';

const delivery = (id: string): ClaimedDelivery => ({ id, eventId: `evt-${id || 'new'}`, eventType: 'invoice.paid', endpointId: 'ep-1', attempt: 1, failures: 0, body: '{}', producedAt: new Date(0), url: 'http://receiver.test/', secrets: [], headers: {} });
const completionOf = (of: ClaimedDelivery): Completion => ({
  delivery: of,
  startedAt: new Date(0),
  result: { outcome: 'delivered', statusCode: 204, latencyMs: 1, retryAfterMs: null, response: '', error: null },
  verdict: { delivery: { status: 'delivered' }, endpoint: { kind: 'success' } },
});

describe("a held delivery's result, written once by whoever owns it", () => {
  it('a recorded (claimed) delivery: by the completions', () => {
    const writer = new ResultWriter();
    const claimed = delivery('7');
    writer.lease(claimed, { kind: 'recorded', id: '7' });
    expect(writer.end(claimed, { completion: completionOf(claimed) })).toEqual({ to: 'completions', completion: completionOf(claimed) });
  });

  it('a first attempt that ended while its recording waited: by the recording, never by the completions', () => {
    const writer = new ResultWriter();
    const first = delivery('');
    const settled: Ended[] = [];
    writer.lease(first, { kind: 'awaited', settle: (ended) => settled.push(ended) });
    expect(writer.end(first, { completion: completionOf(first) })).toEqual({ to: 'recording' });
    expect(settled).toHaveLength(1);
    // Ended: nothing is handed over, nor written again when its recording reports.
    expect(writer.handOver(first)).toBe(false);
    expect(writer.recorded(first, '8')).toBeNull();
  });

  it('a first attempt handed over: its result waits for its id, then goes with it to the completions', () => {
    const writer = new ResultWriter();
    const first = delivery('');
    writer.lease(first, { kind: 'awaited', settle: () => expect.unreachable('the recording went on without it') });
    expect(writer.handOver(first)).toBe(true);
    expect(writer.end(first, { completion: completionOf(first) })).toEqual({ to: 'held' });
    const route = writer.recorded(first, '9');
    expect(route).toMatchObject({ to: 'completions', completion: { delivery: { id: '9', eventId: 'evt-new' } } });
  });

  it('a first attempt handed over and recorded before it ended: written by the completions with its id', () => {
    const writer = new ResultWriter();
    const first = delivery('');
    writer.lease(first, { kind: 'awaited', settle: () => expect.unreachable('handed over') });
    writer.handOver(first);
    expect(writer.recorded(first, '10')).toBeNull();
    expect(writer.end(first, { completion: completionOf(first) })).toMatchObject({ to: 'completions', completion: { delivery: { id: '10' } } });
  });

  it('a first attempt whose recording failed: its slot released, nothing written, whenever it ends', () => {
    const writer = new ResultWriter();
    const [before, after] = [delivery(''), delivery('')];
    for (const each of [before, after]) {
      writer.lease(each, { kind: 'awaited', settle: () => expect.unreachable('handed over') });
      writer.handOver(each);
    }
    expect(writer.end(before, { completion: completionOf(before) })).toEqual({ to: 'held' });
    expect(writer.recorded(before, null)).toEqual({ to: 'released' });
    expect(writer.recorded(after, null)).toBeNull();
    expect(writer.end(after, { completion: completionOf(after) })).toEqual({ to: 'released' });
  });

  it('a delivery the endpoint gate held back: given back by its id, never written as an attempt', () => {
    const writer = new ResultWriter();
    const claimed = delivery('11');
    writer.lease(claimed, { kind: 'recorded', id: '11' });
    expect(writer.end(claimed, { heldBack: { delivery: claimed, dueAt: new Date(2_000) } })).toEqual({ to: 'given-back', heldBack: { delivery: claimed, dueAt: new Date(2_000) } });
    const first = delivery('');
    writer.lease(first, { kind: 'awaited', settle: () => expect.unreachable('handed over') });
    writer.handOver(first);
    expect(writer.end(first, { heldBack: { delivery: first, dueAt: new Date(3_000) } })).toEqual({ to: 'held' });
    expect(writer.recorded(first, '12')).toMatchObject({ to: 'given-back', heldBack: { delivery: { id: '12' }, dueAt: new Date(3_000) } });
  });
});

import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { DeliveryStore } from './delivery-store.js';
import type { Closing } from './endpoint-gate.js';
import { Dispatcher, type AttemptSender } from './dispatcher.js';
import { EndpointShares } from './endpoint-shares.js';
import type { LoadedEndpoints } from './endpoint-store.js';
import type { AttemptResult } from './http-sender.js';
import type { ClaimedDelivery, Completion, HeldBack, OwedChunk } from './lifecycle.js';
import type { GrantedSlots } from './lease-store.js';
import { createWebhookMetrics } from './metrics.js';
import { owedKey, type OwedRow } from './owed-store.js';
import type { ResultsToWrite } from './result-store.js';

const delivery: ClaimedDelivery = {
  id: '1',
  eventId: 'evt-1',
  eventType: 'invoice.paid',
  endpointId: 'ep-1',
  attempt: 1,
  failures: 0,
  body: '{}',
  producedAt: new Date(),
  url: 'http://receiver.test/hook',
  secrets: [{ secret: `whsec_${Buffer.alloc(32, 1).toString('base64')}`, expiresAt: null }],
  headers: {},
};
const delivered: AttemptResult = { outcome: 'delivered', statusCode: 204, latencyMs: 1, retryAfterMs: null, response: '', error: null };

/**
 * The store's port, in memory: hands out `due` once each, grants every endpoint's slots to first
 * attempts, and records the writes (completions, deliveries given back, owed rows, leased ones
 * given ids from 100 on) and endpoints' closings. `control.writeMs` delays each write,
 * `control.failWrites` fails that many.
 */
function fakeStore(due: ClaimedDelivery[]) {
  const completed: Completion[] = [];
  const givenBack: HeldBack[] = [];
  const closings: Closing[] = [];
  const owed: OwedRow[] = [];
  const control = { writeMs: 0, failWrites: 0 };
  let nextId = 100;
  const store = {
    claim: async (_owner: string, _now: Date, limit: number) => due.splice(0, limit),
    takeSlots: async (wanted: ReadonlyMap<string, number>) => new Map([...wanted].map(([endpointId, slots]): [string, GrantedSlots] => [endpointId, { slots, url: delivery.url, secrets: delivery.secrets, headers: {} }])),
    write: async (results: ResultsToWrite) => {
      await new Promise((resolve) => setTimeout(resolve, control.writeMs));
      if (control.failWrites > 0) {
        control.failWrites -= 1;
        throw new Error('the store is down');
      }
      completed.push(...results.completions);
      givenBack.push(...results.givenBack);
      owed.push(...results.owed);
      const leased = new Map(results.owed.flatMap((row) => (row.state === 'leased' ? [[owedKey(row.delivery.eventId, row.delivery.endpointId), String(nextId++)] as const] : [])));
      return { changes: [], owed: { added: results.owed.length, leased } };
    },
    closeEndpoint: async (closing: Closing) => {
      closings.push(closing);
      return null;
    },
  };
  return { store: store as unknown as DeliveryStore, completed, givenBack, closings, owed, control };
}

const loaded: LoadedEndpoints = { version: '1', get: () => ({ url: delivery.url, secrets: delivery.secrets, headers: {}, maxInFlight: 1_000, sendsFirst: true }) };

/** A chunk of new deliveries to ep-1, one per event id (the body names the event, for senders that answer by it). */
function chunkOf(eventIds: readonly string[]): OwedChunk {
  return { owed: eventIds.map((eventId) => ({ event: { eventId, eventType: 'invoice.paid', aggregateId: null, body: eventId, producedAt: new Date() }, endpointId: 'ep-1' })), endpoints: loaded };
}

/** The (event, state) of each owed row written. */
const statesOf = (rows: readonly OwedRow[]) => rows.map((row) => (row.state === 'due' ? [row.event.eventId, 'due'] : row.state === 'leased' ? [row.delivery.eventId, 'leased'] : [row.completion.delivery.eventId, row.completion.verdict.delivery.status]));

/** Answers after `delayMs`, counting the most attempts it had in flight at once. */
function countingSender(delayMs: number): { readonly sender: AttemptSender; readonly most: () => number } {
  let inFlight = 0;
  let most = 0;
  const sender: AttemptSender = {
    send: () => {
      most = Math.max(most, (inFlight += 1));
      return new Promise((resolve) =>
        setTimeout(() => {
          inFlight -= 1;
          resolve(delivered);
        }, delayMs),
      );
    },
  };
  return { sender, most: () => most };
}

function dispatcher(store: DeliveryStore, sender: AttemptSender, concurrency: number): Dispatcher {
  return new Dispatcher({
    store,
    sender,
    policy: { scheduleMs: [0, 1_000], maxRetryAfterMs: 60_000 },
    rules: { circuitFailures: 5, circuitCooldownMs: 30_000, disableAfterMs: 86_400_000 },
    concurrency,
    leaseMs: 10_000,
    pollMs: 60_000,
    owner: 'unit',
    slots: EndpointShares.alone('unit'),
    clock: () => new Date(),
    logger: pino({ level: 'silent' }),
    metrics: createWebhookMetrics(),
  });
}

describe('the dispatcher', () => {
  it('a wake-up while every slot is busy waits for a slot, and the I/O that frees it still runs', async () => {
    const { store, completed } = fakeStore([delivery, { ...delivery, id: '2', eventId: 'evt-2' }]);
    // The answer comes on a timer: a loop turning on resolved promises alone would never let it fire.
    const sender: AttemptSender = { send: () => new Promise((resolve) => setTimeout(() => resolve(delivered), 30)) };
    const sending = dispatcher(store, sender, 1);
    sending.start();
    await new Promise((resolve) => setTimeout(resolve, 5));
    // New deliveries recorded while the only slot is taken.
    sending.wake();
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(completed.map((c) => c.delivery.id)).toEqual(['1', '2']);
    await sending.stop(1_000);
  });

  it('never has more attempts in flight than its concurrency', async () => {
    const due = Array.from({ length: 20 }, (_, i) => ({ ...delivery, id: String(i), eventId: `evt-${i}` }));
    const { store, completed } = fakeStore(due);
    const { sender, most } = countingSender(5);
    const sending = dispatcher(store, sender, 3);
    sending.start();
    for (let i = 0; i < 100 && completed.length < 20; i += 1) {
      sending.wake();
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await sending.stop(1_000);
    expect(completed).toHaveLength(20);
    expect(most()).toBe(3);
  });

  it('slots held for first attempts are not claimed meanwhile; those sent are, once their recording gives them back', async () => {
    const ids = ['due-0', 'due-1', 'due-2', 'due-3', 'due-4'];
    const { store, completed, owed } = fakeStore(ids.map((id) => ({ ...delivery, id, eventId: `evt-${id}` })));
    const { sender, most } = countingSender(20);
    const sending = dispatcher(store, sender, 3);
    // Four times the concurrency: deliveries being recorded or written take no request slot.
    const held = sending.reserve(100);
    expect(held.slots).toBe(12);
    sending.start();
    await new Promise((resolve) => setTimeout(resolve, 30));
    // Every slot is held: nothing was claimed.
    expect(completed).toHaveLength(0);
    // One first attempt sent in the slots, the rest given back at once.
    await sending.take(chunkOf(['evt-first']), held, null).written;
    // Its result is written with its delivery's row, not as a claimed one's.
    expect(statesOf(owed)).toEqual([['evt-first', 'delivered']]);
    for (let i = 0; i < 50 && completed.length < 5; i += 1) await new Promise((resolve) => setTimeout(resolve, 10));
    await sending.stop(1_000);
    expect(completed.map((c) => c.delivery.id).sort()).toEqual(ids);
    expect(most()).toBeLessThanOrEqual(3);
  });

  it('a reservation waits for slots held by recordings and writes, and gives up when endpoints hold every request slot', async () => {
    const { store } = fakeStore([]);
    const hanging = new Promise<AttemptResult>(() => undefined);
    const stuck = dispatcher(store, { send: () => hanging }, 2);
    // Two requests out that never end, six queued behind them: nothing will free.
    const all = stuck.reserve(100);
    expect(all.slots).toBe(8);
    void stuck.take(chunkOf(['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].map((id) => `evt-${id}`)), all, null);
    const started = Date.now();
    expect((await stuck.reserveWhenFree(1, 100, 50)).slots).toBe(0);
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);

    const recording = dispatcher(store, countingSender(1).sender, 4);
    // Every slot held by a recording that takes longer than the stall: it waits, then gets them.
    const held = recording.reserve(100);
    expect(held.slots).toBe(16);
    setTimeout(() => recording.release(held.slots), 120);
    // At most a round of requests per reservation.
    expect((await recording.reserveWhenFree(1, 100, 50)).slots).toBe(4);
    expect(recording.reserve(100).slots).toBe(12);
    // Slots freeing one at a time: it waits until there are 3 (an event fanned out to 3
    // endpoints; more than a quarter of the concurrency).
    const waiting = recording.reserveWhenFree(3, 100, 50);
    for (let i = 0; i < 3; i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      recording.release(1);
    }
    expect((await waiting).slots).toBe(3);
    // An event fanned out to thousands waits for a round of requests (4), not for the whole hold.
    recording.release(7);
    const started2 = Date.now();
    expect((await recording.reserveWhenFree(5_000, 10_000, 1_000)).slots).toBe(7);
    expect(Date.now() - started2).toBeLessThan(500);
  });

  it('a reservation keeps waiting while attempts keep ending, though their slots stay held until their write', async () => {
    const { store, control } = fakeStore([]);
    // Two requests at a time, each answered in 30 ms: more often than the 50 ms stall.
    const sending = dispatcher(store, countingSender(30).sender, 2);
    const held = sending.reserve(100);
    expect(held.slots).toBe(8);
    // Their write returns their slots well after the stall (as at start-up, or with Postgres busy).
    control.writeMs = 100;
    void sending.take(chunkOf(['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].map((id) => `evt-${id}`)), held, null);
    // Endpoints answering is no stall: it waits for the recording rather than taking nothing.
    expect((await sending.reserveWhenFree(1, 100, 50)).slots).toBe(2);
    await sending.stop(1_000);
  });

  it('an answer that came while the event loop was held up past the stall is seen before the reservation gives up', async () => {
    // Requests answer only when the test says so.
    const answers: (() => void)[] = [];
    const sender: AttemptSender = { send: () => new Promise((resolve) => answers.push(() => resolve(delivered))) };
    const { store: claimed } = fakeStore(['a', 'b', 'c', 'd'].map((id) => ({ ...delivery, id, eventId: `evt-${id}` })));
    const sending = dispatcher(claimed, sender, 1);
    // Four claimed: one request out, three queued behind it; every slot held.
    sending.start();
    while (answers.length === 0) await new Promise((resolve) => setTimeout(resolve, 1));
    const reservation = sending.reserveWhenFree(1, 100, 50);
    // The event loop held up past the 50 ms stall, with the answer in meanwhile: it is handled
    // (as I/O would be) after the timers that came due, the stall's among them.
    setTimeout(
      () =>
        setImmediate(() => {
          setImmediate(answers[0]!);
          const until = Date.now() + 100;
          while (Date.now() < until);
        }),
      10,
    );
    // Its result written frees its slot: one slot, not nothing.
    expect((await reservation).slots).toBe(1);
    await sending.stop(100);
  });

  it('a claim its endpoints capped is followed by the next as soon as a result is written, not at the next poll', async () => {
    const due = Array.from({ length: 12 }, (_, i) => ({ ...delivery, id: String(i), eventId: `evt-${i}` }));
    const { store, completed } = fakeStore(due);
    // An endpoint with a limit of 2: each claim hands out 2, however many slots are free.
    const capped = { claim: async () => due.splice(0, 2), write: store.write.bind(store) } as unknown as DeliveryStore;
    const sending = dispatcher(capped, countingSender(5).sender, 10);
    sending.start();
    // The poll is a minute: only completions can bring the next claims in time.
    for (let i = 0; i < 100 && completed.length < 12; i += 1) await new Promise((resolve) => setTimeout(resolve, 10));
    await sending.stop(1_000);
    expect(completed).toHaveLength(12);
  });

  it('first attempts sent before their rows are written: each written once with its result, and their slots held until then', async () => {
    const { store, completed, owed, control } = fakeStore([]);
    const sending = dispatcher(store, countingSender(5).sender, 4);
    control.writeMs = 50;
    const held = sending.reserve(2);
    const taken = sending.take(chunkOf(['evt-first-0', 'evt-first-1']), held, null);
    await taken.queued;
    // Both ended before the write: still held until it commits.
    expect(sending.reserve(100).slots).toBe(16 - held.slots);
    await taken.written;
    expect(statesOf(owed)).toEqual([
      ['evt-first-0', 'delivered'],
      ['evt-first-1', 'delivered'],
    ]);
    // Written once, in their rows: nothing as a claimed delivery's result.
    expect(completed).toEqual([]);
    // Their write gave theirs back.
    expect(sending.reserve(100).slots).toBe(held.slots);
    await sending.stop(1_000);
  });

  it('a first attempt still in flight at its chunk\'s write is written leased, and its result under the id it got; not at all when that write failed', async () => {
    const { store, completed, owed, control } = fakeStore([]);
    // Answers after both chunks' waits (FIRST_ATTEMPT_WAIT, 500 ms each) handed them over.
    const sending = dispatcher(store, countingSender(1_300).sender, 4);
    const written = sending.take(chunkOf(['evt-slow-0']), sending.reserve(1), null);
    await written.written;
    expect(statesOf(owed)).toEqual([['evt-slow-0', 'leased']]);
    // The next chunk's write fails: its event is read again, its attempt's result written by nobody.
    control.failWrites = 1;
    const failed = sending.take(chunkOf(['evt-slow-1']), sending.reserve(1), written);
    await expect(failed.written).rejects.toThrow('the store is down');
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(completed.map((c) => [c.delivery.id, c.delivery.eventId, c.verdict.delivery.status])).toEqual([['100', 'evt-slow-0', 'delivered']]);
    // Both slots came back: the written one's with its result, the other's when its attempt ended.
    expect(sending.reserve(100).slots).toBe(16);
    await sending.stop(1_000);
  });

  it('a first attempt that ends while its chunk is being written leased is written once the id comes', async () => {
    const { store, completed, owed, control } = fakeStore([]);
    const sending = dispatcher(store, countingSender(520).sender, 4);
    // Handed over at 500 ms; it answers during the write.
    control.writeMs = 60;
    await sending.take(chunkOf(['evt-late']), sending.reserve(1), null).written;
    expect(statesOf(owed)).toEqual([['evt-late', 'leased']]);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(completed.map((c) => c.delivery.id)).toEqual(['100']);
    await sending.stop(1_000);
  });

  it('hands over a straggler once its chunk-mates ended, not after the whole wait', async () => {
    const { store, owed } = fakeStore([]);
    // The first delivery hangs for a second; the other three answer in 5 ms.
    const sender: AttemptSender = { send: (request) => new Promise((resolve) => setTimeout(() => resolve(delivered), request.body === 'evt-chunk-0' ? 1_000 : 5)) };
    const sending = dispatcher(store, sender, 4);
    const started = Date.now();
    await sending.take(chunkOf([0, 1, 2, 3].map((i) => `evt-chunk-${i}`)), sending.reserve(4), null).written;
    expect(Date.now() - started).toBeLessThan(500);
    expect(statesOf(owed)).toEqual([
      ['evt-chunk-1', 'delivered'],
      ['evt-chunk-2', 'delivered'],
      ['evt-chunk-3', 'delivered'],
      ['evt-chunk-0', 'leased'],
    ]);
    await sending.stop(2_000);
  });

  it('chunks are written in the order they were taken, whichever ended first', async () => {
    const { store, owed } = fakeStore([]);
    const sender: AttemptSender = { send: (request) => new Promise((resolve) => setTimeout(() => resolve(delivered), request.body === 'evt-a' ? 80 : 1)) };
    const sending = dispatcher(store, sender, 4);
    const a = sending.take(chunkOf(['evt-a']), sending.reserve(1), null);
    const b = sending.take(chunkOf(['evt-b']), sending.reserve(1), a);
    await Promise.all([a.written, b.written]);
    expect(statesOf(owed).map(([eventId]) => eventId)).toEqual(['evt-a', 'evt-b']);
    await sending.stop(1_000);
  });

  it('sends nothing more to an endpoint that asked for a pause (Retry-After), from the moment its answer is judged: what it holds goes back due at the pause end, no attempt counted', async () => {
    const due = [1, 2, 3].map((n) => ({ ...delivery, id: String(n), eventId: `evt-${n}` }));
    const { store, completed, givenBack, closings } = fakeStore(due);
    let started = 0;
    let answered = 0;
    const sender: AttemptSender = {
      send: () => {
        started += 1;
        return new Promise((resolve) =>
          setTimeout(() => {
            answered = Date.now();
            // The first answer asks for 300 ms; the others would succeed.
            resolve(started === 1 ? { outcome: 'http_status', statusCode: 429, latencyMs: 1, retryAfterMs: 300, response: '', error: 'HTTP 429' } : delivered);
          }, 5),
        );
      },
    };
    // One request at a time: the other two are queued behind the 429 in this process.
    const sending = dispatcher(store, sender, 1);
    sending.start();
    await new Promise((resolve) => setTimeout(resolve, 100));
    await sending.stop(1_000);
    expect(started).toBe(1);
    expect(completed.map((c) => c.result.statusCode)).toEqual([429]);
    // The pause, written at once for the other processes' leases.
    expect(closings).toHaveLength(1);
    expect(closings[0]!.pauseUntil!.getTime()).toBeGreaterThanOrEqual(answered + 290);
    expect(givenBack.map((h) => [h.delivery.id, h.dueAt.getTime()])).toEqual([
      ['2', closings[0]!.pauseUntil!.getTime()],
      ['3', closings[0]!.pauseUntil!.getTime()],
    ]);
  });

  it('sends nothing more to an endpoint that answered 410, though a success beside it ends after it', async () => {
    const due = [1, 2, 3, 4].map((n) => ({ ...delivery, id: String(n), eventId: `evt-${n}` }));
    const { store, completed, givenBack, closings } = fakeStore(due);
    let started = 0;
    const sender: AttemptSender = {
      send: () => {
        const n = (started += 1);
        // Two at a time: the 410 ends first, the success beside it after; the other two were queued.
        return new Promise((resolve) => setTimeout(() => resolve(n === 1 ? { outcome: 'http_status', statusCode: 410, latencyMs: 1, retryAfterMs: null, response: '', error: 'HTTP 410' } : delivered), n === 1 ? 5 : 10));
      },
    };
    const sending = dispatcher(store, sender, 2);
    sending.start();
    await new Promise((resolve) => setTimeout(resolve, 100));
    await sending.stop(1_000);
    expect(started).toBe(2);
    expect(completed.map((c) => c.result.statusCode)).toEqual([410, 204]);
    expect(closings).toEqual([{ endpointId: 'ep-1', pauseUntil: null, gone: expect.stringMatching(/^answered 410 Gone/) }]);
    expect(givenBack.map((h) => h.delivery.id)).toEqual(['3', '4']);
  });
});

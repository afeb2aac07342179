import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { ClaimedDelivery, Completion, DeliveryStore, HeldBack } from './delivery-store.js';
import type { Closing } from './endpoint-gate.js';
import { Dispatcher, type AttemptSender } from './dispatcher.js';
import { EndpointShares } from './endpoint-shares.js';
import type { AttemptResult } from './http-sender.js';
import { createWebhookMetrics } from './metrics.js';

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

/** The store's port, in memory: hands out `due` once each, records completions, deliveries given back and endpoints' closings. */
function fakeStore(due: ClaimedDelivery[]) {
  const completed: Completion[] = [];
  const givenBack: HeldBack[] = [];
  const closings: Closing[] = [];
  const store = {
    claim: async (_owner: string, _now: Date, limit: number) => due.splice(0, limit),
    complete: async (_owner: string, _now: Date, completions: readonly Completion[]) => {
      completed.push(...completions);
      return [];
    },
    giveBack: async (_owner: string, heldBack: readonly HeldBack[]) => {
      givenBack.push(...heldBack);
    },
    closeEndpoint: async (closing: Closing) => {
      closings.push(closing);
      return null;
    },
  };
  return { store: store as unknown as DeliveryStore, completed, givenBack, closings };
}

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
    const { store, completed } = fakeStore(ids.map((id) => ({ ...delivery, id, eventId: `evt-${id}` })));
    const { sender, most } = countingSender(20);
    const sending = dispatcher(store, sender, 3);
    // Four times the concurrency: deliveries being recorded or written take no request slot.
    const held = sending.reserve(100);
    expect(held.slots).toBe(12);
    sending.start();
    await new Promise((resolve) => setTimeout(resolve, 30));
    // Every slot is held: nothing was claimed.
    expect(completed).toHaveLength(0);
    // One first attempt sent in the slots (the intake took its endpoint's), the rest given back.
    const first = sending.sendFirst([{ ...delivery, id: '', eventId: 'evt-first' }], { maxMs: 1_000, stragglerMs: 50 });
    sending.release(11);
    // Its result is its recording's to write, not the completions'.
    expect((await first).ended.map((c) => c.delivery.eventId)).toEqual(['evt-first']);
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
    void stuck.sendFirst(['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].map((id) => ({ ...delivery, id: '', eventId: `evt-${id}` })), { maxMs: 60_000, stragglerMs: 50 });
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

  it('a reservation keeps waiting while attempts keep ending, though their slots stay held until their recording', async () => {
    const { store } = fakeStore([]);
    // Two requests at a time, each answered in 30 ms: more often than the 50 ms stall.
    const sending = dispatcher(store, countingSender(30).sender, 2);
    const held = sending.reserve(100);
    expect(held.slots).toBe(8);
    const first = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].map((id) => ({ ...delivery, id: '', eventId: `evt-${id}` }));
    // The intake's recording of them returns their slots well after the stall (as at start-up, or with Postgres busy).
    void sending.sendFirst(first, { maxMs: 1_000, stragglerMs: 50 }).then(() => setTimeout(() => sending.release(held.slots), 100));
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
    const capped = { claim: async () => due.splice(0, 2), complete: store.complete.bind(store), giveBack: store.giveBack.bind(store) } as unknown as DeliveryStore;
    const sending = dispatcher(capped, countingSender(5).sender, 10);
    sending.start();
    // The poll is a minute: only completions can bring the next claims in time.
    for (let i = 0; i < 100 && completed.length < 12; i += 1) await new Promise((resolve) => setTimeout(resolve, 10));
    await sending.stop(1_000);
    expect(completed).toHaveLength(12);
  });

  it('first attempts sent before recording: their results go to the intake, not to the store, and the slots come back only when it says', async () => {
    const { store, completed } = fakeStore([]);
    const { sender } = countingSender(5);
    const sending = dispatcher(store, sender, 4);
    const held = sending.reserve(2);
    const first = [0, 1].map((i) => ({ ...delivery, id: '', eventId: `evt-first-${i}` }));
    const { ended, inFlight } = await sending.sendFirst(first, { maxMs: 1_000, stragglerMs: 50 });
    expect(inFlight).toEqual([]);
    expect(ended.map((c) => [c.delivery.eventId, c.verdict.delivery.status])).toEqual([
      ['evt-first-0', 'delivered'],
      ['evt-first-1', 'delivered'],
    ]);
    // The intake writes them (once, with their results): the dispatcher wrote nothing.
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(completed).toEqual([]);
    // Still held until the intake's recording returns them.
    expect(sending.reserve(100).slots).toBe(16 - held.slots);
    await sending.stop(1_000);
  });

  it('a first attempt still in flight when the intake stops waiting is written under the id its recording gave it, or not at all', async () => {
    const { store, completed } = fakeStore([]);
    const { sender } = countingSender(60);
    const sending = dispatcher(store, sender, 4);
    sending.reserve(2);
    const [adopted, abandoned] = [0, 1].map((i) => ({ ...delivery, id: '', eventId: `evt-slow-${i}` }));
    const { ended, inFlight } = await sending.sendFirst([adopted!, abandoned!], { maxMs: 10, stragglerMs: 10 });
    expect(ended).toEqual([]);
    expect(inFlight.map((d) => d.eventId)).toEqual(['evt-slow-0', 'evt-slow-1']);
    // Recorded leased as 42 while its request runs; the other's recording failed.
    sending.adopt(adopted!, '42');
    sending.abandon(abandoned!);
    await new Promise((resolve) => setTimeout(resolve, 120));
    expect(completed.map((c) => [c.delivery.id, c.delivery.eventId, c.verdict.delivery.status])).toEqual([['42', 'evt-slow-0', 'delivered']]);
    // Both slots came back: the adopted one's with its write, the abandoned one's when its attempt ended.
    expect(sending.reserve(100).slots).toBe(16);
    await sending.stop(1_000);
  });

  it('a first attempt that ends after being handed over, before its recording is known, is written once the id comes', async () => {
    const { store, completed } = fakeStore([]);
    const { sender } = countingSender(20);
    const sending = dispatcher(store, sender, 4);
    sending.reserve(1);
    const slow = { ...delivery, id: '', eventId: 'evt-late' };
    const { inFlight } = await sending.sendFirst([slow], { maxMs: 5, stragglerMs: 5 });
    expect(inFlight).toHaveLength(1);
    // The attempt ends while the intake's transaction runs.
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(completed).toEqual([]);
    sending.adopt(slow, '7');
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(completed.map((c) => c.delivery.id)).toEqual(['7']);
    await sending.stop(1_000);
  });

  it('hands over a straggler once its chunk-mates ended, not after the whole wait', async () => {
    const { store } = fakeStore([]);
    // The first delivery hangs for a second; the other three answer in 5 ms.
    const sender: AttemptSender = { send: (request) => new Promise((resolve) => setTimeout(() => resolve(delivered), request.body === 'hang' ? 1_000 : 5)) };
    const sending = dispatcher(store, sender, 4);
    sending.reserve(4);
    const chunk = [0, 1, 2, 3].map((i) => ({ ...delivery, id: '', eventId: `evt-chunk-${i}`, body: i === 0 ? 'hang' : '{}' }));
    const started = Date.now();
    const { ended, inFlight } = await sending.sendFirst(chunk, { maxMs: 5_000, stragglerMs: 50 });
    expect(Date.now() - started).toBeLessThan(500);
    expect(ended).toHaveLength(3);
    expect(inFlight.map((d) => d.eventId)).toEqual(['evt-chunk-0']);
    sending.abandon(inFlight[0]!);
    await sending.stop(2_000);
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

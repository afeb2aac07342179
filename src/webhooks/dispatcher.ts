import type { Logger } from 'pino';
import { errorMessage } from '../errors.js';
import { sleep } from '../time.js';
import type { DeliveryStore } from './delivery-store.js';
import { EndpointGate, type Closed, type Closing } from './endpoint-gate.js';
import type { EndpointChange, EndpointRules } from './endpoint-health-store.js';
import type { EndpointSlots } from './endpoint-shares.js';
import { signingSecrets } from './endpoint-store.js';
import { FIRST_ATTEMPT_WAIT, leaseFirstAttempts, type FirstAttemptWait } from './first-attempts.js';
import type { AttemptResult, WebhookRequest } from './http-sender.js';
import type { WebhookMetrics } from './metrics.js';
import { ResultWriter, type ClaimedDelivery, type Completion, type Ended, type EventToDeliver, type HeldBack, type Owed, type OwedChunk, type OwedDeliveries, type Reservation, type ResultRoute, type TakenChunk } from './lifecycle.js';
import { owedKey, type OwedRow } from './owed-store.js';
import { firstAttemptAt, judgeAttempt, type RetryPolicy } from './retry-policy.js';
import { webhookHeaders } from './signature.js';

/** The HTTP port: the real one is WebhookSender (undici), or ThreadedSender (WebhookSenders on threads of their own). */
export interface AttemptSender {
  /**
   * One attempt to `endpointId`; or not sent, when the sender's own view of the endpoint's gate
   * is closed (a sender thread reads the answers first, and asks an EndpointGate of its own
   * before it starts each request: what the main thread handed it before it heard the answer).
   */
  send(request: WebhookRequest, endpointId: string): Promise<AttemptResult | NotSent>;
  /** The endpoint's gate opened again (enabled after a 410): a sender with a gate of its own opens it too. */
  reopened?(endpointId: string): void;
}

/** An attempt the sender did not start: its endpoint's gate was closed. */
export interface NotSent {
  readonly notSent: Closed;
}

export interface DispatcherOptions {
  readonly store: DeliveryStore;
  readonly sender: AttemptSender;
  readonly policy: RetryPolicy;
  readonly rules: EndpointRules;
  /** Requests in flight from this process, over every endpoint (it holds HOLD_FACTOR times as many deliveries). */
  readonly concurrency: number;
  /** A delivery claimed and not completed within this is handed out again (the process died or hangs). */
  readonly leaseMs: number;
  /** How often to look for due deliveries when nothing woke the dispatcher. */
  readonly pollMs: number;
  /** This process, in leases and in each attempt's record. */
  readonly owner: string;
  /** This process's share of each endpoint's limit of deliveries in flight (endpoint-shares.ts). */
  readonly slots: EndpointSlots;
  readonly clock: () => Date;
  readonly random?: () => number;
  readonly logger: Logger;
  readonly metrics: WebhookMetrics;
}

/** First attempts sent before their deliveries are recorded (Dispatcher.sendFirst), as they stood when their chunk's write stopped waiting. */
export interface FirstAttempts {
  /** Ended, with their verdicts: each written once, with its attempt. */
  readonly ended: readonly Completion[];
  /** Not sent: the endpoint gate held them back; written due at its reopening. */
  readonly heldBack: readonly HeldBack[];
  /** Still in flight: written leased, their results written when they come, under the ids their write gave them. */
  readonly inFlight: readonly ClaimedDelivery[];
}

/** A chunk taken (Dispatcher.take) whose first attempts were sent, queued for the write. */
interface ChunkToWrite {
  readonly events: readonly Omit<EventToDeliver, 'endpointIds'>[];
  readonly sent: FirstAttempts;
  /** The chunk's deliveries that got no slot: due at `dueAt`. */
  readonly due: readonly Owed[];
  readonly dueAt: Date;
  readonly written: () => void;
  readonly failed: (error: unknown) => void;
}

/** The longest a reservation waits for enough free slots (the consumer's session stays alive meanwhile). */
const MAX_RESERVE_WAIT_MS = 5_000;

/**
 * Deliveries a process holds (leased to it, their results not yet written) per request it may have in
 * flight: while `concurrency` requests are out, the rest are being recorded, queued for a
 * request, or waiting for their results' write, so that those steps (each a Postgres
 * transaction, tens of milliseconds on a busy machine) do not leave request slots empty.
 */
const HOLD_FACTOR = 4;

/**
 * How long a delivery is leased to the process that records or claims it: a queued one waits
 * for at most HOLD_FACTOR - 1 rounds of requests (every request slot hanging to the timeout),
 * then its own attempt, and a margin to write its result. Past it another process may send it.
 */
export function leaseFor(timeoutMs: number): number {
  return HOLD_FACTOR * timeoutMs + LEASE_MARGIN_MS;
}

/** Beyond the attempts' timeouts: time to write the result (a batch waiting for the previous one's transaction). */
const LEASE_MARGIN_MS = 5_000;

/** A failing store (Postgres restarting) is retried this often, never faster. */
const STORE_RETRY_MS = 1_000;

/**
 * Every lease, request and result write of a process (lifecycle.ts): claims as many due
 * deliveries as it has room for (the store decides which, per endpoint limits), takes the
 * intake's chunks of new deliveries (their first attempts sent before their rows are written),
 * sends each (at most `concurrency` requests at once, the rest queued), and writes results in
 * batches: one transaction for everything that ended while the previous one was being written.
 */
export class Dispatcher implements OwedDeliveries {
  /** Leased to this process, their results not yet written: at most HOLD_FACTOR × concurrency. */
  private held = 0;
  /** Of those, the ones whose request has started and not ended: at most concurrency. */
  private sending = 0;
  /** Held, waiting for a request slot (and for startReady, which asks the gate of each). */
  private queue: ClaimedDelivery[] = [];
  /** startReady is due (setImmediate): requests start there, in one turn, after the answers that came meanwhile were judged. */
  private startScheduled = false;
  /** Whether each endpoint may get a request now: asked before every request, fed by every verdict. */
  readonly gate: EndpointGate;
  /** Held back by the gate, leased in the store: given back with the next write of results. */
  private givenBack: HeldBack[] = [];
  private stopped = false;
  private wakeUp: (() => void) | null = null;
  private woken = false;
  /**
   * The last claim found due deliveries, or deliveries were recorded since: freed slots are
   * worth a claim. Otherwise a claim would find nothing (new deliveries are taken at once, and
   * retries wait for the poll), and one after each completion is a wasted query.
   */
  private moreDue = true;
  /** Reservations waiting for free slots (reserveWhenFree). */
  private roomWaiters: (() => void)[] = [];
  /** Bumped whenever slots free or an endpoint answers: what a reservation waiting for slots calls progress. */
  private progress = 0;
  private completions: Completion[] = [];
  /** Chunks taken whose first attempts were sent, in consumption order: written with the next write of results. */
  private chunks: ChunkToWrite[] = [];
  /** Who writes each held delivery's result (see lifecycle.ts). */
  private readonly results = new ResultWriter();
  private flushing: Promise<void> | null = null;
  private writingChunks: Promise<void> | null = null;
  private loop: Promise<void> | null = null;
  /** When the loop last went round: /healthz fails when it stops turning. */
  lastTurn = Date.now();

  constructor(private readonly options: DispatcherOptions) {
    this.gate = new EndpointGate(() => options.clock().getTime());
  }

  start(): void {
    this.loop = this.run();
  }

  /** New deliveries were recorded: look now rather than at the next poll. */
  wake(): void {
    this.moreDue = true;
    this.woken = true;
    this.wakeUp?.();
  }

  private slotsFreed(): void {
    this.wakeReservations();
    if (this.moreDue) this.wake();
  }

  /** Reservations waiting (reserveWhenFree) look at the room again. */
  private wakeReservations(): void {
    this.progress += 1;
    for (const waiter of this.roomWaiters.splice(0)) waiter();
  }

  /** Stops claiming; waits up to `timeoutMs` for the attempts in flight and records them. */
  async stop(timeoutMs: number): Promise<{ readonly unfinished: number }> {
    this.stopped = true;
    this.wake();
    await this.loop;
    const deadline = Date.now() + timeoutMs;
    while (this.sending > 0 && Date.now() < deadline) await sleep(20);
    await Promise.all([this.flush(), this.writeChunks()]);
    // Unfinished attempts, and queued ones not started, keep their lease: another process sends
    // them once it runs out.
    return { unfinished: this.sending + this.queue.length };
  }

  /** Deliveries this process could take on now. */
  private get room(): number {
    return this.options.concurrency * HOLD_FACTOR - this.held;
  }

  /**
   * Up to `wanted` of the free slots, held for a chunk of the intake's owed deliveries (take):
   * the loop claims none of them meanwhile.
   */
  reserve(wanted: number): Reservation {
    const slots = this.stopped ? 0 : Math.max(0, Math.min(wanted, this.room));
    this.held += slots;
    return { slots };
  }

  /**
   * reserve(), once `atLeast` slots are free (at least a quarter of the concurrency, so that
   * chunks are not a few deliveries each; at most the concurrency), then with what is free, up
   * to `wanted` and one round of requests (or `atLeast`, if more). The consumer records about as
   * many deliveries as this process can send at once, every one leased, rather than a backlog
   * that the loop would claim later (writing each row a second time). It waits while slots keep
   * freeing or endpoints keep answering; after `stallMs` without either while every request slot
   * is taken (slow endpoints hold them), or MAX_RESERVE_WAIT_MS in all, it gets what is free,
   * perhaps nothing. (Slots held by deliveries being recorded or written free soon, however long
   * Postgres takes: no reason to record a chunk due, which would keep its endpoints' next
   * deliveries due behind it too.)
   */
  async reserveWhenFree(atLeast: number, wanted: number, stallMs: number): Promise<Reservation> {
    const { concurrency } = this.options;
    // Never more than a round of requests: waiting for the whole hold to free (an event fanned
    // out to thousands) would hold up the consumer for as long as claims keep the process busy.
    const enough = Math.min(Math.max(atLeast, Math.ceil(concurrency / 4)), concurrency);
    const deadline = Date.now() + MAX_RESERVE_WAIT_MS;
    let stalled = false;
    while (!this.stopped && !stalled && this.room < enough && Date.now() < deadline) {
      const before = this.progress;
      const woken = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), Math.min(stallMs, deadline - Date.now()));
        this.roomWaiters.push(() => {
          clearTimeout(timer);
          resolve(true);
        });
      });
      // Answers that came while the event loop was held up (a long garbage collection, a big
      // batch decoded) are handled after the timers that were due meanwhile: seen before judging.
      if (!woken) await new Promise((resolve) => setImmediate(resolve));
      stalled = this.progress === before && this.sending >= concurrency;
    }
    // No more than a round of requests (or the fan-out, a chunk's least): the other partitions'
    // chunks get slots too, and join the same consumer transaction.
    return this.reserve(Math.min(wanted, Math.max(atLeast, concurrency)));
  }

  /** A delivery claimed: sent, its result written by the completions' batch. */
  private leased(delivery: ClaimedDelivery): void {
    this.results.lease(delivery, { kind: 'recorded', id: delivery.id });
    this.send(delivery);
  }

  /**
   * A chunk of the intake's owed deliveries of events nobody recorded before, in `reserved`'s
   * process slots: the fast path's lease (leaseFirstAttempts: the slots of the chunk's healthy
   * endpoints, LeaseStore.takeSlots), their first attempts sent at once, and the chunk queued
   * for the write of results (after `after`, the chunk of the same partition before it: ids in
   * consumption order), which writes each delivery once: with its first attempt's result, or
   * leased if still in flight after FIRST_ATTEMPT_WAIT, or due (no slot, or held back by the gate).
   */
  take(chunk: OwedChunk, reserved: Reservation, after: TakenChunk | null): TakenChunk {
    const { options } = this;
    const sending = (async () => {
      const now = options.clock();
      const readAt = performance.now();
      let leases: Awaited<ReturnType<typeof leaseFirstAttempts>>;
      try {
        leases = await leaseFirstAttempts(chunk, reserved.slots, options.slots, async (wanted) => {
          const granted = await options.store.takeSlots(wanted, now, options.slots, chunk.endpoints);
          for (const endpointId of granted.keys()) this.leasedFrom(endpointId, readAt);
          return granted;
        });
      } catch (error) {
        this.release(reserved.slots);
        throw error;
      }
      this.release(reserved.slots - leases.first.length);
      return { due: leases.due, attempts: this.sendFirst(leases.first, FIRST_ATTEMPT_WAIT) };
    })();
    const queued = sending.then(async ({ due, attempts }) => {
      const sent = await attempts;
      await after?.queued.catch(() => undefined);
      const events = [...new Set(chunk.owed.map((owed) => owed.event))];
      // In an object: the write's promise, not awaited here (queued resolves once it is in line).
      return {
        write: new Promise<void>((written, failed) => {
          if (events.length === 0) return written();
          this.chunks.push({ events, sent, due, dueAt: firstAttemptAt(options.policy, options.clock(), options.random), written, failed });
          void this.writeChunks();
        }),
      };
    });
    const taken = { sent: sending.then(() => undefined), queued: queued.then(() => undefined), written: queued.then(({ write }) => write) };
    // Each is awaited by the intake, or by the next chunk: never left unhandled meanwhile.
    for (const promise of Object.values(taken)) promise.catch(() => undefined);
    return taken;
  }

  /**
   * Sends first attempts of deliveries not recorded yet (their leases taken by take); resolves
   * once every one ended, or earlier with those still in flight handed over: written leased by
   * their chunk's write, their results written when they come. Hands over after `wait.maxMs`,
   * or, once half of them ended, after as long again as that took (at least
   * `wait.stragglerMs`): one endpoint that hangs does not hold up the writing of the others'
   * deliveries, nor the partition's next events, for the whole wait.
   */
  private sendFirst(deliveries: readonly ClaimedDelivery[], wait: FirstAttemptWait): Promise<FirstAttempts> {
    const ended: Completion[] = [];
    const heldBack: HeldBack[] = [];
    if (deliveries.length === 0) return Promise.resolve({ ended, heldBack, inFlight: [] });
    const started = Date.now();
    return new Promise((resolve) => {
      let running = deliveries.length;
      let stragglers: NodeJS.Timeout | null = null;
      const handOver = () => {
        clearTimeout(timer);
        if (stragglers) clearTimeout(stragglers);
        resolve({ ended, heldBack, inFlight: deliveries.filter((delivery) => this.results.handOver(delivery)) });
      };
      const timer = setTimeout(handOver, wait.maxMs);
      const settle = (outcome: Ended) => {
        if ('completion' in outcome) ended.push(outcome.completion);
        else heldBack.push(outcome.heldBack);
        running -= 1;
        if (running === 0) handOver();
        else if (!stragglers && (ended.length + heldBack.length) * 2 >= deliveries.length) stragglers = setTimeout(handOver, Math.max(wait.stragglerMs, Date.now() - started));
      };
      for (const delivery of deliveries) {
        this.results.lease(delivery, { kind: 'awaited', settle });
        this.send(delivery);
      }
    });
  }

  /** An ended attempt's result, where ResultWriter sent it. */
  private route(route: ResultRoute | null): void {
    if (route?.to === 'completions') {
      this.completions.push(route.completion);
      void this.flush();
    } else if (route?.to === 'given-back') {
      this.givenBack.push(route.heldBack);
      void this.flush();
    } else if (route?.to === 'released') this.release(1);
  }

  release(slots: number): void {
    this.held -= slots;
    if (slots > 0) this.slotsFreed();
  }

  private async run(): Promise<void> {
    const { options } = this;
    const { store } = options;
    while (!this.stopped) {
      this.lastTurn = Date.now();
      const free = this.room;
      if (free > 0) {
        let claimed: ClaimedDelivery[];
        const readAt = performance.now();
        try {
          claimed = await store.claim(options.owner, options.clock(), free, options.leaseMs, options.rules, options.slots);
        } catch (error) {
          options.logger.error({ err: errorMessage(error) }, 'webhooks: claiming due deliveries failed; trying again');
          await sleep(STORE_RETRY_MS);
          continue;
        }
        this.held += claimed.length;
        for (const delivery of claimed) this.leasedFrom(delivery.endpointId, readAt);
        for (const delivery of claimed) this.leased(delivery);
        // Something was due: more may be (endpoints' limits cap a claim), so freed slots are worth
        // the next one; nothing was: only a recording or the poll brings more. (A wake-up during
        // the claim was for deliveries it may not have seen.)
        this.moreDue = claimed.length > 0 || this.woken;
        // Every free slot filled: the next turn waits for a slot to free.
        if (claimed.length === free) continue;
      }
      await this.idle(options.pollMs);
    }
  }

  /**
   * Until wake() or `ms`. A wake-up that came while this process had no free slot is not kept:
   * only a completion can make room then, and it wakes the loop itself. (A kept one would turn
   * the loop without waiting, on resolved promises only, and starve the very I/O that frees a slot.)
   */
  private idle(ms: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    const woken = this.woken && this.room > 0;
    this.woken = false;
    if (woken) return new Promise((resolve) => setImmediate(resolve));
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      this.wakeUp = done;
      function done() {
        clearTimeout(timer);
        resolve();
      }
    }).then(() => {
      this.wakeUp = null;
    });
  }

  /**
   * Queues a held delivery for a request: every request of this process, claimed or sent first,
   * starts in startReady, which runs once the answers that came meanwhile were judged (an
   * answer that closes a gate is read before any request queued beside it starts).
   */
  private send(delivery: ClaimedDelivery): void {
    this.queue.push(delivery);
    this.scheduleStart();
  }

  private scheduleStart(): void {
    if (this.startScheduled) return;
    this.startScheduled = true;
    setImmediate(() => this.startReady());
  }

  /**
   * Starts queued requests while request slots are free, each once its endpoint's gate lets it
   * go, asked in the same turn as the request is handed to the sender; one the gate does not
   * let go is held back. (setImmediate: after the I/O of this turn of the event loop, so the
   * answers read in it, and their verdicts, come first.)
   */
  private startReady(): void {
    this.startScheduled = false;
    while (this.sending < this.options.concurrency && !this.stopped) {
      const delivery = this.queue.shift();
      if (!delivery) break;
      const admission = this.gate.admit(delivery.endpointId);
      if (!admission.open) {
        this.holdBack(delivery, admission.closed);
        continue;
      }
      this.sending += 1;
      void this.attempt(delivery);
    }
  }

  /**
   * A delivery whose endpoint's gate is closed is not sent: due again when the gate reopens (a
   * disabled endpoint's, at once: leases pass it over until it is enabled), its lease given
   * back, no attempt counted. Its endpoint's slot frees now.
   */
  private holdBack(delivery: ClaimedDelivery, closed: Closed): void {
    const { options } = this;
    const dueAt = closed.kind === 'paused' ? new Date(closed.until) : options.clock();
    options.slots.release(delivery.endpointId, 1);
    options.metrics.heldBack.inc({ reason: closed.kind });
    this.wakeReservations();
    this.route(this.results.end(delivery, { heldBack: { delivery, dueAt } }));
  }

  /** A lease of `endpointId` read from the store at `readAt`: the gate, and a sender's own, open if it says the endpoint was enabled again. */
  private leasedFrom(endpointId: string, readAt: number): void {
    if (this.gate.leased(endpointId, readAt)) this.options.sender.reopened?.(endpointId);
  }

  /** A verdict closed an endpoint's gate: written to the store at once, on its own, for the other processes' next leases. */
  private async closeInStore(closing: Closing): Promise<void> {
    const { options } = this;
    for (;;) {
      try {
        const change = await options.store.closeEndpoint(closing, options.clock());
        this.gate.recorded(closing.endpointId, performance.now());
        if (change) this.reportEndpointChanges([change]);
        return;
      } catch (error) {
        options.logger.error({ endpoint: closing.endpointId, err: errorMessage(error) }, "webhooks: recording an endpoint's pause or disabling failed; trying again (this process holds it meanwhile)");
        if (this.stopped) return;
        await sleep(STORE_RETRY_MS);
      }
    }
  }

  private async attempt(delivery: ClaimedDelivery): Promise<void> {
    const { options } = this;
    let startedAt = options.clock();
    if (delivery.attempt === 1) options.metrics.firstAttemptDelay.observe(Math.max(0, startedAt.getTime() - delivery.producedAt.getTime()) / 1000);
    const headers = {
      ...delivery.headers,
      ...webhookHeaders({ secrets: signingSecrets(delivery.secrets, startedAt), webhookId: delivery.eventId, timestampSeconds: Math.floor(startedAt.getTime() / 1000), body: delivery.body }),
    };
    const sent = await options.sender.send({ url: delivery.url, headers, body: delivery.body }, delivery.endpointId).catch(
      (error: unknown): AttemptResult => ({ outcome: 'network', statusCode: null, latencyMs: 0, retryAfterMs: null, response: null, error: `the sender failed: ${errorMessage(error)}` }),
    );
    if ('notSent' in sent) {
      this.sending -= 1;
      if (this.queue.length > 0) this.scheduleStart();
      this.holdBack(delivery, sent.notSent);
      return;
    }
    const result = sent;
    // The request's own start, when the sender started it later than it was handed over (a sender thread).
    if (result.startedAtMs !== undefined) startedAt = new Date(result.startedAtMs);
    const verdict = judgeAttempt(options.policy, delivery.failures, result, options.clock(), options.random);
    // The gate first, before anything else can run: no request to the endpoint starts after this.
    const closing = this.gate.heard(delivery.endpointId, verdict.endpoint, delivery.url);
    if (closing) void this.closeInStore(closing);
    options.metrics.attempts.inc({ outcome: result.outcome });
    options.metrics.attemptSeconds.observe({ outcome: result.outcome }, result.latencyMs / 1000);
    // A first attempt sent before its delivery was recorded has no id yet: the event and endpoint name it.
    const where = { ...(delivery.id !== '' && { delivery: delivery.id }), endpoint: delivery.endpointId, eventId: delivery.eventId, attempt: delivery.attempt };
    if (verdict.delivery.status === 'failed') {
      options.metrics.deliveries.inc({ outcome: 'failed' });
      options.logger.error({ ...where, outcome: result.outcome, status: result.statusCode, err: result.error }, 'webhooks: delivery failed, every attempt of the schedule used; `webhooks replay --delivery` sends it again');
    } else if (verdict.delivery.status === 'delivered') {
      options.metrics.deliveries.inc({ outcome: 'delivered' });
      options.logger.debug({ ...where, status: result.statusCode, latencyMs: result.latencyMs }, 'webhooks: delivered');
    } else {
      options.logger.debug({ ...where, outcome: result.outcome, status: result.statusCode, err: result.error, next: verdict.delivery.nextAttemptAt }, 'webhooks: attempt failed; retrying');
    }
    this.sending -= 1;
    // Its endpoint's slot frees with the answer; the process's own (held) once the result is written.
    options.slots.release(delivery.endpointId, 1);
    // Stopping: the queued are left to their leases (see stop()).
    if (this.queue.length > 0) this.scheduleStart();
    // An endpoint answered: its slot frees once its result is written or recorded, so a
    // reservation waiting for slots is not stalled (only endpoints that do not answer stall it).
    this.wakeReservations();
    this.route(this.results.end(delivery, { completion: { delivery, startedAt, result, verdict } }));
  }

  /**
   * The write transition of recorded deliveries: every completion and lease given back queued,
   * in one transaction (ResultStore.write); one write at a time, the next takes what queued
   * meanwhile. Kept, and written again, when a write fails.
   */
  private flush(): Promise<void> {
    this.flushing ??= (async () => {
      const { options } = this;
      try {
        while (this.completions.length > 0 || this.givenBack.length > 0) {
          const batch = this.completions;
          const given = this.givenBack;
          this.completions = [];
          this.givenBack = [];
          try {
            const written = await options.store.write({ owner: options.owner, now: options.clock(), events: [], owed: [], completions: batch, givenBack: given }, options.rules);
            this.reportEndpointChanges(written.changes);
            this.held -= batch.length + given.length;
            this.slotsFreed();
          } catch (error) {
            // Kept, and written again: until then their leases stand, and nothing is sent twice
            // unless the outage outlasts them.
            this.completions = [...batch, ...this.completions];
            this.givenBack = [...given, ...this.givenBack];
            options.logger.error({ err: errorMessage(error), completions: batch.length }, 'webhooks: recording attempts failed; trying again');
            // Stopping: not written; their leases run out and another process sends them again.
            if (this.stopped) break;
            await sleep(STORE_RETRY_MS);
          }
        }
      } finally {
        this.flushing = null;
      }
    })();
    return this.flushing;
  }

  /**
   * The write transition of the chunks taken (their first attempts sent before their rows are
   * written): every chunk queued, in consumption order, in one transaction (ResultStore.write,
   * the same writer as the completions', beside them: a chunk's write, which its partition's
   * next events wait for, never queues behind a batch of claimed deliveries' results).
   */
  private writeChunks(): Promise<void> {
    this.writingChunks ??= (async () => {
      const { options } = this;
      try {
        while (this.chunks.length > 0) {
          const chunks = this.chunks;
          this.chunks = [];
          const now = options.clock();
          const sentResults = chunks.reduce((sum, chunk) => sum + chunk.sent.ended.length + chunk.sent.heldBack.length, 0);
          try {
            const written = await options.store.write(
              { owner: options.owner, now, events: chunks.flatMap((chunk) => chunk.events), owed: chunks.flatMap((chunk) => owedRows(chunk, new Date(now.getTime() + options.leaseMs))), completions: [], givenBack: [] },
              options.rules,
            );
            this.reportEndpointChanges(written.changes);
            options.metrics.deliveriesRecorded.inc(written.owed.added);
            for (const chunk of chunks) {
              // Written leased: their results are the completions' to write, under these ids.
              for (const delivery of chunk.sent.inFlight) this.route(this.results.recorded(delivery, written.owed.leased.get(owedKey(delivery.eventId, delivery.endpointId)) ?? null));
              chunk.written();
            }
            // Due now or at a gate's reopening: for the claims.
            if (chunks.some((chunk) => chunk.due.length > 0 || chunk.sent.heldBack.length > 0)) this.wake();
          } catch (error) {
            // Not written: their events are read again (their offsets are not committed), and
            // sent again; what is still in flight of them is written by nobody.
            for (const chunk of chunks) {
              for (const delivery of chunk.sent.inFlight) this.route(this.results.recorded(delivery, null));
              chunk.failed(error);
            }
            options.logger.error({ err: errorMessage(error), chunks: chunks.length }, 'webhooks: writing first attempts failed; their events are read again');
          }
          this.held -= sentResults;
          this.slotsFreed();
        }
      } finally {
        this.writingChunks = null;
      }
    })();
    return this.writingChunks;
  }

  /** Endpoints that completions disabled or whose circuit they opened: counted and logged. */
  private reportEndpointChanges(changes: readonly EndpointChange[]): void {
    const { logger, metrics } = this.options;
    for (const change of changes) {
      if (change.disabledReason !== null) {
        this.gate.disabled(change.endpointId, performance.now());
        const reason = change.disabledReason.startsWith('answered 410') ? 'gone' : 'failing';
        metrics.endpointsDisabled.inc({ reason });
        logger.error({ endpoint: change.endpointId, reason: change.disabledReason }, 'webhooks: endpoint disabled; its deliveries are held until `webhooks endpoint enable`');
      }
      if (change.circuitOpened) {
        this.gate.pause(change.endpointId, new Date(this.options.clock().getTime() + this.options.rules.circuitCooldownMs));
        metrics.circuitsOpened.inc();
        logger.warn({ endpoint: change.endpointId, failures: this.options.rules.circuitFailures, cooldownMs: this.options.rules.circuitCooldownMs }, 'webhooks: circuit opened: nothing is sent to this endpoint until a probe succeeds');
      }
    }
  }
}

/** A chunk's rows, each in the state it reached: its first attempts ended (with their results) or in flight (leased until `leasedUntil`), the rest due. */
function owedRows(chunk: ChunkToWrite, leasedUntil: Date): OwedRow[] {
  const { sent } = chunk;
  return [
    ...sent.ended.map((completion): OwedRow => ({ state: 'ended', completion })),
    ...sent.inFlight.map((delivery): OwedRow => ({ state: 'leased', delivery, until: leasedUntil })),
    ...chunk.due.map(({ event, endpointId }): OwedRow => ({ state: 'due', event, endpointId, dueAt: chunk.dueAt })),
    // Held back by the gate: due at its reopening, never attempted.
    ...sent.heldBack.map(({ delivery, dueAt }): OwedRow => ({ state: 'due', event: { eventId: delivery.eventId, aggregateId: null }, endpointId: delivery.endpointId, dueAt })),
  ];
}

import type { LoadedEndpoints, SigningSecret } from './endpoint-store.js';
import type { AttemptResult } from './http-sender.js';
import type { Verdict } from './retry-policy.js';

/*
 * One delivery's way through a webhooks process, whichever way it came in, as types (below)
 * and one function per transition:
 *
 *   owed ──lease──▶ leased ──start──▶ sending ──end──▶ ended ──write──▶ written
 *                                        │                              (delivered, due again, or failed)
 *                                        └─ held back (the endpoint gate) ──write──▶ due again
 *
 * owed     Owed: its event read and its endpoint known (the intake, intake.ts: its customer's and
 *          the platform-wide endpoints subscribed to its type). The intake does nothing else with
 *          it: it records it due (OwedStore.record) when its event may have been recorded before,
 *          or hands its chunk to the dispatcher (OwedDeliveries.take), then commits the offset.
 * lease    ClaimedDelivery: one of the process's slots and one of the endpoint's held for it,
 *          until its result is written or its lease ends. The dispatcher takes every lease, two
 *          ways, each one statement of LeaseStore that reads the endpoint's state in the store:
 *          Dispatcher.run's claim of due deliveries (LeaseStore.claim), and Dispatcher.take's
 *          slots for a new delivery's first attempt, sent before its row is written (the fast
 *          path, first-attempts.ts leaseFirstAttempts over LeaseStore.takeSlots).
 * start    Dispatcher.startReady: its request handed to the sender once the endpoint gate
 *          (endpoint-gate.ts) lets it go, asked in the same turn; else it is held back (Ended).
 * end      Dispatcher.attempt: its answer judged once (retry-policy.ts judgeAttempt), the gate fed
 *          the verdict at once, and the result routed by ResultWriter.end (below).
 * write    one writer, ResultStore.write (one transaction for all that ended meanwhile), in two
 *          lanes of the dispatcher: Dispatcher.writeChunks, the chunks taken (a first attempt's
 *          delivery written once with its result in its row, or leased if still in flight, the
 *          rest of its chunk due), and Dispatcher.flush, recorded deliveries' verdicts and attempts
 *          and leases the gate held back given back. Two lanes, so that a chunk's write, which
 *          its partition's next events wait for, never queues behind a batch of claimed results.
 */

/** One consumed event and the endpoints it is owed to. */
export interface EventToDeliver {
  readonly eventId: string;
  readonly eventType: string;
  readonly aggregateId: string | null;
  readonly body: string;
  readonly producedAt: Date;
  readonly endpointIds: readonly string[];
}

/** owed: an event, and one endpoint it is owed to. */
export interface Owed {
  readonly event: Omit<EventToDeliver, 'endpointIds'>;
  readonly endpointId: string;
}

/** A chunk of owed deliveries of events nobody recorded before, and the endpoints as loaded with the subscriptions that found them. */
export interface OwedChunk {
  readonly owed: readonly Owed[];
  readonly endpoints: LoadedEndpoints;
}

/** leased (claimed, or slots taken for its first attempt): its lease runs until its result is written or the lease ends. */
export interface ClaimedDelivery {
  /** '' while it is not recorded (a first attempt sent before its row is written). */
  readonly id: string;
  readonly eventId: string;
  readonly eventType: string;
  readonly endpointId: string;
  /** The number of this attempt (1 for the first); an attempt a crash interrupted leaves a gap. */
  readonly attempt: number;
  readonly failures: number;
  readonly body: string;
  readonly producedAt: Date;
  readonly url: string;
  readonly secrets: readonly SigningSecret[];
  readonly headers: Readonly<Record<string, string>>;
}

/** ended: its attempt, judged. */
export interface Completion {
  readonly delivery: ClaimedDelivery;
  readonly startedAt: Date;
  readonly result: AttemptResult;
  readonly verdict: Verdict;
}

/** Held back: the endpoint gate did not let it go (endpoint-gate.ts): due again at `dueAt`, its lease given back, no attempt counted. */
export interface HeldBack {
  readonly delivery: ClaimedDelivery;
  readonly dueAt: Date;
}

/** Process slots held for the next chunk of owed deliveries (Dispatcher.reserveWhenFree), until it is taken. */
export interface Reservation {
  readonly slots: number;
}

/** A chunk taken by the dispatcher. */
export interface TakenChunk {
  /** Its first attempts handed to the sender (the next chunk may be made). */
  readonly sent: Promise<void>;
  /** Queued for its write, after the chunk before it. */
  readonly queued: Promise<void>;
  /** In the store: its offset may be committed. */
  readonly written: Promise<void>;
}

/**
 * Where the intake hands owed deliveries of events nobody recorded before (the dispatcher): it
 * leases, sends and writes them. Room first: the chunk is sized by the process's free slots.
 */
export interface OwedDeliveries {
  /** Up to `wanted` free process slots, once `atLeast` are free or none freed for `stallMs`. */
  reserveWhenFree(atLeast: number, wanted: number, stallMs: number): Promise<Reservation>;
  /** Slots reserved and not taken, given back. */
  release(slots: number): void;
  /** A chunk in `reserved`'s slots, written after `after` (the chunk of the same partition before it, if any). */
  take(chunk: OwedChunk, reserved: Reservation, after: TakenChunk | null): TakenChunk;
}

/** Whether a held delivery is in the store, and so who writes its attempt's result. */
export type Recording =
  /** Recorded (claimed, or recorded leased): the completions' batch writes the result. */
  | { readonly kind: 'recorded'; readonly id: string }
  /** Sent before its delivery was recorded, and its chunk's write waits for it: that write writes the result, in the delivery's row. */
  | { readonly kind: 'awaited'; readonly settle: (ended: Ended) => void }
  /** Its chunk's write went on without it (still in flight), writing it leased: the id it gets is awaited. */
  | { readonly kind: 'handed-over' }
  /** Its chunk's write failed: not in the store (its event is read again), nothing to write. */
  | { readonly kind: 'abandoned' };

/** How a held delivery's turn ended: its attempt, or held back by the endpoint gate (not sent). */
export type Ended = { readonly completion: Completion } | { readonly heldBack: HeldBack };

/** Where an ended attempt's result goes. */
export type ResultRoute =
  | { readonly to: 'completions'; readonly completion: Completion }
  /** Held back, leased in the store: given back (LeaseStore.giveBack, in the next write). */
  | { readonly to: 'given-back'; readonly heldBack: HeldBack }
  | { readonly to: 'recording' }
  /** Held until its chunk's write says whether it was written. */
  | { readonly to: 'held' }
  /** Not written: its slot is given back, nothing is written (its event is read again). */
  | { readonly to: 'released' };

interface Held {
  recording: Recording;
  /** Its attempt ended (or it was held back) while handed over, its id not known yet. */
  ended: Ended | null;
}

/**
 * The held deliveries' recordings and ended attempts: the transitions from `sending` to
 * `written`. Every attempt that ends goes through `end`; a chunk's write reports through
 * `handOver` and `recorded`.
 */
export class ResultWriter {
  private readonly held = new Map<ClaimedDelivery, Held>();

  /** A delivery leased to this process, with how it stands with the store. */
  lease(delivery: ClaimedDelivery, recording: Recording): void {
    this.held.set(delivery, { recording, ended: null });
  }

  /** Its attempt ended, or the gate held it back: where that goes. */
  end(delivery: ClaimedDelivery, ended: Ended): ResultRoute {
    const held = this.held.get(delivery);
    if (!held) return routeOf(ended);
    switch (held.recording.kind) {
      case 'recorded': {
        this.held.delete(delivery);
        // A first attempt handed over got its id from its recording; a claimed delivery has it already.
        const id = held.recording.id;
        if (delivery.id === id) return routeOf(ended);
        return routeOf('completion' in ended ? { completion: { ...ended.completion, delivery: { ...delivery, id } } } : { heldBack: { ...ended.heldBack, delivery: { ...delivery, id } } });
      }
      case 'awaited':
        this.held.delete(delivery);
        held.recording.settle(ended);
        return { to: 'recording' };
      case 'handed-over':
        held.ended = ended;
        return { to: 'held' };
      case 'abandoned':
        this.held.delete(delivery);
        return { to: 'released' };
    }
  }

  /** Its chunk's write goes on without it: true if it was still in flight (the write writes it leased). */
  handOver(delivery: ClaimedDelivery): boolean {
    const held = this.held.get(delivery);
    if (held?.recording.kind !== 'awaited') return false;
    held.recording = { kind: 'handed-over' };
    return true;
  }

  /** A handed-over delivery was recorded as `id` (null: it was not): the route of its result if it ended meanwhile. */
  recorded(delivery: ClaimedDelivery, id: string | null): ResultRoute | null {
    const held = this.held.get(delivery);
    if (!held) return null;
    held.recording = id === null ? { kind: 'abandoned' } : { kind: 'recorded', id };
    return held.ended ? this.end(delivery, held.ended) : null;
  }
}

function routeOf(ended: Ended): ResultRoute {
  return 'completion' in ended ? { to: 'completions', completion: ended.completion } : { to: 'given-back', heldBack: ended.heldBack };
}

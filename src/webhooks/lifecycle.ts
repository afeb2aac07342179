import type { ClaimedDelivery, Completion, HeldBack } from './delivery-store.js';

/*
 * One delivery's way through a webhooks process, whichever way it came in:
 *
 *   owed ──lease──▶ leased ──start──▶ sending ──end──▶ ended ──write──▶ written
 *                                                                       (delivered, due again, or failed)
 *
 * owed     its event is read and its endpoint known (the intake: its customer's and the
 *          platform-wide endpoints subscribed to its type);
 * leased   one of the process's slots and one of the endpoint's are held for it, until its
 *          result is written or its lease ends. Two ways take a lease, each in one statement of
 *          the store that reads the endpoint's state (DeliveryStore: sendable, the slots in use,
 *          a backlog not overtaken): a claim of due deliveries (recorded due by the consumer,
 *          retries, replays); slots taken for first attempts sent before their deliveries are
 *          recorded (the fast path: a new delivery to a healthy endpoint, FirstAttemptPath);
 * sending  its request started, in Dispatcher.startReady, once the endpoint gate let it go
 *          (endpoint-gate.ts: asked in the same turn as the request is handed to the sender);
 *          a delivery the gate does not let go is held back instead: due again at the gate's
 *          reopening, its lease given back, no attempt counted (DeliveryStore.giveBack, or, for
 *          a first attempt not recorded yet, recorded due: DeliveryStore.recordFirstAttempts);
 * ended    its answer judged once (retry-policy.ts judgeAttempt);
 * written  its result in the store: by the completions' batch (DeliveryStore.complete), or, for
 *          a first attempt that ended before its delivery was recorded, by that recording,
 *          which writes the delivery once, with its result (DeliveryStore.recordFirstAttempts).
 *
 * Who writes the result is the one thing the ways in differ by after the lease, and it is
 * decided in one place: ResultWriter below, by the delivery's Recording.
 */

/** Whether a held delivery is in the store, and so who writes its attempt's result. */
export type Recording =
  /** Recorded (claimed, or recorded leased): the completions' batch writes the result. */
  | { readonly kind: 'recorded'; readonly id: string }
  /** Sent before its delivery was recorded, and its chunk's recording waits for it: the recording writes the result. */
  | { readonly kind: 'awaited'; readonly settle: (ended: Ended) => void }
  /** Its chunk's recording went on without it (still in flight), recording it leased: the id it gets is awaited. */
  | { readonly kind: 'handed-over' }
  /** Its chunk's recording failed, or the partition went elsewhere: not in the store, nothing to write. */
  | { readonly kind: 'abandoned' };

/** How a held delivery's turn ended: its attempt, or held back by the endpoint gate (not sent). */
export type Ended = { readonly completion: Completion } | { readonly heldBack: HeldBack };

/** Where an ended attempt's result goes. */
export type ResultRoute =
  | { readonly to: 'completions'; readonly completion: Completion }
  /** Held back, leased in the store: given back (DeliveryStore.giveBack). */
  | { readonly to: 'given-back'; readonly heldBack: HeldBack }
  | { readonly to: 'recording' }
  /** Held until its recording says whether it was recorded. */
  | { readonly to: 'held' }
  /** Not recorded: its slot is given back, nothing is written (its event is read again). */
  | { readonly to: 'released' };

interface Held {
  recording: Recording;
  /** Its attempt ended (or it was held back) while handed over, its id not known yet. */
  ended: Ended | null;
}

/**
 * The held deliveries' recordings and ended attempts: the transitions from `sending` to
 * `written`. Every attempt that ends goes through `end`; a recording reports through
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

  /** The recording goes on without it: true if it was still in flight (the recording records it leased). */
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

import type { EndpointVerdict } from './retry-policy.js';

/*
 * The one answer to "may this endpoint get a request now", in a webhooks process. Every request
 * asks it synchronously, in the same turn as it is handed to the sender (Dispatcher.startReady):
 * a claimed delivery, a first attempt sent before its delivery is recorded, a retry, a replay.
 * Every verdict feeds it the moment it is judged (Dispatcher.attempt): a 429 or 503 with
 * Retry-After, or a 410, closes the endpoint's gate before the next request can start, whatever
 * else is in flight or queued, and whichever way it came in. The closing is then written to the
 * store at once, on its own (EndpointHealthStore.close), not with the batch of results: the
 * other processes read it there before their next lease of the endpoint (a claim or the slots
 * of first attempts read the endpoint's pause and disabling in the same statement). A sender
 * thread (sender-thread.ts) starts requests after the main thread handed them over and reads
 * the answers before it: it asks a gate of its own, fed by those answers, before each start.
 *
 * What the gate does not hold, the lease does: the endpoint's limit of requests in flight (its
 * slots, endpoint-shares.ts, taken with the lease and given back with the answer), its rate
 * limit (counted by the claim), one probe at a time while its circuit is half-open (the claim),
 * and a circuit or a disabling other processes recorded (the lease reads the store). A request
 * whose gate is closed is not sent: its delivery goes back to due at the gate's reopening,
 * without an attempt counted (Dispatcher.holdBack).
 */

/** Why an endpoint takes no request now. */
export type Closed =
  /** It asked for a pause (Retry-After, on a 429 or 503), or its circuit opened: until `until`. */
  | { readonly kind: 'paused'; readonly until: number }
  /** It answered 410 Gone, or failed longer than OUTBOX_WEBHOOK_DISABLE_AFTER: disabled, until an operator enables it again. */
  | { readonly kind: 'disabled' };

/** A closing the store does not have yet: EndpointHealthStore.close writes it. */
export interface Closing {
  readonly endpointId: string;
  /** The pause asked for (Retry-After), or null. */
  readonly pauseUntil: Date | null;
  /** It answered 410 Gone: why it is disabled. */
  readonly gone: string | null;
}

export type Admission = { readonly open: true } | { readonly open: false; readonly closed: Closed };

interface Gate {
  pausedUntil: number;
  gone: boolean;
  /** performance.now() once the store had the disabling: a lease read after it says whether it still stands. */
  goneRecordedAt: number | null;
}

export class EndpointGate {
  private readonly gates = new Map<string, Gate>();

  constructor(private readonly now: () => number = () => Date.now()) {}

  /** The last word before a request to `endpointId` starts. */
  admit(endpointId: string): Admission {
    const gate = this.gates.get(endpointId);
    if (!gate) return { open: true };
    if (gate.gone) return { open: false, closed: { kind: 'disabled' } };
    if (gate.pausedUntil > this.now()) return { open: false, closed: { kind: 'paused', until: gate.pausedUntil } };
    this.gates.delete(endpointId);
    return { open: true };
  }

  /**
   * An attempt to `endpointId` was judged: a pause it asked for, or its 410, closes the gate now.
   * A success beside it opens nothing: a request already on its way succeeding says nothing of
   * the endpoint's wish to be sent nothing more. The closing, for the store, when this one
   * closed the gate further than it was; else null.
   */
  heard(endpointId: string, verdict: EndpointVerdict, url: string): Closing | null {
    if (verdict.kind !== 'failure') return null;
    const gone = verdict.gone ? `answered 410 Gone (${url}): the receiver says this endpoint no longer exists` : null;
    const pauseUntil = verdict.pauseUntil;
    if (!gone && !pauseUntil) return null;
    const gate = this.gate(endpointId);
    const closesFurther = (gone !== null && !gate.gone) || (pauseUntil !== null && pauseUntil.getTime() > gate.pausedUntil);
    if (gone) gate.gone = true;
    if (pauseUntil) gate.pausedUntil = Math.max(gate.pausedUntil, pauseUntil.getTime());
    return closesFurther ? { endpointId, pauseUntil, gone } : null;
  }

  /** Its circuit opened (the store counted the failures): closed until `until`, then the store leases one probe at a time. */
  pause(endpointId: string, until: Date): void {
    const gate = this.gate(endpointId);
    gate.pausedUntil = Math.max(gate.pausedUntil, until.getTime());
  }

  /** The store disabled `endpointId` (failing too long), as of `at` (performance.now()). */
  disabled(endpointId: string, at: number): void {
    const gate = this.gate(endpointId);
    gate.gone = true;
    gate.goneRecordedAt ??= at;
  }

  /** The store has the closing of `endpointId` since `at` (performance.now()). */
  recorded(endpointId: string, at: number): void {
    const gate = this.gates.get(endpointId);
    if (gate?.gone) gate.goneRecordedAt ??= at;
  }

  /**
   * A lease of `endpointId` was read from the store at `readAt` (performance.now()): read after
   * the store had its disabling, it says the endpoint was enabled again since (a lease reads
   * only endpoints not disabled), and the gate opens: true then.
   */
  leased(endpointId: string, readAt: number): boolean {
    const gate = this.gates.get(endpointId);
    if (!gate?.gone || gate.goneRecordedAt === null || gate.goneRecordedAt >= readAt) return false;
    gate.gone = false;
    gate.goneRecordedAt = null;
    return true;
  }

  /** Opens `endpointId`'s gate (a sender thread's: the main thread's gate opened it). */
  open(endpointId: string): void {
    this.gates.delete(endpointId);
  }

  private gate(endpointId: string): Gate {
    let gate = this.gates.get(endpointId);
    if (!gate) this.gates.set(endpointId, (gate = { pausedUntil: 0, gone: false, goneRecordedAt: null }));
    return gate;
  }
}

import type { EndpointSlots } from './endpoint-shares.js';
import type { GrantedSlots } from './lease-store.js';
import type { ClaimedDelivery, Owed, OwedChunk } from './lifecycle.js';

/**
 * How long a chunk's write waits for its first attempts (sent before it) to end: those that did
 * are written once, with their results; those still in flight are written leased and their
 * results written when they come, as a claimed delivery's are. At most half a second (far
 * above a healthy endpoint's answer, far below a hanging one's timeout); once half of the
 * chunk's attempts ended, as long again as they took, at least 50 ms: a hanging endpoint
 * among healthy ones is handed over soon, not half a second later each time.
 */
export const FIRST_ATTEMPT_WAIT = { maxMs: 500, stragglerMs: 50 } as const;

/** How long Dispatcher.sendFirst waits for first attempts before handing those in flight over. */
export interface FirstAttemptWait {
  readonly maxMs: number;
  /** Once half ended: at least this long again (and as long as they took). */
  readonly stragglerMs: number;
}

/** A chunk's first attempts leased (leaseFirstAttempts), and the rest of it, owed due. */
export interface FirstLeases {
  readonly first: readonly ClaimedDelivery[];
  readonly due: readonly Owed[];
}

/**
 * The fast path's lease (a new delivery to a healthy endpoint is sent before its row is
 * written): of the chunk's deliveries, those whose endpoints `takeSlots` granted slots get them,
 * the first in consumption order first, up to `slots` (the process's, reserved for the chunk);
 * the rest are owed due, for the claims. An endpoint's slots beyond the chunk's first attempts
 * go back to its share.
 */
export async function leaseFirstAttempts(chunk: OwedChunk, slots: number, endpointSlots: EndpointSlots, takeSlots: (wanted: ReadonlyMap<string, number>) => Promise<ReadonlyMap<string, GrantedSlots>>): Promise<FirstLeases> {
  const wanted = new Map<string, number>();
  for (const { endpointId } of chunk.owed) wanted.set(endpointId, (wanted.get(endpointId) ?? 0) + 1);
  const granted = slots > 0 ? await takeSlots(wanted) : new Map<string, GrantedSlots>();
  const first: ClaimedDelivery[] = [];
  const due: Owed[] = [];
  const left = new Map([...granted].map(([endpointId, endpoint]) => [endpointId, endpoint.slots]));
  for (const owed of chunk.owed) {
    const { event, endpointId } = owed;
    const endpoint = granted.get(endpointId);
    const free = left.get(endpointId) ?? 0;
    if (endpoint && free > 0 && first.length < slots) {
      left.set(endpointId, free - 1);
      first.push({ id: '', eventId: event.eventId, eventType: event.eventType, endpointId, attempt: 1, failures: 0, body: event.body, producedAt: event.producedAt, url: endpoint.url, secrets: endpoint.secrets, headers: endpoint.headers });
    } else due.push(owed);
  }
  for (const [endpointId, unused] of left) endpointSlots.release(endpointId, unused);
  return { first, due };
}

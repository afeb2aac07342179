import { describe, expect, it } from 'vitest';
import { EndpointShares } from './endpoint-shares.js';
import { leaseFirstAttempts } from './first-attempts.js';
import type { GrantedSlots } from './lease-store.js';
import type { OwedChunk } from './lifecycle.js';

const event = (eventId: string) => ({ eventId, eventType: 'invoice.paid', aggregateId: null, body: '{}', producedAt: new Date(0) });
const endpoints = { version: '1', get: () => undefined };
const chunk = (owed: readonly [string, string][]): OwedChunk => ({ owed: owed.map(([eventId, endpointId]) => ({ event: event(eventId), endpointId })), endpoints });
const granting = (slots: Readonly<Record<string, number>>, shares: EndpointShares) => async (wanted: ReadonlyMap<string, number>) =>
  new Map(
    [...wanted].flatMap(([endpointId, n]): [string, GrantedSlots][] => {
      const taken = shares.take({ endpointId, maxInFlight: slots[endpointId] ?? 0, halfOpen: false }, n);
      return taken > 0 ? [[endpointId, { slots: taken, url: `http://receiver.test/${endpointId}`, secrets: [], headers: {} }]] : [];
    }),
  );

describe("the fast path's lease of a chunk's first attempts", () => {
  it("gives an endpoint's slots to its first deliveries in consumption order, owes the rest due, and gives back what it did not use", async () => {
    const shares = EndpointShares.alone('unit');
    const owed = chunk([['e1', 'ep-a'], ['e1', 'ep-b'], ['e2', 'ep-a'], ['e3', 'ep-a'], ['e3', 'ep-c']]);
    // ep-a has 2 slots for 3 deliveries, ep-b 5 for 1, ep-c none (unhealthy: not granted).
    const leases = await leaseFirstAttempts(owed, 10, shares, granting({ 'ep-a': 2, 'ep-b': 5 }, shares));
    expect(leases.first.map((d) => [d.eventId, d.endpointId, d.id, d.attempt])).toEqual([
      ['e1', 'ep-a', '', 1],
      ['e1', 'ep-b', '', 1],
      ['e2', 'ep-a', '', 1],
    ]);
    expect(leases.due.map((o) => [o.event.eventId, o.endpointId])).toEqual([
      ['e3', 'ep-a'],
      ['e3', 'ep-c'],
    ]);
    // The ones sent hold their endpoints' slots.
    expect(shares.take({ endpointId: 'ep-b', maxInFlight: 5, halfOpen: false }, 10)).toBe(4);
    expect(shares.take({ endpointId: 'ep-a', maxInFlight: 2, halfOpen: false }, 10)).toBe(0);
  });

  it("sends no more than the process's slots reserved for the chunk, gives the endpoint's slots it did not use back, and asks for none without any", async () => {
    const shares = EndpointShares.alone('unit');
    const owed = chunk([['e1', 'ep-a'], ['e2', 'ep-a'], ['e3', 'ep-a']]);
    const two = await leaseFirstAttempts(owed, 2, shares, granting({ 'ep-a': 10 }, shares));
    expect([two.first.length, two.due.length]).toEqual([2, 1]);
    // Three of ep-a's slots granted, two used: one back in its share.
    expect(shares.take({ endpointId: 'ep-a', maxInFlight: 10, halfOpen: false }, 10)).toBe(8);
    shares.release('ep-a', 8);
    const none = await leaseFirstAttempts(owed, 0, shares, () => expect.unreachable('no slots, no read'));
    expect([none.first.length, none.due.length]).toEqual([0, 3]);
  });
});

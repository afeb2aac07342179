import { describe, expect, it } from 'vitest';
import { eventTypeProblem, SubscriptionIndex } from './event-types.js';

describe('event type patterns', () => {
  it('accepts exact types, trailing wildcards and *', () => {
    for (const pattern of ['invoice.paid', 'invoice.*', '*', 'billing:v2.invoice-paid', 'a_b']) expect(eventTypeProblem(pattern)).toBeNull();
  });

  it('refuses what it could not match as written', () => {
    for (const pattern of ['', 'invoice.', '*.paid', 'invoice.*.paid', 'invoice paid', 'invoice.**']) expect(eventTypeProblem(pattern)).toMatch(/expected dot-separated words/);
  });

  it('matches each endpoint once, by exact type or prefix', () => {
    const index = new SubscriptionIndex([
      { endpointId: 'a', eventTypes: ['invoice.paid'], deliverFromMs: -Infinity, customerId: null },
      { endpointId: 'b', eventTypes: ['invoice.*', 'invoice.paid'], deliverFromMs: -Infinity, customerId: null },
      { endpointId: 'c', eventTypes: ['*'], deliverFromMs: -Infinity, customerId: null },
      { endpointId: 'd', eventTypes: ['subscription.*'], deliverFromMs: -Infinity, customerId: null },
    ]);
    expect([...index.endpointsFor(null, 'invoice.paid', 0)].sort()).toEqual(['a', 'b', 'c']);
    expect([...index.endpointsFor(null, 'invoice.payment.failed', 0)].sort()).toEqual(['b', 'c']);
    expect([...index.endpointsFor(null, 'invoice', 0)].sort()).toEqual(['c']);
    expect([...index.endpointsFor(null, 'invoicex.paid', 0)].sort()).toEqual(['c']);
  });

  it('owes an endpoint only the events produced from its deliver-from time on, that millisecond included', () => {
    const index = new SubscriptionIndex([
      { endpointId: 'old', eventTypes: ['invoice.*'], deliverFromMs: -Infinity, customerId: null },
      { endpointId: 'new', eventTypes: ['invoice.*'], deliverFromMs: 1_000, customerId: null },
    ]);
    expect([...index.endpointsFor(null, 'invoice.paid', 999)].sort()).toEqual(['old']);
    expect([...index.endpointsFor(null, 'invoice.paid', 1_000)].sort()).toEqual(['new', 'old']);
    expect(index.mostFanOut).toBe(2);
  });

  it("matches an event against its own customer's endpoints and the platform-wide ones, never another customer's", () => {
    const index = new SubscriptionIndex([
      { endpointId: 'acme-1', eventTypes: ['invoice.*'], deliverFromMs: -Infinity, customerId: 'cus_acme' },
      { endpointId: 'acme-2', eventTypes: ['invoice.paid'], deliverFromMs: -Infinity, customerId: 'cus_acme' },
      { endpointId: 'globex', eventTypes: ['invoice.*'], deliverFromMs: -Infinity, customerId: 'cus_globex' },
      { endpointId: 'ledger', eventTypes: ['*'], deliverFromMs: -Infinity, customerId: null },
    ]);
    expect([...index.endpointsFor('cus_acme', 'invoice.paid', 0)].sort()).toEqual(['acme-1', 'acme-2', 'ledger']);
    expect([...index.endpointsFor('cus_globex', 'invoice.paid', 0)].sort()).toEqual(['globex', 'ledger']);
    // A customer with no endpoint, and an event whose customer is unknown: the platform-wide endpoint only.
    expect([...index.endpointsFor('cus_initech', 'invoice.paid', 0)]).toEqual(['ledger']);
    expect([...index.endpointsFor(null, 'invoice.paid', 0)]).toEqual(['ledger']);
    // A customer id that is a prefix of another, or differs in case, is another customer.
    expect([...index.endpointsFor('cus_ACME', 'invoice.paid', 0)]).toEqual(['ledger']);
    expect(index.mostFanOut).toBe(3);
  });
});

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
      { endpointId: 'a', eventTypes: ['invoice.paid'], deliverFromMs: -Infinity },
      { endpointId: 'b', eventTypes: ['invoice.*', 'invoice.paid'], deliverFromMs: -Infinity },
      { endpointId: 'c', eventTypes: ['*'], deliverFromMs: -Infinity },
      { endpointId: 'd', eventTypes: ['subscription.*'], deliverFromMs: -Infinity },
    ]);
    expect([...index.endpointsFor('invoice.paid', 0)].sort()).toEqual(['a', 'b', 'c']);
    expect([...index.endpointsFor('invoice.payment.failed', 0)].sort()).toEqual(['b', 'c']);
    expect([...index.endpointsFor('invoice', 0)].sort()).toEqual(['c']);
    expect([...index.endpointsFor('invoicex.paid', 0)].sort()).toEqual(['c']);
  });

  it('owes an endpoint only the events produced from its deliver-from time on, that millisecond included', () => {
    const index = new SubscriptionIndex([
      { endpointId: 'old', eventTypes: ['invoice.*'], deliverFromMs: -Infinity },
      { endpointId: 'new', eventTypes: ['invoice.*'], deliverFromMs: 1_000 },
    ]);
    expect([...index.endpointsFor('invoice.paid', 999)].sort()).toEqual(['old']);
    expect([...index.endpointsFor('invoice.paid', 1_000)].sort()).toEqual(['new', 'old']);
    expect(index.size).toBe(2);
  });
});

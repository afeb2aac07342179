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
      { endpointId: 'a', eventTypes: ['invoice.paid'] },
      { endpointId: 'b', eventTypes: ['invoice.*', 'invoice.paid'] },
      { endpointId: 'c', eventTypes: ['*'] },
      { endpointId: 'd', eventTypes: ['subscription.*'] },
    ]);
    expect([...index.endpointsFor('invoice.paid')].sort()).toEqual(['a', 'b', 'c']);
    expect([...index.endpointsFor('invoice.payment.failed')].sort()).toEqual(['b', 'c']);
    expect([...index.endpointsFor('invoice')].sort()).toEqual(['c']);
    expect([...index.endpointsFor('invoicex.paid')].sort()).toEqual(['c']);
  });
});

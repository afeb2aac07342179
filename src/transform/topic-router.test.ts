import { describe, expect, it } from 'vitest';
import type { OutboxEvent } from '../event.js';
import { compileTopicTemplate } from './topic-router.js';

const event = (aggregateType: string, eventType = 'invoice.paid'): OutboxEvent => ({
  eventId: 'e1', aggregateType, aggregateId: 'inv_1', eventType, payload: {}, headers: {}, createdAt: null,
});

describe('compileTopicTemplate', () => {
  it('fills placeholders from the event', () => {
    expect(compileTopicTemplate('billing.{aggregate_type}')(event('invoice'))).toBe('billing.invoice');
    expect(compileTopicTemplate('outbox.{event_type}')(event('invoice', 'invoice.paid'))).toBe('outbox.invoice.paid');
    expect(compileTopicTemplate('aggregateType-{aggregate_type}')(event('x'))).toBe('aggregateType-x');
  });

  it('fails at start on an unknown placeholder', () => {
    expect(() => compileTopicTemplate('billing.{tenant}')).toThrow(/unknown placeholder \{tenant\}/);
  });

  it('builds each topic once, and still tells events apart by every placeholder', () => {
    const route = compileTopicTemplate('{aggregate_type}.{event_type}');
    expect(route(event('invoice', 'paid'))).toBe('invoice.paid');
    expect(route(event('invoice', 'voided'))).toBe('invoice.voided');
    expect(route(event('invoice', 'paid'))).toBe('invoice.paid');
    expect(compileTopicTemplate('billing')(event('anything'))).toBe('billing');
    const single = compileTopicTemplate('billing.{aggregate_type}');
    for (let i = 0; i < 1_500; i++) expect(single(event(`a${i % 1_200}`))).toBe(`billing.a${i % 1_200}`);
  });

  it('makes an event poison when its topic would be illegal', () => {
    const route = compileTopicTemplate('billing.{aggregate_type}');
    expect(() => route(event('has space'))).toThrow(expect.objectContaining({ code: 'ROUTE_BAD_TOPIC' }));
    expect(() => route(event('x'.repeat(300)))).toThrow(/not a legal Kafka topic/);
    expect(() => route(event('has space'))).toThrow(/not a legal Kafka topic/); // not remembered as known
  });
});

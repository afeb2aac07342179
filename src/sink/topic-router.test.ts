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

  it('makes an event poison when its topic would be illegal', () => {
    const route = compileTopicTemplate('billing.{aggregate_type}');
    expect(() => route(event('has space'))).toThrow(expect.objectContaining({ code: 'ROUTE_BAD_TOPIC' }));
    expect(() => route(event('x'.repeat(300)))).toThrow(/not a legal Kafka topic/);
  });
});

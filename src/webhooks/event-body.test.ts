import { describe, expect, it } from 'vitest';
import type { ConsumedEvent } from '../client/consumer.js';
import { eventBody } from './event-body.js';

const event = (payload: unknown): ConsumedEvent => ({
  eventId: 'evt_1',
  eventType: 'invoice.paid',
  aggregateType: 'invoice',
  aggregateId: 'inv_1',
  payload,
  payloadJson: null,
  createdAt: new Date('2026-12-01T10:00:00.000Z'),
  headers: {},
  topic: 'outbox.invoice',
  partition: 0,
  offset: '0',
});

describe('the webhook body', () => {
  it('carries a JSON value as it was published: every digit of an amount beyond double precision', () => {
    const json = '{"amount_minor": 12345678901234567890123, "rate": 0.10000000000000000001}';
    const body = eventBody({ ...event(JSON.parse(json)), payloadJson: json }, new Date(0));
    expect(body).toBe(`{"id":"evt_1","type":"invoice.paid","timestamp":"2026-12-01T10:00:00.000Z","aggregate":{"type":"invoice","id":"inv_1"},"data":${json}}`);
  });

  it('writes a decoded Avro value as JSON: bytes as base64, longs beyond double precision as text', () => {
    const body = JSON.parse(eventBody(event({ digest: Buffer.from([1, 2, 3]), amount: 12345678901234567890n, paid: true }), new Date(0))) as { data: unknown };
    expect(body.data).toEqual({ digest: 'AQID', amount: '12345678901234567890', paid: true });
  });

  it('stamps the event with its outbox time, or without one the Kafka record time', () => {
    const body = JSON.parse(eventBody({ ...event({}), payloadJson: '{}', createdAt: null }, new Date('2026-12-02T00:00:00.000Z'))) as { timestamp: string };
    expect(body.timestamp).toBe('2026-12-02T00:00:00.000Z');
  });
});

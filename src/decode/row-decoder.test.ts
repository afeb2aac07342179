import { describe, expect, it } from 'vitest';
import { PoisonEventError } from '../errors.js';
import { eventHeaders } from '../transform/headers.js';
import { RowDecoder } from './row-decoder.js';

const decoder = new RowDecoder({
  eventId: 'event_id', aggregateType: 'aggregate_type', aggregateId: 'aggregate_id', eventType: 'event_type',
  payload: 'payload', headers: 'headers', createdAt: 'created_at',
});
const row = {
  event_id: 'evt_1', aggregate_type: 'invoice', aggregate_id: 'inv_1', event_type: 'invoice.paid',
  payload: { amount_cents: 1250 }, headers: { traceparent: 't', retry: 2 }, created_at: new Date('2026-01-01T00:00:00Z'),
};

describe('RowDecoder', () => {
  it('keeps every header name a JSON object can hold, Object.prototype names and __proto__ included', () => {
    const headers = JSON.parse('{"constructor":"c","toString":"t","valueOf":"v","hasOwnProperty":"h","__proto__":"p","__proto__x":"x","ok":"1"}') as Record<string, string>;
    const event = decoder.decode({ ...row, headers });
    expect(Object.keys(event.headers).sort()).toEqual(['__proto__', '__proto__x', 'constructor', 'hasOwnProperty', 'ok', 'toString', 'valueOf']);
    expect(event.headers.__proto__).toBe('p');
    const published = eventHeaders(event, '0/1', 'public.event_outbox');
    expect(Object.entries(published).filter(([name]) => name in headers || name === '__proto__')).toEqual(Object.entries(headers));
    expect(Object.keys(published)).toEqual(['event_id', 'event_type', 'aggregate_type', 'outbox_commit_lsn', 'outbox_source', 'created_at', ...Object.keys(headers)]);
    expect(published.outbox_source).toBe('public.event_outbox');
  });

  it('reads no aggregate type from a table that has none, and publishes no aggregate_type header', () => {
    const withoutType = new RowDecoder({ eventId: 'event_id', aggregateType: null, aggregateId: 'aggregate_id', eventType: 'event_type', payload: 'payload', headers: 'headers', createdAt: 'created_at' });
    const { aggregate_type: _omitted, ...shapeOne } = row;
    const event = withoutType.decode(shapeOne);
    expect(event.aggregateType).toBeNull();
    expect(Object.keys(eventHeaders(event, '0/1', 'billing.outbox'))).toEqual(['event_id', 'event_type', 'outbox_commit_lsn', 'outbox_source', 'created_at', 'traceparent', 'retry']);
    expect(Object.keys(eventHeaders({ ...event, createdAt: null }, '0/1', 'billing.outbox'))).toEqual(['event_id', 'event_type', 'outbox_commit_lsn', 'outbox_source', 'traceparent', 'retry']);
  });

  it('maps columns to an event, headers as strings', () => {
    expect(decoder.decode(row)).toEqual({
      eventId: 'evt_1', aggregateType: 'invoice', aggregateId: 'inv_1', eventType: 'invoice.paid',
      payload: { amount_cents: 1250 }, headers: { traceparent: 't', retry: '2' }, createdAt: '2026-01-01T00:00:00.000Z',
    });
  });

  it('accepts numeric ids (int4 arrives as a number, int8 as a string)', () => {
    expect(decoder.decode({ ...row, aggregate_id: 42 }).aggregateId).toBe('42');
    expect(decoder.decode({ ...row, aggregate_id: '9007199254740993' }).aggregateId).toBe('9007199254740993');
  });

  it('makes a row poison, naming the column and what was expected', () => {
    const poison = (patch: Record<string, unknown>) => {
      try {
        decoder.decode({ ...row, ...patch });
      } catch (error) {
        expect(error).toBeInstanceOf(PoisonEventError);
        return (error as PoisonEventError).message;
      }
      throw new Error('expected poison');
    };
    expect(poison({ event_type: null })).toBe('column "event_type": expected a non-empty text value, got null');
    expect(poison({ aggregate_id: '' })).toMatch(/"aggregate_id": expected a non-empty text value, got an empty string/);
    expect(poison({ payload: null })).toMatch(/"payload": expected a JSON payload, got null/);
    expect(poison({ headers: [1] })).toMatch(/"headers": expected a JSON object of headers, got an array/);
    expect(poison({ created_at: 'yesterday' })).toMatch(/"created_at": expected a timestamp/);
    const { event_id: _dropped, ...withoutId } = row;
    expect(() => decoder.decode(withoutId)).toThrow(/column "event_id" is not in the row; check the OUTBOX_COLUMN_\* settings/);
  });
});

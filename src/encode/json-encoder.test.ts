import { describe, expect, it } from 'vitest';
import { JsonText } from '../decode/json-text.js';
import type { OutboxEvent } from '../event.js';
import { JsonEncoder } from './json-encoder.js';

const event = (payload: unknown): OutboxEvent => ({ eventId: 'e', aggregateType: 'invoice', aggregateId: 'inv_1', eventType: 'invoice.paid', payload, headers: {}, createdAt: null });
const encoder = new JsonEncoder();

describe('JsonEncoder', () => {
  it('publishes json/jsonb text, text and bytea payloads as stored, never re-encoded', () => {
    const stored = Buffer.from('{"note": "\\u00e9 é"}');
    expect(encoder.encode(event(JsonText.fromBytes(Buffer.concat([Buffer.from("xx"), stored]), 2, 2 + stored.length)))).toEqual(stored);
    expect(encoder.encode(event(new JsonText('{"amount": 12345678901234567890123}')))).toBe('{"amount": 12345678901234567890123}');
    expect(encoder.encode(event('{"invoice_id":"inv_1"}'))).toBe('{"invoice_id":"inv_1"}');
    const bytes = Buffer.from([0, 255, 123]);
    expect(encoder.encode(event(bytes))).toBe(bytes);
  });

  it('refuses, as a poison event naming what it got, a payload it would have to re-encode', () => {
    for (const [payload, what] of [[42, 'a number'], [new Date(0), 'a date or time'], [[1], 'an array'], [{ a: 1 }, 'an object']] as const) {
      expect(() => encoder.encode(event(payload))).toThrow(expect.objectContaining({ code: 'DECODE_BAD_VALUE', message: expect.stringContaining(`holds ${what}`) }));
    }
  });
});

import { describe, expect, it } from 'vitest';
import { JsonText } from './json-text.js';
import { MessageDecoder } from './message-decoder.js';

const decoder = new MessageDecoder();
const decode = (content: string) => decoder.decode(Buffer.from(content, 'utf8'));

describe('MessageDecoder', () => {
  it("reads the default table's columns as fields, the payload kept as written", () => {
    const event = decode('{"event_id":"e1","aggregate_type":"invoice","aggregate_id":"inv_1","event_type":"invoice.paid", "payload" : {"amount":12345678901234567890, "s":"a\\"b"},"headers":{"traceparent":"t"},"created_at":"2026-12-01T10:00:00Z"}');
    expect(event).toMatchObject({ eventId: 'e1', aggregateType: 'invoice', aggregateId: 'inv_1', eventType: 'invoice.paid', headers: { traceparent: 't' }, createdAt: '2026-12-01T10:00:00.000Z' });
    expect(event.payload).toBeInstanceOf(JsonText);
    expect((event.payload as JsonText).text).toBe('{"amount":12345678901234567890, "s":"a\\"b"}');
  });

  it('takes the payload JSON.parse takes: the last of repeated names; one named with escapes, serialized again', () => {
    const base = '"event_id":"e1","aggregate_type":"invoice","aggregate_id":"inv_1","event_type":"invoice.paid"';
    expect((decode(`{"payload":1,${base},"payload":[2]}`).payload as JsonText).text).toBe('[2]');
    expect((decode(`{${base},"pay\\u006coad":{"a": 1}}`).payload as JsonText).text).toBe('{"a":1}');
  });

  it('refuses content that is not the object of an event, naming what was expected', () => {
    expect(() => decode('not json')).toThrow(/^message content is not JSON \(.*\); expected a JSON object \{"event_id"/);
    expect(() => decode('[1]')).toThrow(/^message content is an array; expected a JSON object/);
    expect(() => decode('null')).toThrow(/^message content is null;/);
    expect(() => decode('{"event_id":"e1","aggregate_type":"invoice","aggregate_id":"inv_1","payload":{}}')).toThrow(/^message field "event_type" is missing; expected a JSON object/);
    expect(() => decode('{"event_id":"","aggregate_type":"invoice","aggregate_id":"inv_1","event_type":"t","payload":{}}')).toThrow(/^message field "event_id": expected a non-empty text value, got an empty string/);
    for (const content of ['not json', '{"event_id":""}']) expect(() => decode(content)).toThrow(expect.objectContaining({ code: 'DECODE_BAD_MESSAGE' }));
  });

  it('refuses content that is not UTF-8 (a bytea message), naming the byte offset and what was expected', () => {
    const text = '{"event_id":"e1","aggregate_type":"invoice","aggregate_id":"inv_1","event_type":"invoice.paid","payload":{"note":"a?b"}}';
    const content = Buffer.from(text, 'utf8');
    const at = text.indexOf('a?b') + 1;
    content[at] = 0xff;
    expect(() => decoder.decode(content)).toThrow(expect.objectContaining({ code: 'DECODE_BAD_MESSAGE' }));
    expect(() => decoder.decode(content)).toThrow(new RegExp(`^message content is not valid UTF-8 \\(byte 0xff at offset ${at}\\); expected UTF-8 text of a JSON object \\{"event_id"`));
  });
});

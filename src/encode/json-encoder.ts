import type { OutboxEvent } from '../event.js';
import { JsonText } from '../decode/json-text.js';
import { PoisonEventError } from '../errors.js';
import type { PayloadEncoder } from './encoder.js';

/**
 * The payload as it was stored, byte for byte: a json/jsonb column as the text Postgres sent
 * (the stream keeps it unparsed for this format), a text or varchar column as its UTF-8 text,
 * a bytea column as its raw bytes. No other column type gets here: it would have to be
 * re-encoded, so it is a dead letter (DECODE_BAD_VALUE) naming the type.
 */
export class JsonEncoder implements PayloadEncoder {
  readonly format = 'json' as const;

  encode(event: OutboxEvent): Buffer | string {
    const { payload } = event;
    if (payload instanceof JsonText) return payload.raw;
    if (typeof payload === 'string' || Buffer.isBuffer(payload)) return payload;
    throw new PoisonEventError('DECODE_BAD_VALUE', `the payload column holds ${describeValue(payload)}; the relay publishes json, jsonb, text, varchar or bytea payloads as stored, and would have to re-encode this one`);
  }
}

function describeValue(value: unknown): string {
  if (value instanceof Date) return 'a date or time';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

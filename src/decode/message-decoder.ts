import { isUtf8 } from 'node:buffer';
import { PoisonEventError } from '../errors.js';
import type { OutboxEvent } from '../event.js';
import { DEFAULT_COLUMNS } from '../outbox-table.js';
import { JsonReader } from '../encode/avro/json-reader.js';
import { JsonText } from './json-text.js';
import { RowDecoder, type ValueSource } from './row-decoder.js';
import { invalidUtf8Offset } from './utf8.js';

/** What the content of an outbox message holds: the default outbox table's columns, as fields of one JSON object. */
export const MESSAGE_FIELDS_EXPECTED = 'a JSON object {"event_id", "aggregate_type", "aggregate_id", "event_type", "payload", optional "headers" (an object) and "created_at"}';

const MESSAGE_FIELD: ValueSource = {
  noun: 'message field',
  badValue: 'DECODE_BAD_MESSAGE',
  missing: (field) => new PoisonEventError('DECODE_BAD_MESSAGE', `message field "${field}" is missing; expected ${MESSAGE_FIELDS_EXPECTED}`, { details: { field } }),
};

const PAYLOAD = Buffer.from(DEFAULT_COLUMNS.payload);

/**
 * The content of a logical decoding message -> OutboxEvent, the same way a row of the default
 * outbox table is decoded (its fields are that table's columns). The payload stays the JSON
 * text it was written as, like a jsonb column's: the JSON format publishes those bytes, Avro
 * transcodes them, and numbers keep every digit.
 */
export class MessageDecoder {
  private readonly fields = new RowDecoder(DEFAULT_COLUMNS, MESSAGE_FIELD);
  private readonly reader = new JsonReader();

  decode(content: Buffer): OutboxEvent {
    return this.fields.decode(this.values(content));
  }

  private values(content: Buffer): Record<string, unknown> {
    // A bytea message can hold any bytes: toString would turn a bad one into U+FFFD and parse,
    // while the payload's own bytes, published as written, would carry it to Kafka unchanged.
    if (!isUtf8(content)) {
      const at = invalidUtf8Offset(content);
      throw new PoisonEventError('DECODE_BAD_MESSAGE', `message content is not valid UTF-8 (byte 0x${content[at]!.toString(16).padStart(2, '0')} at offset ${at}); expected UTF-8 text of ${MESSAGE_FIELDS_EXPECTED}`, { details: { offset: at } });
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(content.toString('utf8'));
    } catch (error) {
      throw new PoisonEventError('DECODE_BAD_MESSAGE', `message content is not JSON (${(error as Error).message}); expected ${MESSAGE_FIELDS_EXPECTED}`);
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new PoisonEventError('DECODE_BAD_MESSAGE', `message content is ${Array.isArray(parsed) ? 'an array' : parsed === null ? 'null' : `a ${typeof parsed}`}; expected ${MESSAGE_FIELDS_EXPECTED}`);
    }
    const values = parsed as Record<string, unknown>;
    const payload = values[DEFAULT_COLUMNS.payload];
    // A name written with escapes ("pay\u006coad") is not found by the reader: serialized again.
    if (payload !== undefined) values[DEFAULT_COLUMNS.payload] = this.payloadText(content) ?? new JsonText(JSON.stringify(payload));
    return values;
  }

  /** The payload member's bytes as written (JSON.parse keeps the last of repeated names: so does this). */
  private payloadText(content: Buffer): JsonText | undefined {
    const reader = this.reader;
    reader.reset(content);
    let payload: JsonText | undefined;
    if (reader.eat(0x7b) && !reader.eat(0x7d)) {
      do {
        if (!reader.string()) break;
        const isPayload = reader.stringEquals(PAYLOAD);
        if (!reader.eat(0x3a)) break;
        reader.peek();
        const start = reader.pos;
        if (!reader.skip()) break;
        if (isPayload) payload = new JsonText(Buffer.from(content.subarray(start, reader.pos)));
      } while (reader.eat(0x2c));
    }
    return payload;
  }
}

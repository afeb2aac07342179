import type { ConsumedEvent } from '../client/consumer.js';

/**
 * The body every endpoint receives, as Standard Webhooks lays it out (type, timestamp, data),
 * with the outbox's identity beside it. Stored once per event and sent as stored: every attempt
 * signs the same bytes.
 *
 * A JSON value (the relay's default format) becomes `data` exactly as the relay published it,
 * i.e. as Postgres stored it: parsed and written again, an amount beyond double precision would
 * lose digits (JSON.parse makes every number a double). It was parsed once already, so it is one
 * JSON value. An Avro value is written from its decoding.
 */
export function eventBody(event: ConsumedEvent, producedAt: Date): string {
  const envelope = {
    id: event.eventId,
    type: event.eventType,
    timestamp: (event.createdAt ?? producedAt).toISOString(),
    aggregate: { type: event.aggregateType, id: event.aggregateId },
  };
  if (event.payloadJson !== null) return `${JSON.stringify(envelope).slice(0, -1)},"data":${event.payloadJson}}`;
  return JSON.stringify({ ...envelope, data: event.payload }, bytesAsBase64);
}

/** Avro `bytes` and `fixed` decode to Buffers, which JSON would spell as arrays of numbers. */
function bytesAsBase64(this: unknown, key: string, value: unknown): unknown {
  const raw = (this as Record<string, unknown>)[key];
  return Buffer.isBuffer(raw) ? raw.toString('base64') : typeof value === 'bigint' ? value.toString() : value;
}

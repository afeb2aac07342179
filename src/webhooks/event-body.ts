import type { ConsumedEvent } from '../client/consumer.js';

/**
 * The body every endpoint receives, as Standard Webhooks lays it out (type, timestamp, data),
 * with the outbox's identity beside it. Stored once per event and sent as stored: every attempt
 * signs the same bytes.
 *
 * `payloadJson`: the record's value when it is JSON (the relay's default), which becomes `data`
 * exactly as the relay published it, i.e. as Postgres stored it. Parsed and written again, an
 * amount beyond double precision would lose digits (JSON.parse makes every number a double).
 * It was parsed once already, so it is one JSON value.
 */
export function eventBody(event: ConsumedEvent, producedAt: Date, payloadJson?: string): string {
  const envelope = {
    id: event.eventId,
    type: event.eventType,
    timestamp: (event.createdAt ?? producedAt).toISOString(),
    aggregate: { type: event.aggregateType, id: event.aggregateId },
  };
  if (payloadJson !== undefined) return `${JSON.stringify(envelope).slice(0, -1)},"data":${payloadJson}}`;
  return JSON.stringify({ ...envelope, data: event.payload }, bytesAsBase64);
}

/** Avro `bytes` and `fixed` decode to Buffers, which JSON would spell as arrays of numbers. */
function bytesAsBase64(this: unknown, key: string, value: unknown): unknown {
  const raw = (this as Record<string, unknown>)[key];
  return Buffer.isBuffer(raw) ? raw.toString('base64') : typeof value === 'bigint' ? value.toString() : value;
}

import type { ConsumedEvent } from '../client/consumer.js';

/**
 * The body every endpoint receives, as Standard Webhooks lays it out (type, timestamp, data),
 * with the outbox's identity beside it. Stored once per event and sent as stored: every attempt
 * signs the same bytes.
 */
export function eventBody(event: ConsumedEvent, producedAt: Date): string {
  return JSON.stringify(
    {
      id: event.eventId,
      type: event.eventType,
      timestamp: (event.createdAt ?? producedAt).toISOString(),
      aggregate: { type: event.aggregateType, id: event.aggregateId },
      data: event.payload,
    },
    bytesAsBase64,
  );
}

/** Avro `bytes` and `fixed` decode to Buffers, which JSON would spell as arrays of numbers. */
function bytesAsBase64(this: unknown, key: string, value: unknown): unknown {
  const raw = (this as Record<string, unknown>)[key];
  return Buffer.isBuffer(raw) ? raw.toString('base64') : typeof value === 'bigint' ? value.toString() : value;
}

import { NO_HEADERS, type OutboxEvent } from '../event.js';

/** Header names the relay sets; consumers may rely on them. `outbox_source` names the outbox: `schema.table`, or `message:<prefix>`. */
export const HEADER = {
  eventId: 'event_id',
  eventType: 'event_type',
  aggregateType: 'aggregate_type',
  createdAt: 'created_at',
  commitLsn: 'outbox_commit_lsn',
  source: 'outbox_source',
  deadLetterReason: 'dead_letter_reason',
  deadLetterCode: 'dead_letter_code',
  deadLetterTable: 'dead_letter_source_table',
  deadLetterOmitted: 'dead_letter_row_omitted',
} as const;

/**
 * The relay's headers, then the row's own where they do not clash (the relay's names win).
 * Built as one literal of a fixed shape: this runs once per event.
 */
export function eventHeaders(event: OutboxEvent, commitLsnText: string, source: string): Record<string, string> {
  const headers: Record<string, string> = event.aggregateType === null ? headersWithoutAggregateType(event, commitLsnText, source) : event.createdAt
    ? { event_id: event.eventId, event_type: event.eventType, aggregate_type: event.aggregateType, outbox_commit_lsn: commitLsnText, outbox_source: source, created_at: event.createdAt }
    : { event_id: event.eventId, event_type: event.eventType, aggregate_type: event.aggregateType, outbox_commit_lsn: commitLsnText, outbox_source: source };
  if (event.headers === NO_HEADERS) return headers;
  for (const name in event.headers) {
    if (Object.hasOwn(headers, name) || name === HEADER.createdAt) continue;
    // Assigning "__proto__" would set the object's prototype and drop the header.
    if (name === '__proto__') Object.defineProperty(headers, name, { value: event.headers[name], enumerable: true, writable: true, configurable: true });
    else headers[name] = event.headers[name]!;
  }
  return headers;
}

/** A table without an aggregate type sends no `aggregate_type` header (rather than an empty one consumers would trust). */
function headersWithoutAggregateType(event: OutboxEvent, commitLsnText: string, source: string): Record<string, string> {
  return event.createdAt
    ? { event_id: event.eventId, event_type: event.eventType, outbox_commit_lsn: commitLsnText, outbox_source: source, created_at: event.createdAt }
    : { event_id: event.eventId, event_type: event.eventType, outbox_commit_lsn: commitLsnText, outbox_source: source };
}

import type { OutboxEvent } from '../event.js';
import { formatLsn, type Lsn } from '../lsn.js';

/** Header names the relay sets; consumers may rely on them. */
export const HEADER = {
  eventId: 'event_id',
  eventType: 'event_type',
  aggregateType: 'aggregate_type',
  createdAt: 'created_at',
  commitLsn: 'outbox_commit_lsn',
  deadLetterReason: 'dead_letter_reason',
  deadLetterCode: 'dead_letter_code',
  deadLetterTable: 'dead_letter_source_table',
  deadLetterOmitted: 'dead_letter_row_omitted',
} as const;

/** The row's own headers first, so the relay's names win when both are set. */
export function eventHeaders(event: OutboxEvent, commitLsn: Lsn): Record<string, string> {
  const headers: Record<string, string> = { ...event.headers };
  headers[HEADER.eventId] = event.eventId;
  headers[HEADER.eventType] = event.eventType;
  headers[HEADER.aggregateType] = event.aggregateType;
  if (event.createdAt) headers[HEADER.createdAt] = event.createdAt.toISOString();
  headers[HEADER.commitLsn] = formatLsn(commitLsn);
  return headers;
}

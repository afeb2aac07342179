/**
 * The outbox table's columns by role, with the names sql/001_event_outbox.sql gives them. A
 * user's own table maps each role to its column (OUTBOX_COLUMN_*); the relay, replay and the
 * writer all go through this one map.
 */
export const DEFAULT_COLUMNS = {
  eventId: 'event_id',
  aggregateType: 'aggregate_type',
  aggregateId: 'aggregate_id',
  eventType: 'event_type',
  payload: 'payload',
  headers: 'headers',
  createdAt: 'created_at',
} as const;

export type ColumnRole = keyof typeof DEFAULT_COLUMNS;
/** Column names by role. A table without an aggregate type (common among polling outboxes) maps it to null. */
export type ColumnMap = Readonly<Record<Exclude<ColumnRole, 'aggregateType'>, string> & { aggregateType: string | null }>;

/** A plain Postgres identifier: table, schema and column names are checked against it, never escaped from user input. */
export function isPlainIdentifier(name: string): boolean {
  return /^[A-Za-z_][A-Za-z0-9_$]*$/.test(name);
}

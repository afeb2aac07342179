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

/** What each role becomes on the record, and whether a row without its column can be published. */
export const COLUMN_ROLES: Readonly<Record<ColumnRole, { readonly becomes: string; readonly required: boolean; readonly env: string }>> = {
  eventId: { becomes: 'header event_id', required: true, env: 'OUTBOX_COLUMN_EVENT_ID' },
  aggregateType: { becomes: 'header aggregate_type', required: true, env: 'OUTBOX_COLUMN_AGGREGATE_TYPE' },
  aggregateId: { becomes: 'the Kafka key', required: true, env: 'OUTBOX_COLUMN_AGGREGATE_ID' },
  eventType: { becomes: 'header event_type', required: true, env: 'OUTBOX_COLUMN_EVENT_TYPE' },
  // Required too; setup's payload check (setup/payload-column.ts) also names the accepted types.
  payload: { becomes: 'the record value', required: true, env: 'OUTBOX_COLUMN_PAYLOAD' },
  headers: { becomes: 'extra headers', required: false, env: 'OUTBOX_COLUMN_HEADERS' },
  createdAt: { becomes: "header created_at, and the pruner's age", required: false, env: 'OUTBOX_COLUMN_CREATED_AT' },
};

/**
 * Why a table with these columns cannot be published under `columns` (the first required role
 * whose column it lacks, said with the variable that names it), or null when it can.
 */
export function unmappedRole(columns: ColumnMap, present: ReadonlySet<string>, except: readonly ColumnRole[] = []): string | null {
  for (const [role, spec] of Object.entries(COLUMN_ROLES) as [ColumnRole, (typeof COLUMN_ROLES)[ColumnRole]][]) {
    const column = columns[role];
    if (column === null || !spec.required || present.has(column) || except.includes(role)) continue;
    const hint = role === 'aggregateType' ? '; a table without an aggregate type: set it empty' : '';
    return `it has no column "${column}" (${spec.env}), which the relay needs for ${spec.becomes}; its columns are ${[...present].join(', ') || 'none'}${hint}`;
  }
  return null;
}

import pg from 'pg';
import type { RelationRef } from '../source/messages.js';

/** The marks table's columns, as CREATE TABLE takes them (also made by the trigger that adds a new tenant's table: outbox-tables.ts). */
export const PRUNE_MARKS_COLUMNS = '(taken_at timestamptz NOT NULL, wal_lsn pg_lsn NOT NULL, oldest_running_xid bigint NOT NULL)';

/**
 * The pruner's marks table, created if missing. Its existence is checked first: CREATE TABLE IF
 * NOT EXISTS needs CREATE on the schema even when the table is there, which a least-privilege
 * pruner does not have (`setup` creates the table as the owner).
 */
export async function ensurePruneMarks(client: pg.ClientBase, table: RelationRef): Promise<'exists' | 'created'> {
  const marks = pruneMarksTable(table);
  const { rows } = await client.query<{ found: string | null }>('SELECT to_regclass($1)::text AS found', [marks]);
  if (rows[0]?.found) return 'exists';
  await client.query(`CREATE TABLE IF NOT EXISTS ${marks} ${PRUNE_MARKS_COLUMNS}`);
  return 'created';
}

/** `schema.<outbox>_prune_marks`, quoted. */
export function pruneMarksTable({ schema, name }: RelationRef): string {
  return `${pg.escapeIdentifier(schema)}.${pg.escapeIdentifier(`${name}_prune_marks`)}`;
}

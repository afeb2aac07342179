import type pg from 'pg';
import { RelayError } from '../errors.js';
import { COLUMN_ROLES, unmappedRole, type ColumnMap, type ColumnRole } from '../outbox-table.js';
import { columnShapes, tableOids, type CatalogColumn } from './catalog.js';
import type { RelationRef } from '../source/messages.js';

export interface ColumnMapTarget {
  readonly table: RelationRef;
  readonly columns: ColumnMap;
}

/** A column of an outbox table, as the checks of its column map and payload read it. */
export type TableColumn = CatalogColumn;

/**
 * Every table's columns in one catalog read (a schema per tenant is thousands of tables: two
 * queries a table made each start thousands of round trips), by the table (the same object); a
 * table that does not exist has none. Tables of the same columns share one array: whatever is
 * found of them can be found once (a schema per tenant: 10,000 tables, one array).
 */
export async function readTableColumns(client: pg.ClientBase, tables: readonly RelationRef[]): Promise<Map<RelationRef, readonly TableColumn[]>> {
  const oids = await tableOids(client, tables);
  const columnsOf = new Map<string, readonly TableColumn[]>();
  for (const shape of await columnShapes(client, oids.values())) {
    for (const relation of shape.relations) columnsOf.set(relation, shape.columns);
  }
  const none: readonly TableColumn[] = [];
  return new Map(tables.map((table) => [table, columnsOf.get(oids.get(table) ?? '') ?? none]));
}

/**
 * Says, from the table's columns (readTableColumns), how the relay maps them: which column plays each
 * role, which role has none, and which columns the relay ignores (a polling outbox's status,
 * attempts, sent_at...: read by nobody, written by nobody). A required role whose column is
 * missing is refused here (SETUP_TABLE, naming the variable) rather than as a dead letter per row;
 * the payload column's absence is left to checkPayloadColumn, whose refusal names the accepted types.
 */
export function describeColumnMap(target: ColumnMapTarget, rows: readonly TableColumn[]): string {
  const { schema, name } = target.table;
  const present = new Set(rows.map((row) => row.name));
  const unmapped = unmappedRole(target.columns, present, ['payload']);
  if (unmapped !== null) {
    throw new RelayError('SETUP_TABLE', `outbox table ${schema}.${name} ${unmapped.replace(/^it /, '')}`, { details: { table: `${schema}.${name}` } });
  }
  const mapped: string[] = [];
  const without: string[] = [];
  const used = new Set<string>();
  for (const [role, spec] of Object.entries(COLUMN_ROLES) as [ColumnRole, (typeof COLUMN_ROLES)[ColumnRole]][]) {
    const column = target.columns[role];
    if (column === null) {
      without.push(`${spec.becomes} (${spec.env} is empty)`);
      continue;
    }
    if (present.has(column)) {
      mapped.push(`${column} -> ${spec.becomes}`);
      used.add(column);
    } else if (!spec.required) {
      without.push(`${spec.becomes} (no column "${column}")`);
    }
  }
  const ignored = rows.map((row) => row.name).filter((column) => !used.has(column));
  return [
    mapped.join(', '),
    without.length > 0 ? `; none for ${without.join(', ')}` : '',
    `; ignored (never read, never written): ${ignored.length > 0 ? ignored.join(', ') : 'none'}`,
  ].join('');
}

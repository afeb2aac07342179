import type pg from 'pg';
import { RelayError } from '../errors.js';
import { COLUMN_ROLES, unmappedRole, type ColumnMap, type ColumnRole } from '../outbox-table.js';
import { qualifiedName } from '../outboxes.js';
import { columnsOf, tableOids } from './catalog.js';
import type { RelationRef } from '../source/messages.js';

export interface ColumnMapTarget {
  readonly table: RelationRef;
  readonly columns: ColumnMap;
}

/** A column of an outbox table, as the checks of its column map and payload read it. */
export interface TableColumn {
  readonly name: string;
  readonly typeOid: number;
  /** format_type: e.g. `jsonb`, `character varying(200)`. */
  readonly type: string;
  /** A domain's base type (null: not a domain). */
  readonly baseType: string | null;
}

/**
 * Every table's columns in one catalog read (a schema per tenant is thousands of tables: two
 * queries a table made each start thousands of round trips), by qualified name; a table that
 * does not exist has none.
 */
export async function readTableColumns(client: pg.ClientBase, tables: readonly RelationRef[]): Promise<Map<string, TableColumn[]>> {
  const oids = await tableOids(client, tables);
  const tableOf = new Map([...oids].map(([name, oid]) => [oid, name]));
  const columns = new Map<string, TableColumn[]>(tables.map((table) => [qualifiedName(table), []]));
  for (const { relation, name, typeOid, type, baseType } of await columnsOf(client, oids.values())) columns.get(tableOf.get(relation)!)!.push({ name, typeOid, type, baseType });
  return columns;
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

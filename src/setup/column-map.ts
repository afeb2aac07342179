import type pg from 'pg';
import { RelayError } from '../errors.js';
import type { ColumnMap, ColumnRole } from '../outbox-table.js';
import { qualifiedName } from '../outboxes.js';
import { columnsOf, tableOids } from './catalog.js';
import type { RelationRef } from '../source/messages.js';

/** What each role becomes on the record, and whether a row without its column can be published. */
const ROLES: Readonly<Record<ColumnRole, { readonly becomes: string; readonly required: boolean; readonly env: string }>> = {
  eventId: { becomes: 'header event_id', required: true, env: 'OUTBOX_COLUMN_EVENT_ID' },
  aggregateType: { becomes: 'header aggregate_type', required: true, env: 'OUTBOX_COLUMN_AGGREGATE_TYPE' },
  aggregateId: { becomes: 'the Kafka key', required: true, env: 'OUTBOX_COLUMN_AGGREGATE_ID' },
  eventType: { becomes: 'header event_type', required: true, env: 'OUTBOX_COLUMN_EVENT_TYPE' },
  // Required too, but refused by checkPayloadColumn, whose message also names the accepted types.
  payload: { becomes: 'the record value', required: false, env: 'OUTBOX_COLUMN_PAYLOAD' },
  headers: { becomes: 'extra headers', required: false, env: 'OUTBOX_COLUMN_HEADERS' },
  createdAt: { becomes: 'header created_at, and the pruner\'s age', required: false, env: 'OUTBOX_COLUMN_CREATED_AT' },
};

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
 * missing is refused here (SETUP_TABLE, naming the variable) rather than as a dead letter per row.
 */
export function describeColumnMap(target: ColumnMapTarget, rows: readonly TableColumn[]): string {
  const { schema, name } = target.table;
  const present = new Set(rows.map((row) => row.name));
  const mapped: string[] = [];
  const without: string[] = [];
  const used = new Set<string>();
  for (const [role, spec] of Object.entries(ROLES) as [ColumnRole, (typeof ROLES)[ColumnRole]][]) {
    const column = target.columns[role];
    if (column === null) {
      without.push(`${spec.becomes} (${spec.env} is empty)`);
      continue;
    }
    if (present.has(column)) {
      mapped.push(`${column} -> ${spec.becomes}`);
      used.add(column);
    } else if (spec.required) {
      const hint = role === 'aggregateType' ? '; a table without an aggregate type: set it empty' : '';
      throw new RelayError('SETUP_TABLE', `outbox table ${schema}.${name} has no column "${column}" (${spec.env}), which the relay needs for ${spec.becomes}; its columns are ${[...present].join(', ')}${hint}`, { details: { table: `${schema}.${name}`, column } });
    } else {
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

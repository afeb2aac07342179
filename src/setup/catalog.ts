import pg from 'pg';
import { likePatterns, qualifiedName, quotedName } from '../outboxes.js';
import type { RelationRef } from '../source/messages.js';

/**
 * Catalog reads over every outbox table (thousands with a schema per tenant) that stay linear in
 * the tables whatever Postgres believes about its own catalogs. Right after tenants are created
 * (a first setup, a burst of sign-ups) the catalogs' statistics still describe a catalog a
 * thousand times smaller, until autovacuum analyzes it; the planner then joins pg_class to
 * pg_namespace by a nested loop that compares every tenant's table with every tenant's schema.
 * Measured with 4,000 tenants on PostgreSQL 15: 5.1 s of a core for one listing of a pattern's
 * tables, 27 ms once analyzed. So each statement here reads one catalog, by oid or by name (a
 * scan or an index lookup, never a join the planner could choose badly), and the results are
 * put together here.
 *
 * Statements are sent as text with literals inlined: a replication connection (the stream's
 * checks) speaks only the simple query protocol. An oid is kept as text (it can pass 2^31).
 */

/** The oid of each relation that exists, by its name as to_regclass reads it (e.g. quotedName's); absent ones are missing from the map. */
export async function relationOids(client: pg.ClientBase, names: readonly string[]): Promise<Map<string, string>> {
  if (names.length === 0) return new Map();
  const { rows } = await client.query<{ name: string; oid: string | null }>(
    `SELECT w.name, to_regclass(w.name)::oid::text AS oid FROM unnest(ARRAY[${names.map((name) => pg.escapeLiteral(name)).join(', ')}]::text[]) AS w(name)`,
  );
  return new Map(rows.flatMap((row) => (row.oid === null ? [] : [[row.name, row.oid] as const])));
}

/** A table as a catalog listing found it, with its oid (a later lookup by name is not needed). */
export interface ListedTable extends RelationRef {
  readonly oid: string;
}

/** The oid of each of these tables that exists, by qualifiedName; a listed table's as listed, the others' looked up by name. */
export async function tableOids(client: pg.ClientBase, tables: readonly RelationRef[]): Promise<Map<string, string>> {
  const unlisted = tables.filter((table) => !('oid' in table));
  const names = unlisted.map(quotedName);
  const oids = await relationOids(client, names);
  const found = new Map(tables.flatMap((table) => ('oid' in table ? [[qualifiedName(table), (table as ListedTable).oid] as const] : [])));
  unlisted.forEach((table, index) => {
    const oid = oids.get(names[index]!);
    if (oid !== undefined) found.set(qualifiedName(table), oid);
  });
  return found;
}

/** The ordinary and partitioned tables a pattern names (a partition is not one: its root is; a prune marks table is none), in name order. */
export async function tablesMatching(client: pg.ClientBase, pattern: RelationRef): Promise<ListedTable[]> {
  const like = likePatterns(pattern);
  const { rows: schemas } = await client.query<{ oid: string; name: string }>(`SELECT oid::text, nspname AS name FROM pg_namespace WHERE nspname LIKE ${pg.escapeLiteral(like.schema)}`);
  if (schemas.length === 0) return [];
  const schemaOf = new Map(schemas.map((schema) => [schema.oid, schema.name]));
  const { rows } = await client.query<{ oid: string; namespace: string; name: string }>(
    `SELECT oid::text, relnamespace::text AS namespace, relname AS name FROM pg_class
      WHERE relnamespace = ANY(${oidArray(schemaOf.keys())}) AND relname LIKE ${pg.escapeLiteral(like.name)} AND relkind IN ('r', 'p') AND NOT relispartition
        AND relname NOT LIKE '%\\_prune\\_marks'`,
  );
  return rows
    .map((row) => ({ schema: schemaOf.get(row.namespace)!, name: row.name, oid: row.oid }))
    .sort((a, b) => compareText(a.schema, b.schema) || compareText(a.name, b.name));
}

/** Which of these relations (oids) satisfy `condition`, a predicate on pg_class's own columns; one scan of pg_class. */
export async function relationsWhere<Row extends object>(client: pg.ClientBase, select: string, oids: Iterable<string>, condition = 'true'): Promise<Row[]> {
  const list = [...oids];
  if (list.length === 0) return [];
  const { rows } = await client.query<Row>(`SELECT ${select} FROM pg_class WHERE oid = ANY(${oidArray(list)}) AND (${condition})`);
  return rows;
}

export interface CatalogColumn {
  readonly relation: string;
  readonly name: string;
  readonly typeOid: number;
  readonly type: string;
  readonly baseType: string | null;
}

/** The live columns of these relations (oids), in column order, each with its type and a domain's base type. */
export async function columnsOf(client: pg.ClientBase, oids: Iterable<string>): Promise<CatalogColumn[]> {
  const list = [...oids];
  if (list.length === 0) return [];
  const { rows } = await client.query<{ relation: string; name: string; type_oid: number; typmod: number }>(
    `SELECT attrelid::text AS relation, attname AS name, atttypid::int AS type_oid, atttypmod AS typmod
       FROM pg_attribute WHERE attrelid = ANY(${oidArray(list)}) AND attnum > 0 AND NOT attisdropped ORDER BY attrelid, attnum`,
  );
  // Each type named once (a schema per tenant repeats the same few types thousands of times:
  // format_type per column was 60% of this read with 10,000 tenants).
  const typeKey = (row: { type_oid: number; typmod: number }) => `${row.type_oid}:${row.typmod}`;
  const distinct = [...new Map(rows.map((row) => [typeKey(row), row])).values()];
  const { rows: named } = distinct.length === 0 ? { rows: [] } : await client.query<{ key: string; type: string }>(
    `SELECT t.oid || ':' || t.mod AS key, format_type(t.oid, t.mod) AS type FROM unnest('{${distinct.map((row) => row.type_oid).join(',')}}'::oid[], '{${distinct.map((row) => row.typmod).join(',')}}'::int[]) AS t(oid, mod)`,
  );
  const typeOf = new Map(named.map((row) => [row.key, row.type]));
  const typeOids = [...new Set(rows.map((row) => String(row.type_oid)))];
  const { rows: domains } = await client.query<{ oid: number; base_type: string }>(
    `SELECT oid::int, format_type(typbasetype, typtypmod) AS base_type FROM pg_type WHERE oid = ANY(${oidArray(typeOids)}) AND typtype = 'd'`,
  );
  const baseOf = new Map(domains.map((domain) => [domain.oid, domain.base_type]));
  return rows.map((row) => ({ relation: row.relation, name: row.name, typeOid: row.type_oid, type: typeOf.get(typeKey(row))!, baseType: baseOf.get(row.type_oid) ?? null }));
}

/** A literal oid array: a constant, which Postgres (14+) matches by a hash, not element by element. */
function oidArray(oids: Iterable<string>): string {
  return `'{${[...oids].join(',')}}'::oid[]`;
}

/** Code-point order: as Postgres orders the catalog's names (type `name` sorts bytewise). */
function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

import pg from 'pg';
import { likePatterns, quotedName } from '../outboxes.js';
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

/**
 * The oid of each of these tables that exists, by the table itself (the same object: no name
 * made per table, 10,000 of them with a schema per tenant); a listed table's as listed, the
 * others' looked up by name.
 */
export async function tableOids(client: pg.ClientBase, tables: readonly RelationRef[]): Promise<Map<RelationRef, string>> {
  const unlisted = tables.filter((table) => !('oid' in table));
  const names = unlisted.map(quotedName);
  const oids = await relationOids(client, names);
  const found = new Map<RelationRef, string>(tables.flatMap((table) => ('oid' in table ? [[table, (table as ListedTable).oid] as const] : [])));
  unlisted.forEach((table, index) => {
    const oid = oids.get(names[index]!);
    if (oid !== undefined) found.set(table, oid);
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

/** These relations (oids) by name, those that exist; a read of pg_class and one of pg_namespace (none when there are no oids). */
export async function relationNames(client: pg.ClientBase, oids: Iterable<string>): Promise<ListedTable[]> {
  const relations = await relationsWhere<{ oid: string; namespace: string; name: string }>(client, 'oid::text, relnamespace::text AS namespace, relname AS name', oids);
  if (relations.length === 0) return [];
  const { rows: schemas } = await client.query<{ oid: string; name: string }>(`SELECT oid::text, nspname AS name FROM pg_namespace WHERE oid = ANY(${oidArray(relations.map((row) => row.namespace))})`);
  const schemaOf = new Map(schemas.map((schema) => [schema.oid, schema.name]));
  return relations.map((row) => ({ schema: schemaOf.get(row.namespace)!, name: row.name, oid: row.oid }));
}

/** Which of these relations (oids) satisfy `condition`, a predicate on pg_class's own columns; one scan of pg_class. */
export async function relationsWhere<Row extends object>(client: pg.ClientBase, select: string, oids: Iterable<string>, condition = 'true'): Promise<Row[]> {
  const list = [...oids];
  if (list.length === 0) return [];
  const { rows } = await client.query<Row>(`SELECT ${select} FROM pg_class WHERE oid = ANY(${oidArray(list)}) AND (${condition})`);
  return rows;
}

/** A live column of a relation. */
export interface CatalogColumn {
  readonly name: string;
  readonly typeOid: number;
  /** format_type: e.g. `jsonb`, `character varying(200)`. */
  readonly type: string;
  /** A domain's base type (null: not a domain). */
  readonly baseType: string | null;
}

/** Relations (oids) of the same live columns, in column order, with their types: a column shape. */
export interface ColumnShape {
  readonly relations: readonly string[];
  readonly columns: readonly CatalogColumn[];
}

/**
 * The live columns of these relations (oids), each distinct list of columns once with the
 * relations that have it; a relation without any (or that does not exist) is in none. A schema
 * per tenant is 10,000 tables of the same 7 columns: read as a row per column, the 70,000 rows
 * cost the relay 100-200 ms of CPU at each start (their parsing, and their garbage); aggregated
 * here by Postgres, they are a row per shape, and each shape's columns are read once.
 */
export async function columnShapes(client: pg.ClientBase, oids: Iterable<string>): Promise<ColumnShape[]> {
  const list = [...oids];
  if (list.length === 0) return [];
  // JSON: any column name spelled without ambiguity, a text Postgres can group the tables by (an
  // oid is a JSON string: it can pass 2^31).
  const { rows } = await client.query<{ columns: string; relations: string }>(
    `SELECT columns, string_agg(relation, ',') AS relations FROM (
       SELECT attrelid::text AS relation, json_agg(json_build_array(attname, atttypid, atttypmod) ORDER BY attnum)::text AS columns
         FROM pg_attribute WHERE attrelid = ANY(${oidArray(list)}) AND attnum > 0 AND NOT attisdropped GROUP BY attrelid) AS tables
      GROUP BY columns`,
  );
  const shapes = rows.map((row) => ({ relations: row.relations.split(','), columns: (JSON.parse(row.columns) as [string, string, number][]).map(([name, typeOid, typmod]) => ({ name, typeOid: Number(typeOid), typmod })) }));
  const all = shapes.flatMap((shape) => shape.columns);
  // Each type named once (a schema per tenant repeats the same few types thousands of times:
  // format_type per column was 60% of this read with 10,000 tenants).
  const typeKey = (column: { typeOid: number; typmod: number }) => `${column.typeOid}:${column.typmod}`;
  const distinct = [...new Map(all.map((column) => [typeKey(column), column])).values()];
  const { rows: named } = distinct.length === 0 ? { rows: [] } : await client.query<{ key: string; type: string }>(
    `SELECT t.oid || ':' || t.mod AS key, format_type(t.oid, t.mod) AS type FROM unnest('{${distinct.map((column) => column.typeOid).join(',')}}'::oid[], '{${distinct.map((column) => column.typmod).join(',')}}'::int[]) AS t(oid, mod)`,
  );
  const typeOf = new Map(named.map((row) => [row.key, row.type]));
  const typeOids = [...new Set(all.map((column) => String(column.typeOid)))];
  const { rows: domains } = typeOids.length === 0 ? { rows: [] } : await client.query<{ oid: number; base_type: string }>(
    `SELECT oid::int, format_type(typbasetype, typtypmod) AS base_type FROM pg_type WHERE oid = ANY(${oidArray(typeOids)}) AND typtype = 'd'`,
  );
  const baseOf = new Map(domains.map((domain) => [domain.oid, domain.base_type]));
  return shapes.map(({ relations, columns }) => ({
    relations,
    columns: columns.map((column) => ({ name: column.name, typeOid: column.typeOid, type: typeOf.get(typeKey(column))!, baseType: baseOf.get(column.typeOid) ?? null })),
  }));
}

/** A literal oid array: a constant, which Postgres (14+) matches by a hash, not element by element. */
function oidArray(oids: Iterable<string>): string {
  return `'{${[...oids].join(',')}}'::oid[]`;
}

/** Code-point order: as Postgres orders the catalog's names (type `name` sorts bytewise). */
function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

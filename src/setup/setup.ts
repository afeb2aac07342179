import { readFile } from 'node:fs/promises';
import pg from 'pg';
import { connectPostgres, overriddenSessionSettings, SESSION_SETTINGS, type DatabaseAccess } from '../pg-connection.js';
import { RelayError, sqlState } from '../errors.js';
import { ensurePruneMarks, pruneMarksTable } from '../prune/marks.js';
import { postgresFailure } from '../source/connection-errors.js';
import type { ColumnMap } from '../outbox-table.js';
import { matchesPattern, qualifiedName, quotedName } from '../outboxes.js';
import { ensureTenantTrigger, tenantTriggerName } from './outbox-tables.js';
import { relationNames, relationsWhere, tableOids, tablesMatching } from './catalog.js';
import type { RelationRef } from '../source/messages.js';
import { slotMissing } from '../source/slot-errors.js';
import { describeColumnMap, readTableColumns, type TableColumn } from './column-map.js';
import { recordSlotCreated, slotHistory } from './slot-history.js';
import { refuseDuringRecovery } from './recovery-marker.js';
import { ROLES, rolesSql } from './roles.js';
import { checkPayloadColumn, type PayloadColumnTarget } from './payload-column.js';
import { checkStandby, createStandbySlot, noFailoverOnStandby } from './standby-slot.js';
import type { SlotServer } from '../slot-server.js';
import { alignFailover, createSlot, describe, failoverFinding, serverVersion, standbySlotsFinding, wantsFailover, type SlotFailover } from './failover-slot.js';

/** An outbox table to set up; its column map, when given, is checked against it and reported, and the payload column's type too. */
export interface SetupTable {
  readonly table: RelationRef;
  readonly columns?: ColumnMap;
  /** Its outbox's format, when known (`setup` reads no OUTBOX_FORMAT: then it says what each would do). */
  readonly format?: PayloadColumnTarget['format'];
  /** The pattern it was found by (a tenant's table); absent for a table named outright. */
  readonly pattern?: RelationRef;
}

/** Every table a pattern names (a schema per tenant), with the column map they share. */
export interface SetupPattern {
  readonly pattern: RelationRef;
  readonly columns?: ColumnMap;
  readonly format?: PayloadColumnTarget['format'];
}

export interface SetupTarget {
  readonly database: DatabaseAccess;
  /** Every outbox table and pattern (OUTBOX_SOURCES', or OUTBOX_TABLE): the one publication covers them all, inserts only. */
  readonly outboxes: readonly (SetupTable | SetupPattern)[];
  readonly publication: string;
  readonly slot: string;
  /** OUTBOX_SLOT_FAILOVER (default auto: a failover slot on Postgres 17+). */
  readonly failover?: SlotFailover;
  /** Where the slot lives (default: the primary, `database`); a standby's is made there, the rest on the primary. */
  readonly slotServer?: SlotServer;
}

/** What setup, or the checks before streaming, did and found. */
export interface SetupReport {
  /** One line each: what was made, found, repaired. */
  readonly lines: readonly string[];
  /**
   * Tenants' tables (a pattern's) the relay cannot stream, by qualified name, with the reason:
   * quarantined, while every other outbox streams on. A table named outright is refused instead
   * (SETUP_TABLE): it is the operator's own declaration.
   */
  readonly quarantined: ReadonlyMap<string, string>;
}

const OUTBOX_SQL = new URL('../../sql/001_event_outbox.sql', import.meta.url);

/**
 * Makes the database ready for the relay, idempotently: outbox table, publication (inserts of
 * the outbox table only) and logical slot. Returns what it did and found, one line each; checks
 * what already exists and refuses, with the reason, a shape the relay cannot run safely on
 * (before the slot exists: a slot holds WAL).
 */
export async function setup(setupTarget: SetupTarget, slot: 'create' | 'none' = 'create'): Promise<SetupReport> {
  return withClient(setupTarget.database, async (client) => {
    await checkServer(client);
    const target = await resolve(client, setupTarget);
    // OUTBOX_SLOT_FAILOVER=true on a server before 17 is refused before anything is made.
    const version = await serverVersion(client);
    const failover = target.slotServer?.standby ? noFailoverOnStandby(target.failover ?? 'auto') : wantsFailover(target.failover ?? 'auto', version);
    const actions: string[] = [];
    // `cutover` itself runs these steps again after an unfinished cutover.
    if (slot === 'create') await refuseDuringRecovery(client, outboxTables(target), 'set up');
    const step = <T>(what: string, work: () => Promise<T>) => asOwner(client, what, work);
    // A pattern's tables are the tenants' migrations to make: only a table named outright is created.
    for (const { table } of target.named) actions.push(await step(`create the outbox table ${qualifiedName(table)}`, () => ensureTable(client, table)));
    // Made here, by the owner: a least-privilege pruner may not create tables.
    for (const { table } of target.tables) actions.push(await step('create the prune marks table', async () => `prune marks table ${pruneMarksTable(table)}: ${await ensurePruneMarks(client, table)}`));
    actions.push(...(await step(`create the publication ${target.publication}`, () => ensurePublication(client, target))));
    const trigger = await step(`create the event trigger that keeps ${target.publication} on its tenants' tables`, () => ensureTenantTrigger(client, target.publication, target.patterns, target.named.map(({ table }) => table)));
    if (trigger) actions.push(trigger);
    for (const pattern of target.patterns) actions.push(`tables ${qualifiedName(pattern)}: ${target.tables.filter(({ table }) => matchesPattern(pattern, table) && !target.named.some((named) => named.table === table)).length} found`);
    const found = await findings(client, target);
    actions.push(...found.lines);
    // `cutover` makes the slot itself, with the snapshot it publishes the pending rows in.
    if (slot === 'create') actions.push(...(await ensureSlot(client, target, failover, version)));
    return { lines: actions, quarantined: found.quarantined };
  });
}

/**
 * A setup step that needs ownership (a table in the schema, a publication of the table): a
 * refusal says so, instead of Postgres's bare "permission denied".
 */
async function asOwner<T>(client: pg.Client, what: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (sqlState(error) !== '42501') throw error;
    throw new RelayError(
      'SETUP_PRIVILEGE',
      `role "${await currentUser(client)}" may not ${what} (${(error as Error).message}): run \`outbox-relay setup\` once as the owner of the schema and table, or a superuser; the relay itself then needs only LOGIN REPLICATION and SELECT (\`setup --print-roles\`)`,
      { cause: error },
    );
  }
}

/**
 * sql/003_roles.sql for each outbox table, applied: the relay's, the pruner's and the writers'
 * roles. A pattern's tables as they are now: a tenant's table made later gets its grants from
 * its own migration (docs/outboxes.md#a-schema-per-tenant).
 */
export async function createRoles(target: SetupTarget): Promise<string[]> {
  return withClient(target.database, async (client) => {
    try {
      for (const { table } of (await resolve(client, target)).tables) await client.query(await rolesSql(table));
    } catch (error) {
      throw postgresFailure(error);
    }
    return Object.values(ROLES).map((role) => `role ${role}: created or updated (see \`setup --print-roles\`)`);
  });
}

/** The SQL of createRoles, printed (`setup --print-roles`). */
export async function printRoles(target: SetupTarget): Promise<string> {
  // Without a pattern there is nothing to look up: printed without a connection.
  if (target.outboxes.every((outbox) => 'table' in outbox)) return (await Promise.all(target.outboxes.map((outbox) => rolesSql((outbox as SetupTable).table)))).join('');
  return withClient(target.database, async (client) => {
    let sql = '';
    for (const { table } of (await resolve(client, target)).tables) sql += await rolesSql(table);
    return sql;
  });
}

/**
 * The checks `run` makes before streaming, creating nothing; returns what it found. A tenant's
 * table that cannot be streamed is quarantined, not refused: one tenant's DDL never stops the
 * others. A table the publication covers that no outbox names (a tenant renamed out of the
 * pattern while the event trigger was off) is reported and its inserts ignored.
 */
export async function verify(setupTarget: SetupTarget): Promise<SetupReport> {
  return withClient(setupTarget.database, async (client) => {
    await checkServer(client);
    const target = await resolve(client, setupTarget);
    if (target.patterns.length > 0) {
      const { rows } = await client.query('SELECT 1 FROM pg_event_trigger WHERE evtname = $1 AND evtenabled <> $2', [tenantTriggerName(target.publication), 'D']);
      if (rows.length === 0) throw new RelayError('SETUP_PUBLICATION', `the event trigger ${tenantTriggerName(target.publication)} is missing or disabled: a new tenant's outbox table would not join the publication, and its rows would never reach the relay; run \`outbox-relay setup\``);
    }
    for (const { table } of target.named) {
      if (!(await tableExists(client, table))) throw new RelayError('SETUP_TABLE', `outbox table ${qualifiedName(table)} does not exist; run \`outbox-relay setup\``);
    }
    const publication = await checkPublication(client, target);
    if (publication === 'absent') throw new RelayError('SETUP_PUBLICATION', `publication "${target.publication}" does not exist; run \`outbox-relay setup\``);
    const missingNamed = publication.missing.filter((table) => !isTenantTable(target, table));
    if (missingNamed.length > 0) {
      throw new RelayError('SETUP_PUBLICATION', `publication "${target.publication}" does not cover the outbox ${missingNamed.map(qualifiedName).join(', ')} yet: their inserts would never reach the relay; run \`outbox-relay setup\` (it adds them)`);
    }
    // The stream checks it too, before each session's START_REPLICATION: a recover begun after
    // this check is caught there. Here it comes before the findings, which a recover makes moot.
    await refuseDuringRecovery(client, outboxTables(target), 'stream');
    const found = await findings(client, target);
    const quarantined = new Map(found.quarantined);
    for (const table of publication.missing) {
      quarantined.set(qualifiedName(table), notPublished(target, table));
    }
    const lines = [...publicationLines(target, publication), ...found.lines];
    if (target.slotServer?.standby) {
      noFailoverOnStandby(target.failover ?? 'auto');
      const standby = await withClient(target.slotServer.database, (replica) => checkStandby(client, replica));
      return { lines: [...lines, ...standby], quarantined };
    }
    const slot = await failoverFinding(client, target.slot, target.failover ?? 'auto');
    return { lines: [...lines, ...(slot ? [slot] : [])], quarantined };
  });
}

/**
 * The outbox tables the relay cannot stream, by qualified name with the reason (`status`): a
 * tenant's table as `run` quarantines it, and a named one as `run` would refuse it (a named
 * table that does not exist included); nothing is refused here.
 */
export async function findQuarantined(setupTarget: SetupTarget): Promise<ReadonlyMap<string, string>> {
  return withClient(setupTarget.database, async (client) => {
    const target = await resolve(client, setupTarget);
    const quarantined = new Map<string, string>();
    for (const { table } of target.named) {
      if (!(await tableExists(client, table))) quarantined.set(qualifiedName(table), `outbox table ${qualifiedName(table)} does not exist; run \`outbox-relay setup\``);
    }
    const publication = await checkPublication(client, target).catch((error: unknown) => {
      if (error instanceof RelayError) return error;
      throw error;
    });
    if (publication !== 'absent' && !(publication instanceof RelayError)) {
      for (const table of publication.missing) quarantined.set(qualifiedName(table), notPublished(target, table));
    }
    const existing = { ...target, tables: target.tables.filter(({ table }) => !quarantined.has(qualifiedName(table))) };
    for (const [table, reason] of (await findings(client, existing, true)).quarantined) quarantined.set(table, reason);
    return quarantined;
  });
}

/** What the start says of a publication that covers tables no outbox names: their inserts are ignored. */
function publicationLines(target: Resolved, publication: PublicationFound): string[] {
  if (publication.strangers.length === 0) return [];
  return [`publication ${target.publication} covers ${publication.strangers.map(qualifiedName).join(', ')}, which no outbox of this relay names (a tenant renamed out of the pattern?): their inserts are ignored; \`outbox-relay setup\` removes ${publication.strangers.length === 1 ? 'it' : 'them'} from the publication`];
}

function notPublished(target: Resolved, table: RelationRef): string {
  return `outbox table ${qualifiedName(table)} is not in the publication "${target.publication}": its inserts never reach the relay; \`outbox-relay setup\` adds it`;
}

/** Whether `table` is a tenant's (found by a pattern), not one named outright. */
function isTenantTable(target: Resolved, table: RelationRef): boolean {
  return !target.named.some((named) => qualifiedName(named.table) === qualifiedName(table));
}

/**
 * Each table's column map and payload type (a named table refused unless publishable, a
 * tenant's quarantined), from one read of every table's columns, and session settings the relay
 * overrides. A pattern's tables alike are one line each way (a schema per tenant: not a line per
 * tenant at every start).
 */
async function findings(client: pg.Client, target: Resolved, quarantineNamed = false): Promise<SetupReport> {
  const lines: string[] = [];
  const quarantined = new Map<string, string>();
  const columnsOf = await readTableColumns(client, target.tables.map(({ table }) => table));
  /** A pattern's tables alike (the same mapping and payload line): how many each line stands for. */
  const alike = new Map<string, { readonly pattern: RelationRef; readonly mapping: string; readonly payload: string; tables: number }>();
  /**
   * What a pattern's tables of the same columns (the array readTableColumns gives them all) were
   * found to be, by pattern: described once, not once per tenant (with 10,000 tenants, a fifth of
   * the start's CPU). Only what was accepted: a refusal names its table.
   */
  const described = new Map<RelationRef, Map<readonly TableColumn[], { tables: number }>>();
  for (const { table, columns, format, pattern } of target.tables) {
    if (!columns) continue;
    const found = columnsOf.get(table) ?? [];
    const known = pattern && described.get(pattern)?.get(found);
    if (known) {
      known.tables += 1;
      continue;
    }
    let mapping: string;
    let payload: string;
    try {
      mapping = describeColumnMap({ table, columns }, found);
      payload = checkPayloadColumn({ table, format, payloadColumn: columns.payload }, found);
    } catch (error) {
      if ((!pattern && !quarantineNamed) || !(error instanceof RelayError) || error.code !== 'SETUP_TABLE') throw error;
      quarantined.set(qualifiedName(table), error.message);
      continue;
    }
    if (!pattern) {
      lines.push(`columns of ${qualifiedName(table)}: ${mapping}`, payload);
      continue;
    }
    // Tables of other columns may still read alike (a column the relay ignores): one line for them all.
    const key = JSON.stringify([qualifiedName(pattern), mapping, payload]);
    const line = alike.get(key) ?? { pattern, mapping, payload, tables: 0 };
    alike.set(key, line);
    line.tables += 1;
    described.set(pattern, (described.get(pattern) ?? new Map()).set(found, line));
  }
  for (const { pattern, mapping, payload, tables } of alike.values()) {
    lines.push(`columns of ${tables} ${tables === 1 ? 'table' : 'tables'} of ${qualifiedName(pattern)}: ${mapping}`, `${payload} (in ${tables === 1 ? 'it' : 'each'})`);
  }
  const { source, settings } = overriddenSessionSettings(target.database);
  if (settings.length > 0) {
    lines.push(`${source} set ${settings.join(', ')}: the relay's connections use its own (${settings.map((name) => `${name}=${SESSION_SETTINGS[name]}`).join(', ')}), on which what it publishes depends`);
  }
  return { lines, quarantined };
}

/** A target with its patterns' tables found: every table setup and run check, named or a tenant's. */
interface Resolved extends SetupTarget {
  readonly named: readonly SetupTable[];
  readonly patterns: readonly RelationRef[];
  readonly tables: readonly SetupTable[];
}

async function resolve(client: pg.Client, target: SetupTarget): Promise<Resolved> {
  const named = target.outboxes.filter((outbox): outbox is SetupTable => 'table' in outbox);
  const patterns = target.outboxes.filter((outbox): outbox is SetupPattern => 'pattern' in outbox);
  const tables: SetupTable[] = [...named];
  // By oid: a listed table comes with its own, and no name is made per tenant's table.
  const known = new Set(patterns.length === 0 ? [] : (await tableOids(client, named.map(({ table }) => table))).values());
  for (const { pattern, columns, format } of patterns) {
    for (const table of await tablesMatching(client, pattern)) {
      // A table named outright keeps its own column map and format (and the first pattern naming a table has it).
      if (known.has(table.oid)) continue;
      known.add(table.oid);
      tables.push({ table, pattern, ...(columns && { columns }), ...(format && { format }) });
    }
  }
  return { ...target, named, patterns: patterns.map(({ pattern }) => pattern), tables };
}

/** The named tables and the patterns, as a handover's mark is looked for: one catalog read however many tenants. */
function outboxTables(target: Resolved): RelationRef[] {
  return [...target.named.map(({ table }) => table), ...target.patterns];
}

async function withClient<T>(database: DatabaseAccess, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = await connectPostgres(database, 'outbox-relay-setup', { queryTimeoutMs: 0 });
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

async function checkServer(client: pg.Client): Promise<void> {
  const { rows } = await client.query<{ wal_level: string; replication: boolean }>(
    `SELECT current_setting('wal_level') AS wal_level,
            (SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user) AS replication`,
  );
  const row = rows[0]!;
  if (row.wal_level !== 'logical') {
    throw new RelayError('SETUP_WAL_LEVEL', `wal_level is "${row.wal_level}"; logical replication needs wal_level = logical (ALTER SYSTEM SET wal_level = logical; then restart Postgres)`);
  }
  if (!row.replication) {
    throw new RelayError('SETUP_PRIVILEGE', `role "${await currentUser(client)}" lacks the REPLICATION attribute (ALTER ROLE ... WITH REPLICATION)`);
  }
}

async function currentUser(client: pg.Client): Promise<string> {
  const { rows } = await client.query<{ user: string }>('SELECT current_user AS user');
  return rows[0]!.user;
}

async function tableExists(client: pg.Client, table: RelationRef): Promise<boolean> {
  const { rows } = await client.query('SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = $2', [table.schema, table.name]);
  return rows.length > 0;
}

async function ensureTable(client: pg.Client, table: RelationRef): Promise<string> {
  if (await tableExists(client, table)) return `table ${qualifiedName(table)}: exists`;
  const template = await readFile(OUTBOX_SQL, 'utf8');
  const sql = template
    .replace(/\bevent_outbox_created_at_idx\b/g, pg.escapeIdentifier(`${table.name}_created_at_idx`))
    .replace(/\bevent_outbox\b/g, quotedName(table));
  await client.query(sql);
  return `table ${qualifiedName(table)}: created`;
}

/**
 * The outbox tables that are partitioned (pruned by dropping old partitions), in one catalog
 * read: such a table is published under its own name only with publish_via_partition_root,
 * otherwise each insert would arrive as its partition's. `oids`: the tables' as tableOids found them.
 */
async function anyPartitioned(client: pg.Client, target: Resolved, oids?: ReadonlyMap<RelationRef, string>): Promise<RelationRef[]> {
  const tables = target.tables.map(({ table }) => table);
  const found = oids ?? (await tableOids(client, tables));
  const partitioned = new Set((await relationsWhere<{ oid: string }>(client, 'oid::text', found.values(), "relkind = 'p'")).map((row) => row.oid));
  return tables.filter((table) => partitioned.has(found.get(table) ?? ''));
}

function publicationOptions(partitioned: boolean): string {
  return partitioned ? "publish = 'insert', publish_via_partition_root = true" : "publish = 'insert'";
}

interface PublicationRow {
  oid: string;
  pubviaroot: boolean;
  puballtables: boolean;
  pubinsert: boolean;
  pubupdate: boolean;
  pubdelete: boolean;
  pubtruncate: boolean;
  /** The oids of the tables added to it, comma-separated (null: none). */
  tables: string | null;
  /** Postgres 15+: a publication may also cover whole schemas (FOR TABLES IN SCHEMA). */
  by_schema_possible: boolean;
}

/** A publication as found: the outbox tables it does not cover yet, and the tables it covers that no outbox names. */
interface PublicationFound {
  readonly missing: readonly RelationRef[];
  /** Only with a pattern (a tenant renamed out of it): without one, such a publication is refused. */
  readonly strangers: readonly RelationRef[];
}

/**
 * The tables (oids) a publication covers. Read from pg_publication_rel, a row per table added
 * to it, and not from pg_publication_tables, which expands every table and joins the catalogs
 * (with 10,000 tenants: 130 ms of Postgres at each start, and an array of 10,000 names for the
 * relay to parse); only a publication that also covers whole schemas is expanded by Postgres.
 * A partitioned table is its own oid (as added), not its partitions'.
 */
async function publishedTables(client: pg.Client, publication: PublicationRow, name: string): Promise<Set<string>> {
  let tables = publication.tables;
  if (publication.by_schema_possible) {
    const { rows } = await client.query<{ tables: string | null }>(
      `SELECT string_agg(relid::text, ',') AS tables FROM pg_get_publication_tables(${pg.escapeLiteral(name)})
        WHERE EXISTS (SELECT 1 FROM pg_publication_namespace WHERE pnpubid = ${publication.oid})`,
    );
    tables = rows[0]?.tables ?? tables;
  }
  return new Set(tables === null ? [] : tables.split(','));
}

/**
 * 'absent', or what it misses (an outbox added to the configuration, a tenant's table that never
 * joined: setup adds them) and covers beyond the outboxes; throws if it exists with a shape the
 * relay cannot use. A publication of tenants' tables is the relay's own: a table in it that no
 * outbox names is a tenant that left the pattern (renamed while the event trigger was off, or
 * before it followed renames), reported, not refused. Without a pattern such a table is refused:
 * the publication may be someone else's.
 */
async function checkPublication(client: pg.Client, target: Resolved): Promise<'absent' | PublicationFound> {
  const { rows } = await client.query<PublicationRow>(
    `SELECT p.oid::text, p.pubviaroot, p.puballtables, p.pubinsert, p.pubupdate, p.pubdelete, p.pubtruncate,
            (SELECT string_agg(r.prrelid::text, ',') FROM pg_publication_rel r WHERE r.prpubid = p.oid) AS tables,
            to_regclass('pg_catalog.pg_publication_namespace') IS NOT NULL AS by_schema_possible
       FROM pg_publication p WHERE p.pubname = $1`,
    [target.publication],
  );
  const publication = rows[0];
  if (!publication) return 'absent';
  const published = await publishedTables(client, publication, target.publication);
  const tables = target.tables.map(({ table }) => table);
  const oids = await tableOids(client, tables);
  const outboxOids = new Set(oids.values());
  // A tenant's table the trigger added after this setup found the pattern's tables is no stranger.
  const others = (await relationNames(client, [...published].filter((oid) => !outboxOids.has(oid))))
    .filter((table) => !target.patterns.some((pattern) => matchesPattern(pattern, table)))
    .sort((a, b) => (qualifiedName(a) < qualifiedName(b) ? -1 : 1));
  const expected = () => tables.map(qualifiedName).sort();
  const problems: string[] = [];
  if (publication.puballtables) problems.push('it is FOR ALL TABLES');
  else if (others.length > 0 && target.patterns.length === 0) problems.push(`it covers [${others.map(qualifiedName).join(', ')}], which ${others.length === 1 ? 'is no outbox' : 'are no outboxes'} of this relay (expected exactly [${expected().join(', ')}])`);
  const operations = (['update', 'delete', 'truncate'] as const).filter((op) => publication[`pub${op}`]);
  if (operations.length > 0) problems.push(`it publishes ${operations.join(', ')} (expected insert only)`);
  if (!publication.pubinsert) problems.push('it does not publish insert');
  const partitioned = await anyPartitioned(client, target, oids);
  if (partitioned.length > 0 && !publication.pubviaroot) problems.push(`${partitioned.map(qualifiedName).join(', ')} ${partitioned.length === 1 ? 'is' : 'are'} partitioned and the publication sends inserts under each partition's name (publish_via_partition_root is off)`);
  if (problems.length > 0) {
    throw new RelayError(
      'SETUP_PUBLICATION',
      `publication "${target.publication}" cannot be used: ${problems.join('; ')}. ` +
        `Expected: CREATE PUBLICATION ${target.publication} FOR TABLE ${expected().join(', ')} WITH (${publicationOptions(partitioned.length > 0)})`,
    );
  }
  return { missing: tables.filter((table) => !published.has(oids.get(table) ?? '')), strangers: others };
}

/**
 * Adds outbox tables to the publication. A table's inserts are decoded only from the WAL after
 * it was added, so a named table that already holds rows is refused: those rows would never be
 * streamed. A tenant's table with rows (one renamed into the pattern, or made while the event
 * trigger was off) is added, and the line says how to publish what it held: refusing it would
 * stop every tenant's setup, and leaving it out would lose its next rows too.
 */
async function addToPublication(client: pg.Client, target: Resolved, tables: readonly RelationRef[]): Promise<string[]> {
  const lines: string[] = [];
  for (const table of tables) {
    const { rows } = await client.query(`SELECT 1 FROM ${quotedName(table)} LIMIT 1`);
    if (rows.length === 0) continue;
    if (!isTenantTable(target, table)) {
      throw new RelayError(
        'SETUP_CUTOVER_NEEDED',
        `outbox table ${qualifiedName(table)} holds rows and is not in the publication "${target.publication}" yet: added now, only rows inserted after it would be streamed. ` +
          'Stream it with its own OUTBOX_TABLE and slot until it is drained (or take it over with `outbox-relay cutover`), or empty it, then add it to OUTBOX_SOURCES and run setup again',
        { details: { table: qualifiedName(table), publication: target.publication } },
      );
    }
    lines.push(`publication ${target.publication}: tenant table ${qualifiedName(table)} already held rows when it joined: they were never streamed; if they are events, publish them with \`outbox-relay replay\` (OUTBOX_SOURCES holding that table alone, with --since)`);
  }
  await client.query(`ALTER PUBLICATION ${pg.escapeIdentifier(target.publication)} ADD TABLE ${tables.map(quotedName).join(', ')}`);
  return [`publication ${target.publication}: added ${tables.map(qualifiedName).join(', ')} (inserts from now on)`, ...lines];
}

/** Creates the publication, or brings it to the outboxes: adds what it misses, removes tenants' tables that left the pattern. */
async function ensurePublication(client: pg.Client, target: Resolved): Promise<string[]> {
  const found = await checkPublication(client, target);
  if (found !== 'absent') {
    const lines: string[] = [];
    if (found.strangers.length > 0) {
      await client.query(`ALTER PUBLICATION ${pg.escapeIdentifier(target.publication)} DROP TABLE ${found.strangers.map(quotedName).join(', ')}`);
      lines.push(`publication ${target.publication}: removed ${found.strangers.map(qualifiedName).join(', ')} (no outbox of this relay names ${found.strangers.length === 1 ? 'it' : 'them'} any more: left the pattern)`);
    }
    if (found.missing.length > 0) lines.push(...(await addToPublication(client, target, found.missing)));
    return lines.length > 0 ? lines : [`publication ${target.publication}: exists`];
  }
  const partitioned = await anyPartitioned(client, target);
  const names = target.tables.map(({ table }) => qualifiedName(table)).join(', ') || 'none yet';
  // A pattern whose tenants are all still to come: an empty publication, the trigger adds them.
  const tables = target.tables.length === 0 ? '' : ` FOR TABLE ${target.tables.map(({ table }) => quotedName(table)).join(', ')}`;
  await client.query(`CREATE PUBLICATION ${pg.escapeIdentifier(target.publication)}${tables} WITH (${publicationOptions(partitioned.length > 0)})`);
  const throughRoot = partitioned.length === 0 ? '' : target.tables.length === 1 ? ', published as the partitioned table' : `; ${partitioned.map(qualifiedName).join(', ')} published as partitioned tables`;
  return [`publication ${target.publication}: created (inserts into ${names}${throughRoot})`];
}

async function ensureSlot(client: pg.Client, target: Resolved, failover: boolean, version: number): Promise<string[]> {
  if (target.slotServer?.standby) {
    const { slotServer } = target;
    return withClient(slotServer.database, async (standby) => {
      const found = await checkStandby(client, standby);
      const made = await ensurePlainSlot(client, standby, target, async () => `slot ${target.slot}: created on the standby at ${await createStandbySlot(standby, client, target.slot)}`);
      return [...found, made ?? `slot ${target.slot}: exists (on the standby)`];
    });
  }
  const made = await ensurePlainSlot(client, client, target, async () => `slot ${target.slot}: created at ${await createSlot(client, target.slot, failover, version)}${version >= 170_000 ? ` (${describe(failover)})` : ''}`);
  // Before 17 there is nothing to align: no slot is a failover slot.
  const lines = [made ?? (version >= 170_000 ? await alignFailover(target.database, client, target.slot, failover) : `slot ${target.slot}: exists`)];
  if (failover) lines.push(await standbySlotsFinding(client));
  return lines;
}

/**
 * Creates the slot on `slotClient` (the primary, or the standby of OUTBOX_REPLICA_URL) if
 * missing and returns what it did; null if it exists (and is usable). The outbox tables and the
 * slot history are read on the primary (`client`).
 */
async function ensurePlainSlot(client: pg.Client, slotClient: pg.Client, target: Resolved, create: () => Promise<string>): Promise<string | null> {
  const { rows } = await slotClient.query<{ plugin: string; database: string; current: string; wal_status: string | null }>(
    'SELECT plugin, database, current_database() AS current, wal_status FROM pg_replication_slots WHERE slot_name = $1',
    [target.slot],
  );
  const slot = rows[0];
  if (slot) {
    if (slot.plugin !== 'pgoutput' || slot.database !== slot.current) {
      throw new RelayError('SETUP_PUBLICATION', `replication slot "${target.slot}" exists with plugin ${slot.plugin} on database ${slot.database}; expected pgoutput on ${slot.current}`);
    }
    if (slot.wal_status === 'lost') throw new RelayError('SOURCE_SLOT_LOST', `replication slot "${target.slot}" is lost (wal_status lost); \`outbox-relay recover\` re-creates it and publishes again what it may not have delivered`);
    return null;
  }
  // A new slot starts at the current WAL position: rows already in the table would never be
  // streamed. With rows there, either a slot was lost or dropped (recover), or this is the first
  // start on a polling relay's table (cutover): the slot history tells which.
  for (const { table } of target.tables) {
    const { rows: retained } = await client.query<{ n: string }>(`SELECT count(*) AS n FROM (SELECT 1 FROM ${quotedName(table)} LIMIT 1000000) AS retained`);
    const rowCount = Number(retained[0]!.n);
    if (rowCount === 0) continue;
    const rows = rowCount >= 1_000_000 ? 'over a million' : String(rowCount);
    const history = await slotHistory(client, { ...target, table });
    if (!history.existed) throw firstStartOnRows(target, table, rows);
    throw slotMissing(target.slot, `and the outbox ${qualifiedName(table)} holds ${rows} rows that a new slot would never stream (a slot existed before: ${history.evidence})`);
  }
  const made = await create();
  const unrecorded = await recordSlotCreated(client, target.publication, target.slot);
  return `${made}${unrecorded ? `; ${unrecorded}` : ''}`;
}

/**
 * A table with rows and no slot ever made for it: a team moving off a polling relay. Refused as
 * SETUP_CUTOVER_NEEDED: a new slot would stream only what commits after it, and recover would
 * publish every row the poller already sent.
 */
function firstStartOnRows(target: SetupTarget, table: RelationRef, rows: string): RelayError {
  return new RelayError(
    'SETUP_CUTOVER_NEEDED',
    `outbox table ${qualifiedName(table)} holds ${rows} rows and no slot "${target.slot}" was ever made for it (a first start on a table a polling relay fills?). ` +
      `A slot made now would stream only rows committed after it: rows the poller has not sent yet would be skipped. ` +
      `\`outbox-relay cutover --pending "<condition of unsent rows, e.g. status = 'pending'>" --dry-run\` says how many rows the relay would publish; ` +
      `without --dry-run it creates the slot and publishes them, the poller may keep running meanwhile (docs/moving-from-polling.md). ` +
      `If a slot did exist before and was dropped, \`outbox-relay recover\` publishes every retained row instead`,
    { details: { table: qualifiedName(table), slot: target.slot } },
  );
}

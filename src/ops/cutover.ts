import pg from 'pg';
import type { Logger } from 'pino';
import type { DeliveryOptions } from '../delivery-chain.js';
import type { TableReading } from '../decode/column-parsers.js';
import type { PayloadEncoders } from '../encode/create-encoder.js';
import { RelayError } from '../errors.js';
import { readSlot } from '../observe/slot-monitor.js';
import { outboxTableRefs, qualifiedName, quotedName } from '../outboxes.js';
import { serverVersion, wantsFailover, type SlotFailover } from '../setup/failover-slot.js';
import type { RelationRef } from '../source/messages.js';
import { unfinishedRecovery } from '../setup/recovery-marker.js';
import { setup, type SetupTarget } from '../setup/setup.js';
import { recordSlotCreated } from '../setup/slot-history.js';
import { commitOrder, countRows, extended, handOver, outboxTables, withHandoverConnections, type CommitOrder, type RowCount } from './snapshot-handover.js';

export interface CutoverOptions {
  /** Table, publication, slot and columns, as `setup` makes and checks them. */
  readonly target: SetupTarget & { readonly failover: SlotFailover };
  readonly delivery: DeliveryOptions;
  /** The operator's SQL condition of the rows the polling relay has not sent, e.g. `status = 'pending'`. */
  readonly pending: string;
}

export interface CutoverReport {
  /** Rows matching --pending in the snapshot (published, or in a dry run to publish), and the others (sent by the poller). */
  readonly pending: RowCount;
  readonly published: number;
  readonly order: CommitOrder;
  /** The new slot's consistent point; null in a dry run. */
  readonly newSlotAt: string | null;
  /** What `setup` found and did (columns mapped and ignored, publication). */
  readonly setup: readonly string[];
  /** Partial indexes on the columns of the pending condition: they now hold every row. */
  readonly indexWarnings: readonly string[];
  /** A slot an earlier, unfinished cutover left, dropped and made again. */
  readonly restarted: boolean;
}

/**
 * Takes over the outbox tables polling relays fill, while they still run (`outbox-relay
 * cutover`): the slot is created with an exported snapshot, every row of every outbox table (a
 * pattern's: each tenant's) that matches the pollers' pending condition in that snapshot is
 * published, in commit order across the tables, and `run` streams what commits after the slot's
 * consistent point. A committed row is either not pending in the snapshot (the poller's mark-sent
 * committed first: the poller sent it), pending in it (the relay publishes it; the poller may too:
 * a duplicate, never a loss), or committed after it (streamed). Killed half way, the mark it left
 * makes `run` wait and the next cutover start over with a new snapshot.
 */
export async function cutover(options: CutoverOptions, context: { encoders: PayloadEncoders | null; logger: Logger; dryRun: boolean }): Promise<CutoverReport> {
  const { target, delivery } = options;
  const { logger, dryRun } = context;
  return withHandoverConnections(target.database, target.slot, delivery.outboxes, 'cutover', async (sql, inspect) => {
    const slot = await readSlot(inspect, target.slot);
    const unfinished = await unfinishedRecovery(inspect, outboxTableRefs(delivery.outboxes));
    if (unfinished?.command === 'recover') {
      throw new RelayError('SOURCE_RECOVERY_UNFINISHED', `\`outbox-relay recover\` began at ${unfinished.since} and did not finish: run \`outbox-relay recover\` again, not cutover`);
    }
    if (slot.exists && unfinished === null && slot.walStatus === 'lost') {
      throw new RelayError('SOURCE_SLOT_LOST', `replication slot "${target.slot}" exists and is lost: the relay took these tables over before and then lost WAL it needed; \`outbox-relay recover\` publishes what it may not have delivered (cutover would skip what the lost slot never streamed)`);
    }
    const tables = await existingTables(inspect, delivery);
    if (slot.exists && unfinished === null) {
      throw new RelayError('CONFIG_INVALID', `replication slot "${target.slot}" exists: the relay already streams ${tables.map(({ outbox }) => qualifiedName(outbox.table)).join(', ')} from it (a finished cutover, or setup), so there is nothing to cut over; \`outbox-relay run\` goes on from it`);
    }
    const failover = wantsFailover(target.failover, await serverVersion(inspect));
    // Checked (and counted) before anything is made: Postgres's own words for a bad condition.
    const found = await countPending(sql, tables, options.pending);
    const order = await commitOrder(inspect);
    const pendingIndexesFound: PendingIndex[] = [];
    for (const { outbox } of tables) pendingIndexesFound.push(...(await pendingIndexes(inspect, outbox.table, options.pending)));
    const indexWarnings = pendingIndexAdvice(pendingIndexesFound);
    if (dryRun) return { pending: found, published: 0, order, newSlotAt: null, setup: [], indexWarnings, restarted: unfinished !== null };
    if (unfinished !== null) logger.warn({ slot: target.slot, since: unfinished.since }, 'cutover: an earlier cutover did not finish; starting over with a new snapshot');
    const { lines: setupLines, quarantined } = await setup(target, 'none');
    for (const line of setupLines) logger.info(line);
    for (const [table, reason] of quarantined) logger.error({ table, reason }, 'cutover: outbox table quarantined: its rows are dead letters until it is fixed');
    const done = await handOver(sql, inspect, {
      command: 'cutover',
      slotServer: { database: target.database, standby: false },
      slot: target.slot,
      failover,
      delivery,
      encoders: context.encoders!,
      logger,
      dropSlot: slot.exists,
      condition: async () => options.pending,
      counted: (count, newSlotAt) => {
        logger.info({ slot: target.slot, newSlotAt, pending: count.matching, notPending: count.others, from: count.from, to: count.to, order }, `cutover: new slot at ${newSlotAt}; publishing ${count.matching} pending rows, then \`run\` streams what commits after it`);
      },
    });
    const unrecorded = await recordSlotCreated(inspect, target.publication, target.slot);
    return { pending: done.count, published: done.published, order, newSlotAt: done.newSlotAt, setup: unrecorded ? [...setupLines, unrecorded] : setupLines, indexWarnings, restarted: unfinished !== null };
  });
}

/**
 * Every outbox table a poller fills: those named outright, each of a pattern's (a tenant's). A
 * table named outright that does not exist is refused, naming it; so is a configuration with no
 * table (a message outbox has no poller).
 */
async function existingTables(inspect: pg.Client, delivery: DeliveryOptions): Promise<TableReading[]> {
  const tables = await outboxTables(inspect, delivery.outboxes);
  if (tables.length === 0) throw new RelayError('CONFIG_INVALID', 'cutover takes over the tables a polling relay reads, and the outboxes have none (a message outbox has no table, and a pattern matched no table yet)');
  const { rows } = await inspect.query<{ name: string }>('SELECT name FROM unnest($1::text[]) AS name WHERE to_regclass(name) IS NULL', [tables.map(({ outbox }) => quotedName(outbox.table))]);
  if (rows.length > 0) throw new RelayError('SETUP_TABLE', `outbox table ${rows.map((row) => row.name).join(', ')} does not exist: cutover takes over the tables a polling relay reads (OUTBOX_TABLE, or OUTBOX_SOURCES' tables)`);
  return tables;
}

/** The pending rows of every table now, in a read-only transaction; a condition Postgres refuses on a table is CUTOVER_CONDITION with its message, naming the table. */
async function countPending(sql: pg.Client, tables: readonly TableReading[], pending: string): Promise<RowCount> {
  await sql.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  try {
    for (const { outbox } of tables) await probeCondition(sql, quotedName(outbox.table), pending);
    return await countRows(sql, tables.map((table) => ({ table, condition: pending })));
  } finally {
    await sql.query('ROLLBACK');
  }
}

/**
 * The operator's condition alone in a WHERE, planned and not run: what Postgres refuses here
 * (argument of WHERE must be type boolean..., a column that does not exist) is the condition's
 * fault, and said so (CUTOVER_CONDITION); a failure after it is not blamed on it.
 */
export async function probeCondition(sql: pg.Client, table: string, condition: string): Promise<void> {
  try {
    await sql.query(extended(`SELECT FROM ${table} WHERE ${condition} LIMIT 0`, []));
  } catch (error) {
    throw conditionRefused('--pending', condition, table, error);
  }
}

/** Postgres's own message for SQL an operator gave (`--pending`, `--mark-sent`), and what was expected. */
export function conditionRefused(flag: string, given: string, table: string, error: unknown): RelayError {
  const expected = flag === '--pending' ? `a boolean expression on the columns of ${table} that is true of the rows the polling relay has not sent, e.g. status = 'pending' or NOT published` : `the SET clause of an UPDATE of ${table} that marks a row sent, e.g. status = 'sent', sent_at = now()`;
  return new RelayError('CUTOVER_CONDITION', `${flag} "${given}" was refused by Postgres: ${(error as Error).message}; expected ${expected}`, { cause: error });
}

/** A partial index of an outbox table whose predicate reads a column the pending condition reads. */
export interface PendingIndex {
  readonly schema: string;
  readonly table: string;
  readonly name: string;
  readonly predicate: string;
  /** The columns both read. */
  readonly shared: readonly string[];
}

/**
 * Partial indexes whose predicate reads a column the pending condition reads (the poller's
 * `WHERE status = 'pending'` index): the relay never marks a row sent, so from now on every row
 * matches and stays in the index until the pruner deletes it.
 */
async function pendingIndexes(sql: pg.Client, table: RelationRef, pending: string): Promise<PendingIndex[]> {
  const quoted = quotedName(table);
  const { rows: columns } = await sql.query<{ name: string }>('SELECT attname AS name FROM pg_attribute WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped', [quoted]);
  const { rows: indexes } = await sql.query<{ name: string; predicate: string }>(
    `SELECT i.relname AS name, pg_get_expr(x.indpred, x.indrelid) AS predicate
       FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
      WHERE x.indrelid = to_regclass($1) AND x.indpred IS NOT NULL ORDER BY i.relname`,
    [quoted],
  );
  const read = (text: string) => new Set(columns.map((column) => column.name).filter((name) => new RegExp(`(^|[^A-Za-z0-9_$"])"?${name.replace(/[.*+?^${}()|[\]\\$]/g, '\\$&')}"?($|[^A-Za-z0-9_$"])`).test(text)));
  const pendingColumns = read(pending);
  return indexes.flatMap((index) => {
    const shared = [...read(index.predicate)].filter((name) => pendingColumns.has(name));
    return shared.length === 0 ? [] : [{ schema: table.schema, table: table.name, name: index.name, predicate: index.predicate, shared }];
  });
}

/** Schemas named in full in one warning; a pattern's others are counted, and found by the query it gives. */
const SCHEMAS_NAMED = 3;

/**
 * One warning per index name and predicate: a pattern's tenants share them, so 4,000 tenants
 * get one warning, not 4,000. Its `DROP INDEX` names each index with its schema (an outbox
 * outside `public`, a tenant's, is not found without it); for more schemas than it names, a
 * query that writes every statement (psql's \gexec runs them, one at a time, as CONCURRENTLY needs).
 */
export function pendingIndexAdvice(found: readonly PendingIndex[]): string[] {
  const groups = new Map<string, PendingIndex[]>();
  for (const index of found) {
    const key = JSON.stringify([index.table, index.name, index.predicate, index.shared]);
    groups.set(key, [...(groups.get(key) ?? []), index]);
  }
  return [...groups.values()].map((indexes) => {
    const { table, name, predicate, shared } = indexes[0]!;
    const schemas = [...new Set(indexes.map((index) => index.schema))].sort();
    const drops = schemas.slice(0, SCHEMAS_NAMED).map((schema) => `DROP INDEX CONCURRENTLY ${pg.escapeIdentifier(schema)}.${pg.escapeIdentifier(name)}`);
    const rest = schemas.length - SCHEMAS_NAMED;
    const how =
      rest <= 0
        ? drops.join('; ')
        : `${drops.join('; ')}; and in the ${rest} other schemas (psql, every one of them: SELECT format('DROP INDEX CONCURRENTLY %I.%I', schemaname, indexname) FROM pg_indexes WHERE tablename = ${pg.escapeLiteral(table)} AND indexname = ${pg.escapeLiteral(name)} \\gexec; it finds the index in every schema: read its list first)`;
    return (
      `index ${name} ${schemas.length > 1 ? `(of ${schemas.length} outbox tables) ` : ''}is partial (WHERE ${predicate}) on ${shared.join(', ')}, as the pending condition: the relay never marks rows sent, so every row inserted from now on stays in it until the pruner deletes the row. ` +
      `Once the poller is gone for good (and no \`handback\` is planned), ${how}`
    );
  });
}

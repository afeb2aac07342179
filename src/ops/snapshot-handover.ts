import pg from 'pg';
import type { Logger } from 'pino';
import type { DeliveryOptions } from '../delivery-chain.js';
import { tableReading, type TableReading } from '../decode/column-parsers.js';
import type { PayloadEncoders } from '../encode/create-encoder.js';
import { outboxTableRefs, qualifiedName, quotedName, tableOutboxOf, type Outbox } from '../outboxes.js';
import { connectPostgres, type DatabaseAccess } from '../pg-connection.js';
import { RelayError } from '../errors.js';
import { onSlotServer, type SlotServer } from '../slot-server.js';
import { tablesMatching } from '../setup/catalog.js';
import { clearRecovering, markRecovering, type Handover } from '../setup/recovery-marker.js';
import { connectForText, parseRow, republish, type TableRow } from './republish.js';
import type { RelationRef } from '../source/messages.js';

/**
 * An outbox table's rows to publish: a condition on its columns, with its values written in (the
 * conditions of several tables meet in one statement).
 */
export interface TableRows {
  readonly table: TableReading;
  readonly condition: string;
}

/** Rows that match a condition in one snapshot, and their created_at range; and the rows that do not. */
export interface RowCount {
  readonly matching: number;
  readonly from: string | null;
  readonly to: string | null;
  readonly others: number;
}

/** How rows read from the table are put in commit order: by commit time (track_commit_timestamp) or by transaction id. */
export type CommitOrder = 'commit timestamp' | 'transaction id';

export interface HandoverOptions {
  readonly command: Handover;
  /** Where the slot is made (and dropped), and the rows are read in its snapshot: the primary, or OUTBOX_REPLICA_URL's standby. */
  readonly slotServer: SlotServer;
  readonly slot: string;
  /** Whether the new slot is a failover slot (Postgres 17+). */
  readonly failover: boolean;
  readonly delivery: DeliveryOptions;
  readonly encoders: PayloadEncoders;
  readonly logger: Logger;
  /** Drop this slot first (it exists and can never stream what is missing, or an earlier run left it). */
  readonly dropSlot: boolean;
  /** The rows of `table` to publish, built inside the snapshot's transaction. */
  readonly condition: (sql: pg.Client, table: TableReading) => Promise<string>;
  /** Called once the rows are counted, before any is published: the command's log line. */
  readonly counted: (count: RowCount, newSlotAt: string) => void;
}

const FETCH_ROWS = 1_000;
const CURSOR = 'outbox_handover_rows';
/** A row's ctid, beside its columns (a name no outbox column has). */
const CTID = 'outbox-relay ctid';
/** A row's partition (its tableoid), beside its columns. */
const PART = 'outbox-relay partition';

/**
 * The one way a slot is made under rows that are already in the table (`recover`, `cutover`):
 * 1. A mark is set first (run, setup and the pruner refuse while it is there; the same command
 *    run again starts over), then the slot is created with an exported snapshot. A transaction
 *    that imports it sees exactly the rows committed before the slot's consistent point; the
 *    slot streams exactly the transactions that commit after it: no gap, no overlap.
 * 2. In that snapshot, every row that matches the command's condition is published through the
 *    stream's own path, in commit order (rowsInOrder), and acknowledged by Kafka.
 * 3. Only then is the mark cleared and `run` may stream from the slot.
 * The mark, not the slot, keeps a relay from streaming meanwhile: the walsender releases a slot
 * once CREATE_REPLICATION_SLOT returns. The advisory lock of withHandoverConnections keeps a
 * second handover from dropping this one's slot under it.
 */
export async function handOver(sql: pg.Client, inspect: pg.Client, options: HandoverOptions): Promise<{ readonly count: RowCount; readonly published: number; readonly newSlotAt: string }> {
  const { delivery, logger, slot } = options;
  const order = await commitOrder(inspect);
  const marked = await outboxTables(inspect, delivery.outboxes);
  await markRecovering(inspect, marked.map(({ outbox }) => outbox.table), options.command);
  if (options.dropSlot) {
    await onSlotServer(options.slotServer, inspect, (client) => client.query('SELECT pg_drop_replication_slot($1)', [slot]), `outbox-relay-${options.command}`);
    logger.warn({ slot }, `${options.command}: dropped the slot it found (it cannot stream the rows before it)`);
  }
  const newSlotAt = await createSlotInto(sql, options);
  // The tables as the snapshot has them: a tenant's made since the marks were set is marked too.
  const tables = await outboxTables(sql, delivery.outboxes);
  const markedNames = new Set(marked.map(({ outbox }) => qualifiedName(outbox.table)));
  const unmarked = tables.filter(({ outbox }) => !markedNames.has(qualifiedName(outbox.table))).map(({ outbox }) => outbox.table);
  await markRecovering(inspect, unmarked, options.command);
  const selected = await selectRows(sql, tables, options.condition);
  const count = await countRows(sql, selected);
  options.counted(count, newSlotAt);
  const published = await republish(rowsInOrder(sql, selected, order), { delivery, encoders: options.encoders, logger, stage: options.command, total: count.matching });
  await sql.query('COMMIT');
  await clearRecovering(inspect, [...marked.map(({ outbox }) => outbox.table), ...unmarked]);
  return { count, published, newSlotAt };
}

/**
 * Every outbox table, as `client`'s transaction sees the catalog: the tables named outright, and
 * each table a pattern names (a tenant's), once, with the outbox it belongs to.
 */
export async function outboxTables(client: pg.Client, outboxes: readonly Outbox[]): Promise<TableReading[]> {
  const found = new Map<string, TableReading>();
  for (const outbox of outboxes) {
    const tables = outbox.kind === 'table' ? [outbox.table] : outbox.kind === 'tables' ? await tablesMatching(client, outbox.pattern) : [];
    for (const table of tables) {
      const name = qualifiedName(table);
      if (!found.has(name)) found.set(name, tableReading(tableOutboxOf(outboxes, table)!));
    }
  }
  return [...found.values()];
}

/** Each table with its condition, built in the caller's transaction. */
export async function selectRows(sql: pg.Client, tables: readonly TableReading[], condition: (sql: pg.Client, table: TableReading) => Promise<string>): Promise<TableRows[]> {
  const selected: TableRows[] = [];
  for (const table of tables) selected.push({ table, condition: await condition(sql, table) });
  return selected;
}

/**
 * Creates the slot with an exported snapshot and opens `sql`'s transaction in it; returns the
 * slot's consistent point. The exporting connection ends as soon as the snapshot is imported
 * (the importing transaction keeps it): left idle for a long publish, a dropped connection or
 * idle_in_transaction_session_timeout would only fail the command.
 */
async function createSlotInto(sql: pg.Client, options: HandoverOptions): Promise<string> {
  const replication = await connectPostgres(options.slotServer.database, `outbox-relay-${options.command}`, { replication: true });
  replication.on('error', () => undefined);
  try {
    const slotOptions = options.failover ? "(SNAPSHOT 'export', FAILOVER true)" : 'EXPORT_SNAPSHOT';
    const { rows } = await replication.query<{ consistent_point: string; snapshot_name: string }>(`CREATE_REPLICATION_SLOT ${pg.escapeIdentifier(options.slot)} LOGICAL pgoutput ${slotOptions}`);
    // Imported while the exporting connection is open; ours from then on. Read only: it is a
    // standby's transaction when the slot is there.
    await sql.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    await sql.query(`SET TRANSACTION SNAPSHOT ${pg.escapeLiteral(rows[0]!.snapshot_name)}`);
    // Idle between batches while Kafka acknowledges: a server's idle timeout would end the command half way.
    await sql.query('SET LOCAL idle_in_transaction_session_timeout = 0');
    return rows[0]!.consistent_point;
  } finally {
    await replication.end();
  }
}

/**
 * The two connections a handover works through, for `work`'s whole length: `sql` reads rows as
 * text (parseRow, as replay does), with no per-query bound (counting and reading a large outbox
 * may take minutes), on the server the slot is made on (`rowsFrom`: the snapshot it exports is
 * imported there); `inspect`, on the primary, reads the slot's facts and sets the mark.
 */
export async function withHandoverConnections<T>(database: DatabaseAccess, slot: string, outboxes: readonly Outbox[], command: Handover | 'handback', work: (sql: pg.Client, inspect: pg.Client) => Promise<T>, rowsFrom: DatabaseAccess = database): Promise<T> {
  const sql = await connectForText(rowsFrom, `outbox-relay-${command}`, 0);
  try {
    // handback peeks the whole unconfirmed backlog through it: no per-query bound there.
    const inspect = await connectPostgres(database, `outbox-relay-${command}`, command === 'handback' ? { queryTimeoutMs: 0 } : {});
    try {
      await holdHandoverLocks(inspect, slot, outboxTableRefs(outboxes), command);
      return await work(sql, inspect);
    } finally {
      await inspect.end();
    }
  } finally {
    await sql.end();
  }
}

/**
 * One of recover, cutover and handback at a time per slot (the slot every outbox of it shares)
 * and per outbox table: two would drop each other's slot or clear each other's marks. Session
 * advisory locks, held by `inspect` until it disconnects (a killed command's locks go with its
 * connection). The table keys are the ones versions before several outboxes took (one per
 * table): during a rolling upgrade, an earlier version's handover and this one's exclude each
 * other, and so do two relays of different slots over one table. A pattern is one key (its
 * tenants may be thousands: a lock each would fill Postgres's lock table).
 */
async function holdHandoverLocks(inspect: pg.Client, slot: string, tables: readonly RelationRef[], command: string): Promise<void> {
  const keys = [`outbox-relay handover ${slot}`, ...tables.map((table) => `outbox-relay handover ${qualifiedName(table)}`)];
  const { rows: refused } = await inspect.query<{ key: string }>('SELECT key FROM unnest($1::text[]) WITH ORDINALITY AS k(key, n) WHERE NOT pg_try_advisory_lock(hashtext(key)) ORDER BY n', [keys]);
  const key = refused[0]?.key;
  if (key === undefined) return;
  const { rows: holders } = await inspect.query<{ pid: number; application_name: string }>(
    `SELECT a.pid, a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'advisory' AND l.granted AND l.objid = (hashtext($1)::bigint & 4294967295)::oid AND l.pid <> pg_backend_pid()`,
    [key],
  );
  const holder = holders[0] ? `${holders[0].application_name} (pid ${holders[0].pid})` : 'another session';
  const on = key === keys[0] ? 'it' : `${key.slice('outbox-relay handover '.length)} (through another slot, or a relay of an earlier version)`;
  throw new RelayError('SOURCE_HANDOVER_BUSY', `cannot ${command} with slot "${slot}": ${holder} is already running recover, cutover or handback on ${on}; wait for it to finish (or stop it), then run ${command} again`);
}

export async function commitOrder(sql: pg.Client): Promise<CommitOrder> {
  const { rows } = await sql.query<{ on: string }>("SELECT current_setting('track_commit_timestamp') AS on");
  return rows[0]?.on === 'on' ? 'commit timestamp' : 'transaction id';
}


/** Counted in the caller's transaction (the snapshot's, or a dry run's), every table in one statement. */
export async function countRows(sql: pg.Client, selected: readonly TableRows[]): Promise<RowCount> {
  if (selected.length === 0) return { matching: 0, others: 0, from: null, to: null };
  const counts = selected.map(({ table: { outbox }, condition }) => {
    const createdAt = outbox.columns.createdAt ? `${pg.escapeIdentifier(outbox.columns.createdAt)}::timestamptz` : 'NULL::timestamptz';
    // coalesce: a row the condition says NULL of is not published, and is counted among the others.
    const matches = `coalesce((${condition}), false)`;
    return `SELECT count(*) FILTER (WHERE ${matches}) AS matching, count(*) FILTER (WHERE NOT ${matches}) AS others,
                   min(${createdAt}) FILTER (WHERE ${matches}) AS first, max(${createdAt}) FILTER (WHERE ${matches}) AS last
              FROM ${quotedName(outbox.table)}`;
  });
  const { rows } = await sql.query<{ matching: string; others: string; first: string | null; last: string | null }>(
    extended(`SELECT sum(matching) AS matching, sum(others) AS others, min(first)::text AS first, max(last)::text AS last FROM (${counts.join(' UNION ALL ')}) counts`, []),
  );
  const row = rows[0]!;
  return { matching: Number(row.matching), others: Number(row.others), from: row.first, to: row.last };
}

/** How rows read from their tables are put in order: the order the slot would have streamed them in, or `replay`'s. */
export type RowOrder = CommitOrder | 'created_at';

/**
 * The rows to publish, in one order across every table, read in the caller's transaction (its
 * snapshot): a cursor over the rows' places in that order, each batch of places then read from
 * its tables by ctid (stable within the snapshot). The commit orders are the order the slot
 * would have streamed them in: by commit timestamp where `track_commit_timestamp` is on, else by
 * transaction id (assignment order: two transactions of one aggregate that wait on each other's
 * row lock commit in that order; unrelated concurrent ones may not), then by the order of a
 * transaction's statements, whatever table each wrote. `created_at` is `replay`'s: by each
 * table's created_at, then event id. `values` are the conditions' bind parameters ($1...).
 */
export async function* rowsInOrder(sql: pg.Client, selected: readonly TableRows[], order: RowOrder, values: readonly unknown[] = []): AsyncGenerator<TableRow[]> {
  if (selected.length === 0) return;
  // age() descending is xid ascending; cmin orders the statements of one transaction, ctid the inserts of one.
  const orderBy = order === 'created_at' ? 'x, c' : `${order === 'commit timestamp' ? 'pg_xact_commit_timestamp(x) NULLS FIRST, age(x) DESC' : 'age(x) DESC'}, c::text::bigint`;
  // A row's place is its partition (tableoid) and ctid: a ctid is unique only within one partition of a partitioned outbox.
  const places = selected.map(({ table: { outbox }, condition }, index) => {
    const keys = order === 'created_at' ? `${pg.escapeIdentifier(outbox.columns.createdAt)}::timestamptz AS x, ${pg.escapeIdentifier(outbox.columns.eventId)}::text AS c` : 'xmin AS x, cmin AS c';
    return `SELECT ${index} AS t, tableoid AS part, ctid, ${keys} FROM ${quotedName(outbox.table)} WHERE coalesce((${condition}), false)`;
  });
  await sql.query(extended(`DECLARE ${CURSOR} NO SCROLL CURSOR FOR SELECT t, part, ctid FROM (${places.join(' UNION ALL ')}) places ORDER BY ${orderBy}, t, part, ctid`, values));
  for (;;) {
    const { rows: batch } = await sql.query<{ t: string; part: string; ctid: string }>(`FETCH ${FETCH_ROWS} FROM ${CURSOR}`);
    if (batch.length === 0) return;
    const ctidsByTable = new Map<number, Set<string>>();
    for (const { t, ctid } of batch) ctidsByTable.set(Number(t), (ctidsByTable.get(Number(t)) ?? new Set()).add(ctid));
    const rows = new Map<string, TableRow>();
    for (const [index, ctids] of ctidsByTable) {
      const { outbox, columnParsers } = selected[index]!.table;
      const { rows: texts, fields } = await sql.query<Record<string, string | null>>(`SELECT *, tableoid AS "${PART}", ctid AS "${CTID}" FROM ${quotedName(outbox.table)} WHERE ctid = ANY($1::tid[])`, [[...ctids]]);
      const columns = fields.filter((field) => field.name !== PART && field.name !== CTID);
      for (const text of texts) rows.set(`${index} ${text[PART]} ${text[CTID]}`, { relation: outbox.table, row: parseRow(text, columns, columnParsers) });
    }
    yield batch.map(({ t, part, ctid }) => {
      const row = rows.get(`${t} ${part} ${ctid}`);
      // The snapshot keeps every row it sees where it was: a row not found again is a bug, never skipped.
      if (!row) throw new Error(`row ${ctid} of ${qualifiedName(selected[Number(t)]!.table.outbox.table)} (partition ${part}) was not found again in the snapshot`);
      return row;
    });
  }
}

/**
 * A query sent with the extended protocol even without parameters: it carries exactly one
 * statement, so an operator's condition (`cutover --pending`) cannot end one and start another.
 * (pg sends a query without parameters as a simple query unless told; @types/pg omits the option.)
 */
export function extended(text: string, values: readonly unknown[]): pg.QueryConfig {
  return { text, values: [...values], queryMode: 'extended' } as pg.QueryConfig;
}

import pg from 'pg';
import type { Logger } from 'pino';
import type { DeliveryOptions } from '../config/compile.js';
import type { PayloadEncoder } from '../encode/encoder.js';
import { RelayError } from '../errors.js';
import { readSlot } from '../observe/slot-monitor.js';
import { connectPostgres, type DatabaseAccess } from '../pg-connection.js';
import { pruneMarksTable } from '../prune/marks.js';
import { serverVersion, wantsFailover, type SlotFailover } from '../setup/failover-slot.js';
import { clearRecovering, markRecovering, unfinishedRecovery } from '../setup/recovery-marker.js';
import { connectForText, parseRow, republish } from './republish.js';

export interface RecoverOptions {
  readonly database: DatabaseAccess;
  readonly slot: string;
  /** OUTBOX_SLOT_FAILOVER: the re-created slot is a failover slot on Postgres 17+, as setup's. */
  readonly failover: SlotFailover;
  readonly delivery: DeliveryOptions;
}

/** What recovery found, and (unless a dry run) did. */
export interface RecoverReport {
  /** Why the slot could not be used: missing, or lost with the position it had confirmed. */
  readonly cause: 'missing' | 'lost';
  /** Rows that the old slot's position and the pruner's marks prove were delivered: not sent again. */
  readonly provablyDelivered: number;
  /** Rows republished (or, in a dry run, to republish), and their created_at range. */
  readonly republish: { readonly rows: number; readonly from: string | null; readonly to: string | null };
  /** How the rows were ordered: by commit time (track_commit_timestamp) or by transaction id. */
  readonly order: 'commit timestamp' | 'transaction id';
  /** The new slot's consistent point: rows committed before it were republished, after it are streamed. */
  readonly newSlotAt: string | null;
}

/** Rows the old slot confirmed, by the pruner's rule: a mark it passed, and older transactions. */
interface DeliveredBound {
  readonly oldestRunningXid: string;
  readonly takenAt: Date;
}

const FETCH_ROWS = 1_000;
const CURSOR = 'outbox_recover_rows';

/**
 * Recovery from a lost or missing slot without loss (`outbox-relay recover`). A fresh slot
 * starts at the current WAL position, so every event committed while the old one was gone would
 * be skipped; instead:
 * 1. The new slot is created with an exported snapshot. A transaction that imports it sees
 *    exactly the rows committed before the slot's consistent point; the slot streams exactly the
 *    transactions that commit after it. The two sets meet without a gap or an overlap.
 * 2. In that snapshot, every retained row that cannot be proved delivered is published again:
 *    with a lost slot, rows of transactions older than the newest pruner mark its confirmed
 *    position passed are proved delivered (the pruner's own rule); with a missing slot nothing
 *    is, and every retained row goes out again.
 * 3. Rows go out in commit order: by commit timestamp where `track_commit_timestamp` is on, else
 *    by transaction id (assignment order: two transactions of one aggregate that wait on each
 *    other's row lock commit in that order; unrelated concurrent ones may not), then by the
 *    order of inserts within a transaction. All of them before `run` streams anything newer.
 */
export async function recover(options: RecoverOptions, context: { encoder: PayloadEncoder | null; logger: Logger; dryRun: boolean }): Promise<RecoverReport> {
  const { logger, dryRun } = context;
  // Rows are read as text (parseRow, as replay does); the slot's facts through a plain client.
  // No per-query bound: counting and reading a large outbox after a long outage may take minutes.
  const sql = await connectForText(options.database, 'outbox-relay-recover', 0);
  const inspect = await connectPostgres(options.database, 'outbox-relay-recover').catch(async (error: unknown) => {
    await sql.end();
    throw error;
  });
  try {
    const slot = await readSlot(inspect, options.slot);
    const table = options.delivery.pipeline.table;
    // An earlier recover that did not finish left its slot behind: that slot cannot be trusted.
    const unfinishedSince = await unfinishedRecovery(inspect, table);
    if (unfinishedSince !== null) logger.warn({ slot: options.slot, since: unfinishedSince }, 'recover: an earlier recover did not finish; starting over');
    if (slot.exists && slot.walStatus !== 'lost' && unfinishedSince === null) {
      throw new RelayError('CONFIG_INVALID', `replication slot "${options.slot}" exists and is usable (wal_status ${slot.walStatus}): there is nothing to recover; \`outbox-relay run\` streams from it (to publish events again on purpose: \`outbox-relay replay\`)`);
    }
    const cause = slot.exists && unfinishedSince === null ? 'lost' : 'missing';
    const bound = cause === 'lost' && slot.confirmedFlushLsn ? await deliveredBound(inspect, options, slot.confirmedFlushLsn) : null;
    const order = (await trackCommitTimestamp(inspect)) ? 'commit timestamp' : 'transaction id';
    // Refused (OUTBOX_SLOT_FAILOVER=true before 17) before anything is changed.
    const failover = wantsFailover(options.failover, await serverVersion(inspect));
    if (dryRun) {
      await sql.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      const found = await count(sql, options, bound);
      await sql.query('ROLLBACK');
      return { cause, ...found, order, newSlotAt: null };
    }
    // From here until every row is acknowledged, run, setup and the pruner refuse to go on.
    await markRecovering(inspect, table);
    if (slot.exists) {
      await inspect.query('SELECT pg_drop_replication_slot($1)', [options.slot]);
      logger.warn({ slot: options.slot, confirmed: slot.confirmedFlushLsn }, 'recover: dropped the old slot (it can never stream what is missing)');
    }
    // The connection that creates the slot holds it until recovery ends: a relay that reconnects
    // meanwhile finds the slot busy and waits as a standby, rather than stream ahead of the rows.
    const replication = await connectPostgres(options.database, 'outbox-relay-recover', { replication: true });
    try {
      const slotOptions = failover ? "(SNAPSHOT 'export', FAILOVER true)" : 'EXPORT_SNAPSHOT';
      const { rows } = await replication.query<{ consistent_point: string; snapshot_name: string }>(`CREATE_REPLICATION_SLOT ${pg.escapeIdentifier(options.slot)} LOGICAL pgoutput ${slotOptions}`);
      const newSlotAt = rows[0]!.consistent_point;
      // Imported while the exporting connection still holds it; ours from then on.
      await sql.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await sql.query(`SET TRANSACTION SNAPSHOT ${pg.escapeLiteral(rows[0]!.snapshot_name)}`);
      const found = await count(sql, options, bound);
      logger.info({ slot: options.slot, cause, newSlotAt, republish: found.republish, provablyDelivered: found.provablyDelivered, order }, `recover: new slot at ${newSlotAt}; publishing ${found.republish.rows} retained rows again, then \`run\` streams what commits after it`);
      const published = await republish(rowsInSnapshot(sql, options, bound, order), { delivery: options.delivery, encoder: context.encoder!, logger, stage: 'recover' });
      await sql.query('COMMIT');
      await clearRecovering(inspect, table);
      return { cause, provablyDelivered: found.provablyDelivered, republish: { ...found.republish, rows: published }, order, newSlotAt };
    } finally {
      await replication.end();
    }
  } finally {
    await sql.end();
    await inspect.end();
  }
}

/** The newest pruner mark the lost slot's confirmed position had passed, if the pruner ran. */
async function deliveredBound(sql: pg.Client, options: RecoverOptions, confirmed: string): Promise<DeliveredBound | null> {
  const marks = pruneMarksTable(options.delivery.pipeline.table);
  const { rows: exists } = await sql.query<{ found: string | null }>('SELECT to_regclass($1)::text AS found', [marks]);
  if (!exists[0]?.found) return null;
  const { rows } = await sql.query<{ oldest_running_xid: string; taken_at: string }>(
    `SELECT oldest_running_xid::text, taken_at::text FROM ${marks} WHERE wal_lsn <= $1::pg_lsn ORDER BY wal_lsn DESC LIMIT 1`,
    [confirmed],
  );
  return rows[0] ? { oldestRunningXid: rows[0].oldest_running_xid, takenAt: new Date(rows[0].taken_at) } : null;
}

async function trackCommitTimestamp(sql: pg.Client): Promise<boolean> {
  const { rows } = await sql.query<{ on: string }>("SELECT current_setting('track_commit_timestamp') AS on");
  return rows[0]?.on === 'on';
}

/**
 * SQL for "proved delivered" and its parameters: the pruner's rule (its deleteConfirmed). A row's
 * 64-bit xid is our own xid minus age(xmin), so the transaction takes an xid first.
 */
async function deliveredCondition(sql: pg.Client, options: RecoverOptions, bound: DeliveredBound | null): Promise<{ sql: string; values: unknown[] }> {
  if (!bound) return { sql: 'false', values: [] };
  const createdAt = pg.escapeIdentifier(options.delivery.columns.createdAt);
  return { sql: `($1::bigint - age(xmin) < $2::bigint AND coalesce(${createdAt} < $3, false))`, values: [await ownXid(sql), bound.oldestRunningXid, bound.takenAt] };
}

async function ownXid(sql: pg.Client): Promise<string> {
  const { rows } = await sql.query<{ xid: string }>('SELECT pg_current_xact_id()::text AS xid');
  return rows[0]!.xid;
}

function tableName(options: RecoverOptions): string {
  const { schema, name } = options.delivery.pipeline.table;
  return `${pg.escapeIdentifier(schema)}.${pg.escapeIdentifier(name)}`;
}

async function count(sql: pg.Client, options: RecoverOptions, bound: DeliveredBound | null): Promise<Pick<RecoverReport, 'provablyDelivered' | 'republish'>> {
  const delivered = await deliveredCondition(sql, options, bound);
  const createdAt = pg.escapeIdentifier(options.delivery.columns.createdAt);
  const { rows } = await sql.query<{ delivered: string; republish: string; first: string | null; last: string | null }>(
    `SELECT count(*) FILTER (WHERE ${delivered.sql}) AS delivered,
            count(*) FILTER (WHERE NOT ${delivered.sql}) AS republish,
            min(${createdAt}) FILTER (WHERE NOT ${delivered.sql})::text AS first,
            max(${createdAt}) FILTER (WHERE NOT ${delivered.sql})::text AS last
       FROM ${tableName(options)}`,
    delivered.values,
  );
  const row = rows[0]!;
  return { provablyDelivered: Number(row.delivered), republish: { rows: Number(row.republish), from: row.first, to: row.last } };
}

/** The rows to publish again, in commit order, read through a cursor in the snapshot's transaction. */
async function* rowsInSnapshot(sql: pg.Client, options: RecoverOptions, bound: DeliveredBound | null, order: RecoverReport['order']): AsyncGenerator<Record<string, unknown>[]> {
  const delivered = await deliveredCondition(sql, options, bound);
  // age() descending is xid ascending; cmin orders the inserts of one transaction, ctid those of one statement.
  const byTransaction = order === 'commit timestamp' ? 'pg_xact_commit_timestamp(xmin) NULLS FIRST, age(xmin) DESC' : 'age(xmin) DESC';
  await sql.query(
    `DECLARE ${CURSOR} NO SCROLL CURSOR FOR
       SELECT * FROM ${tableName(options)} WHERE NOT ${delivered.sql}
        ORDER BY ${byTransaction}, cmin::text::bigint, ctid`,
    delivered.values,
  );
  for (;;) {
    const { rows, fields } = await sql.query<Record<string, string | null>>(`FETCH ${FETCH_ROWS} FROM ${CURSOR}`);
    if (rows.length === 0) return;
    yield rows.map((row) => parseRow(row, fields, options.delivery.columnParsers));
  }
}

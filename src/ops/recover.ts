import pg from 'pg';
import type { Logger } from 'pino';
import type { DeliveryOptions } from '../delivery-chain.js';
import type { TableReading } from '../decode/column-parsers.js';
import type { PayloadEncoders } from '../encode/create-encoder.js';
import { RelayError } from '../errors.js';
import { readSlot } from '../observe/slot-monitor.js';
import { outboxName, outboxTableRefs } from '../outboxes.js';
import type { DatabaseAccess } from '../pg-connection.js';
import { pruneMarksTable } from '../prune/marks.js';
import { serverVersion, wantsFailover, type SlotFailover } from '../setup/failover-slot.js';
import { unfinishedRecovery } from '../setup/recovery-marker.js';
import { noFailoverOnStandby } from '../setup/standby-slot.js';
import { onSlotServer, type SlotServer } from '../slot-server.js';
import { commitOrder, countRows, handOver, outboxTables, selectRows, withHandoverConnections, type CommitOrder, type RowCount } from './snapshot-handover.js';

export interface RecoverOptions {
  /** The primary: the recovery mark, the pruner's marks. */
  readonly database: DatabaseAccess;
  /** Where the slot is re-created and the retained rows read in its snapshot: the primary, or OUTBOX_REPLICA_URL's standby. */
  readonly slotServer: SlotServer;
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
  readonly order: CommitOrder;
  /** The new slot's consistent point: rows committed before it were republished, after it are streamed. */
  readonly newSlotAt: string | null;
  /** The message outboxes: no rows, so what they emitted after the lost position is not recovered. */
  readonly unrecoverable: readonly string[];
}

/** Rows the old slot confirmed, by the pruner's rule: a mark it passed, and older transactions (both as Postgres printed them). */
interface DeliveredBound {
  readonly oldestRunningXid: string;
  readonly takenAt: string;
}

/**
 * Recovery from a lost or missing slot without loss (`outbox-relay recover`). A fresh slot
 * starts at the current WAL position, so every event committed while the old one was gone would
 * be skipped; instead:
 * 1. The new slot is created with an exported snapshot. A transaction that imports it sees
 *    exactly the rows committed before the slot's consistent point; the slot streams exactly the
 *    transactions that commit after it. The two sets meet without a gap or an overlap.
 * 2. In that snapshot, every retained row of every outbox table (a pattern's: each tenant's)
 *    that cannot be proved delivered is published again: with a lost slot, rows of transactions
 *    older than the newest mark of their table's pruner that its confirmed position passed are
 *    proved delivered (the pruner's own rule); with a missing slot nothing is, and every
 *    retained row goes out again. A message outbox has no rows: what it emitted after the lost
 *    position is gone, and the report says so.
 * 3. Rows go out in commit order across the tables: by commit timestamp where
 *    `track_commit_timestamp` is on, else by transaction id (assignment order: two transactions
 *    of one aggregate that wait on each other's row lock commit in that order; unrelated
 *    concurrent ones may not), then by the order of a transaction's statements. All of them
 *    before `run` streams anything newer.
 */
export async function recover(options: RecoverOptions, context: { encoders: PayloadEncoders | null; logger: Logger; dryRun: boolean }): Promise<RecoverReport> {
  const { logger, dryRun } = context;
  const { outboxes } = options.delivery;
  return withHandoverConnections(options.database, options.slot, outboxes, 'recover', async (sql, inspect) => {
    const slot = await onSlotServer(options.slotServer, inspect, (client) => readSlot(client, options.slot), 'outbox-relay-recover');
    // An earlier recover that did not finish left its slot behind: that slot cannot be trusted.
    const unfinished = await unfinishedRecovery(inspect, outboxTableRefs(outboxes));
    if (unfinished?.command === 'cutover') {
      throw new RelayError('SOURCE_RECOVERY_UNFINISHED', `\`outbox-relay cutover\` began at ${unfinished.since} and did not finish: run it again with the same --pending (recover would publish again every row, also those the poller sent)`);
    }
    if (unfinished !== null) logger.warn({ slot: options.slot, since: unfinished.since }, 'recover: an earlier recover did not finish; starting over');
    if (slot.exists && slot.walStatus !== 'lost' && unfinished === null) {
      throw new RelayError('CONFIG_INVALID', `replication slot "${options.slot}" exists and is usable (wal_status ${slot.walStatus}): there is nothing to recover; \`outbox-relay run\` streams from it (to publish events again on purpose: \`outbox-relay replay\`)`);
    }
    const cause = slot.exists && unfinished === null ? 'lost' : 'missing';
    const confirmed = cause === 'lost' ? slot.confirmedFlushLsn : null;
    const unrecoverable = outboxes.filter((outbox) => outbox.kind === 'messages').map(outboxName);
    for (const outbox of unrecoverable) logger.warn({ slot: options.slot, outbox }, `recover: message outbox ${outbox} has no rows to publish again; what it emitted after the slot's last confirmed position is not recovered`);
    const order = await commitOrder(inspect);
    // Refused (OUTBOX_SLOT_FAILOVER=true before 17) before anything is changed.
    const failover = options.slotServer.standby ? noFailoverOnStandby(options.failover) : wantsFailover(options.failover, await serverVersion(inspect));
    const condition = undeliveredIn(inspect, confirmed);
    if (dryRun) {
      await sql.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      const found = report(await countRows(sql, await selectRows(sql, await outboxTables(sql, outboxes), condition)));
      await sql.query('ROLLBACK');
      return { cause, ...found, order, newSlotAt: null, unrecoverable };
    }
    const done = await handOver(sql, inspect, {
      command: 'recover',
      slotServer: options.slotServer,
      slot: options.slot,
      failover,
      delivery: options.delivery,
      encoders: context.encoders!,
      logger,
      dropSlot: slot.exists,
      condition,
      counted: (count, newSlotAt) => {
        const found = report(count);
        logger.info({ slot: options.slot, cause, newSlotAt, republish: found.republish, provablyDelivered: found.provablyDelivered, order }, `recover: new slot at ${newSlotAt}; publishing ${found.republish.rows} retained rows again, then \`run\` streams what commits after it`);
      },
    });
    const found = report(done.count);
    return { cause, provablyDelivered: found.provablyDelivered, republish: { ...found.republish, rows: done.published }, order, newSlotAt: done.newSlotAt, unrecoverable };
  }, options.slotServer.database);
}

function report(count: RowCount): Pick<RecoverReport, 'provablyDelivered' | 'republish'> {
  return { provablyDelivered: count.others, republish: { rows: count.matching, from: count.from, to: count.to } };
}

/** The newest mark of `table`'s pruner that the lost slot's confirmed position had passed, if its pruner ran. */
async function deliveredBound(inspect: pg.Client, table: TableReading, confirmed: string): Promise<DeliveredBound | null> {
  const marks = pruneMarksTable(table.outbox.table);
  const { rows: exists } = await inspect.query<{ found: string | null }>('SELECT to_regclass($1)::text AS found', [marks]);
  if (!exists[0]?.found) return null;
  const { rows } = await inspect.query<{ oldest_running_xid: string; taken_at: string }>(
    `SELECT oldest_running_xid::text, taken_at::text FROM ${marks} WHERE wal_lsn <= $1::pg_lsn ORDER BY wal_lsn DESC LIMIT 1`,
    [confirmed],
  );
  return rows[0] ? { oldestRunningXid: rows[0].oldest_running_xid, takenAt: rows[0].taken_at } : null;
}

/**
 * The rows of each table to publish again: those not proved delivered by the pruner's rule (its
 * deleteConfirmed), by that table's own marks (read on the primary, `inspect`), as SQL built in
 * the snapshot's transaction. A row's 64-bit xid is found from its 32-bit xmin and the
 * snapshot's xmax (the next xid, 64-bit): a row's xid lies less than 2^31 below it. Read only,
 * so it is the same on a standby, which can take no xid of its own. A frozen row reads as xid 2
 * of the current epoch: old, unless the mark is from the epoch before (then it is published
 * again: a copy, never a loss); its created_at must predate the mark's time too, as the pruner
 * requires. Every row, when the slot is missing (`confirmed` null): nothing proves any delivered.
 */
function undeliveredIn(inspect: pg.Client, confirmed: string | null): (sql: pg.Client, table: TableReading) => Promise<string> {
  let xmax: string | null = null;
  return async (sql, table) => {
    const bound = confirmed === null ? null : await deliveredBound(inspect, table, confirmed);
    if (!bound) return 'true';
    xmax ??= await snapshotXmax(sql);
    const createdAt = pg.escapeIdentifier(table.outbox.columns.createdAt);
    const rowXid = `(${xmax}::bigint - (((${xmax}::bigint % 4294967296) - xmin::text::bigint + 4294967296) % 4294967296))`;
    return `NOT (${rowXid} < ${bound.oldestRunningXid}::bigint AND coalesce(${createdAt} < ${pg.escapeLiteral(bound.takenAt)}::timestamptz, false))`;
  };
}

async function snapshotXmax(sql: pg.Client): Promise<string> {
  const { rows } = await sql.query<{ xmax: string }>('SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS xmax');
  return rows[0]!.xmax;
}

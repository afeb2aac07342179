import pg from 'pg';
import type { Logger } from 'pino';
import { RelayError } from '../errors.js';
import { readSlot } from '../observe/slot-monitor.js';
import { connectPostgres, type DatabaseAccess } from '../pg-connection.js';
import { unfinishedRecovery } from '../setup/recovery-marker.js';
import { PgoutputDecoder } from '../source/pgoutput.js';
import type { RelationRef } from '../source/messages.js';
import { conditionRefused } from './cutover.js';
import { extended } from './snapshot-handover.js';

export interface HandbackOptions {
  readonly database: DatabaseAccess;
  readonly table: RelationRef;
  readonly eventIdColumn: string;
  readonly slot: string;
  readonly publication: string;
  /** The poller's condition of unsent rows (`status = 'pending'`): only such rows are marked. */
  readonly pending: string;
  /** What marks a row sent for the poller, as a SET clause (`status = 'sent', sent_at = now()`). */
  readonly markSent: string;
}

export interface HandbackReport {
  /** Pending rows the relay confirmed: marked sent (in a dry run: to mark). */
  readonly marked: number;
  /** Pending rows the slot has not confirmed: left pending, for the poller to send. */
  readonly leftPending: number;
  /** Events after the slot's confirmed position, as the slot itself would stream them. */
  readonly unconfirmed: number;
  readonly confirmedAt: string | null;
  readonly slotDropped: boolean;
}

const FETCH = 1_000;

/**
 * The way back to polling (`outbox-relay handback`), with the relay stopped: every pending row
 * the relay has confirmed is marked sent with the operator's SET clause, so a poller started
 * afterwards sends only what the relay had not; then the slot is dropped (it would hold WAL for
 * nobody).
 *
 * What the relay confirmed is proved by the slot itself: peeking it (nothing consumed) decodes
 * exactly the transactions after its confirmed position, the ones `run` would stream next. A
 * row visible in a snapshot taken before the peek either committed before that position
 * (confirmed) or is among the peeked inserts (not confirmed: left pending). Rows are told apart
 * by event id, so rows inserted in a subtransaction (whose xmin a peek never shows) are no
 * exception. Rows committed after the snapshot are not touched: the poller sends them.
 */
export async function handback(options: HandbackOptions, context: { logger: Logger; dryRun: boolean }): Promise<HandbackReport> {
  const sql = await connectPostgres(options.database, 'outbox-relay-handback', { queryTimeoutMs: 0 });
  const peek = await connectPostgres(options.database, 'outbox-relay-handback', { queryTimeoutMs: 0 }).catch(async (error: unknown) => {
    await sql.end();
    throw error;
  });
  const table = `${pg.escapeIdentifier(options.table.schema)}.${pg.escapeIdentifier(options.table.name)}`;
  try {
    const slot = await readSlot(peek, options.slot);
    const unfinished = await unfinishedRecovery(peek, options.table);
    if (unfinished) throw new RelayError('SOURCE_RECOVERY_UNFINISHED', `\`outbox-relay ${unfinished.command}\` began at ${unfinished.since} and did not finish: finish it first (run it again), then hand back`);
    if (!slot.exists) throw new RelayError('SOURCE_SLOT_MISSING', `replication slot "${options.slot}" does not exist: there is no confirmed position to prove which rows the relay delivered (after a lost slot, \`outbox-relay recover\` first)`);
    if (slot.active) throw new RelayError('SOURCE_SLOT_BUSY', `replication slot "${options.slot}" is in use (pid ${slot.activePid ?? '?'}): stop every relay first (SIGTERM: it confirms what Kafka acknowledged), then run handback`);
    if (slot.walStatus === 'lost') throw new RelayError('SOURCE_SLOT_LOST', `replication slot "${options.slot}" is lost: its position proves nothing; \`outbox-relay recover\` first`);
    // The snapshot first, then the peek: every row the snapshot sees committed before the peek began.
    await sql.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await sql.query('SELECT 1');
    const unconfirmed = await unconfirmedEventIds(peek, options);
    context.logger.info({ slot: options.slot, confirmed: slot.confirmedFlushLsn, unconfirmed: unconfirmed.length }, `handback: ${unconfirmed.length} events after the slot's confirmed position stay pending`);
    const pending = `coalesce((${options.pending}), false)`;
    const notUnconfirmed = `NOT (${pg.escapeIdentifier(options.eventIdColumn)}::text = ANY ($1::text[]))`;
    const counts = await sql
      .query<{ marked: string; left: string }>(extended(`SELECT count(*) FILTER (WHERE ${notUnconfirmed}) AS marked, count(*) FILTER (WHERE NOT ${notUnconfirmed}) AS left FROM ${table} WHERE ${pending}`, [unconfirmed]))
      .catch((error: unknown) => {
        throw conditionRefused('--pending', options.pending, table, error);
      });
    const marked = Number(counts.rows[0]!.marked);
    const leftPending = Number(counts.rows[0]!.left);
    if (context.dryRun) {
      await sql.query('ROLLBACK');
      return { marked, leftPending, unconfirmed: unconfirmed.length, confirmedAt: slot.confirmedFlushLsn, slotDropped: false };
    }
    await markSent(sql, table, `${pending} AND ${notUnconfirmed}`, unconfirmed, options, context.logger, marked);
    await sql.query('COMMIT');
    await peek.query('SELECT pg_drop_replication_slot($1)', [options.slot]);
    context.logger.info({ slot: options.slot }, 'handback: slot dropped');
    return { marked, leftPending, unconfirmed: unconfirmed.length, confirmedAt: slot.confirmedFlushLsn, slotDropped: true };
  } catch (error) {
    await sql.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    await sql.end();
    await peek.end();
  }
}

/** The event ids of every outbox insert after the slot's confirmed position (peeked, not consumed). */
async function unconfirmedEventIds(client: pg.Client, options: HandbackOptions): Promise<string[]> {
  const decoder = new PgoutputDecoder();
  const ids: string[] = [];
  await client.query('BEGIN');
  try {
    await client.query(
      `DECLARE peeked NO SCROLL CURSOR FOR SELECT data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2)`,
      [options.slot, pg.escapeIdentifier(options.publication)],
    );
    for (;;) {
      const { rows } = await client.query<{ data: Buffer }>(`FETCH ${FETCH} FROM peeked`);
      if (rows.length === 0) break;
      for (const { data } of rows) {
        // A peeked change is the pgoutput message a stream carries after XLogData's header: framed so, the stream's decoder reads it.
        const message = decoder.decode(Buffer.concat([XLOG_DATA_HEADER, data]));
        if (message?.kind !== 'insert' || message.relation.schema !== options.table.schema || message.relation.name !== options.table.name) continue;
        const id = message.row[options.eventIdColumn];
        if (id !== null && id !== undefined) ids.push(String(id));
      }
    }
  } finally {
    await client.query('ROLLBACK');
  }
  return ids;
}

/** XLogData's 25-byte header ('w', start, end, send time): only its tag is read. */
const XLOG_DATA_HEADER = Buffer.concat([Buffer.from('w'), Buffer.alloc(24)]);

/** In the snapshot's transaction, by batches of row ids read through a cursor, with progress. */
async function markSent(sql: pg.Client, table: string, where: string, unconfirmed: readonly string[], options: HandbackOptions, logger: Logger, total: number): Promise<void> {
  await sql.query(extended(`DECLARE to_mark NO SCROLL CURSOR FOR SELECT ctid FROM ${table} WHERE ${where}`, [unconfirmed]));
  let done = 0;
  for (;;) {
    const { rows } = await sql.query<{ ctid: string }>(`FETCH ${FETCH} FROM to_mark`);
    if (rows.length === 0) break;
    await sql.query(extended(`UPDATE ${table} SET ${options.markSent} WHERE ctid = ANY ($1::tid[])`, [rows.map((row) => row.ctid)])).catch((error: unknown) => {
      throw conditionRefused('--mark-sent', options.markSent, table, error);
    });
    done += rows.length;
    logger.info({ marked: done, of: total }, 'handback: progress');
  }
  // Our own updates are visible to us: a SET clause that leaves a row pending would have the poller send it again.
  const { rows } = await sql.query<{ n: string }>(extended(`SELECT count(*)::text AS n FROM ${table} WHERE ${where}`, [unconfirmed]));
  if (Number(rows[0]!.n) > 0) {
    throw new RelayError('CUTOVER_CONDITION', `--mark-sent "${options.markSent}" leaves ${rows[0]!.n} of the rows it marked matching --pending "${options.pending}": a poller would send them again; nothing was changed. Expected a SET clause after which --pending is false, e.g. status = 'sent', sent_at = now()`);
  }
}

import pg from 'pg';
import type { Logger } from 'pino';
import { RelayError, sqlState } from '../errors.js';
import { readSlot } from '../observe/slot-monitor.js';
import type { DatabaseAccess } from '../pg-connection.js';
import type { TableReading } from '../decode/column-parsers.js';
import { outboxTableRefs, qualifiedName, quotedName, type Outbox } from '../outboxes.js';
import { unfinishedRecovery } from '../setup/recovery-marker.js';
import { PgoutputDecoder } from '../source/pgoutput.js';
import { conditionRefused, probeCondition } from './cutover.js';
import { extended, outboxTables, withHandoverConnections } from './snapshot-handover.js';

export interface HandbackOptions {
  readonly database: DatabaseAccess;
  /** The outbox tables handed back (a pattern: each tenant's); a message outbox has no poller. */
  readonly outboxes: readonly Outbox[];
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
  refuseComments(options.markSent);
  return withHandoverConnections(options.database, options.slot, options.outboxes, 'handback', async (sql, peek) => {
    const slot = await readSlot(peek, options.slot);
    const unfinished = await unfinishedRecovery(peek, outboxTableRefs(options.outboxes));
    if (unfinished) throw new RelayError('SOURCE_RECOVERY_UNFINISHED', `\`outbox-relay ${unfinished.command}\` began at ${unfinished.since} and did not finish: finish it first (run it again), then hand back`);
    if (!slot.exists) throw new RelayError('SOURCE_SLOT_MISSING', `replication slot "${options.slot}" does not exist: there is no confirmed position to prove which rows the relay delivered (after a lost slot, \`outbox-relay recover\` first)`);
    if (slot.active) throw new RelayError('SOURCE_SLOT_BUSY', `replication slot "${options.slot}" is in use (pid ${slot.activePid ?? '?'}): stop every relay first (SIGTERM: it confirms what Kafka acknowledged), then run handback`);
    if (slot.walStatus === 'lost') throw new RelayError('SOURCE_SLOT_LOST', `replication slot "${options.slot}" is lost: its position proves nothing; \`outbox-relay recover\` first`);
    const report = await markInSnapshot(sql, peek, options, context, slot.confirmedFlushLsn);
    if (context.dryRun) return { ...report, slotDropped: false };
    await peek.query('SELECT pg_drop_replication_slot($1)', [options.slot]);
    context.logger.info({ slot: options.slot }, 'handback: slot dropped');
    return { ...report, slotDropped: true };
  });
}

/** Counts, and (unless a dry run) marks, every outbox table in one snapshot taken before the peek; committed when done. */
async function markInSnapshot(sql: pg.Client, peek: pg.Client, options: HandbackOptions, context: { logger: Logger; dryRun: boolean }, confirmedAt: string | null): Promise<Omit<HandbackReport, 'slotDropped'>> {
  await sql.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
  try {
    // The snapshot is this first read's; every row it sees committed before the peek below
    // begins, and (once the WAL is flushed up to here) is decoded by it if the slot has not confirmed it.
    const tables = await outboxTables(sql, options.outboxes);
    if (tables.length === 0) throw new RelayError('CONFIG_INVALID', 'handback gives outbox tables back to their pollers, and the outboxes have none (a message outbox has no poller, and a pattern matched no table yet)');
    for (const { outbox } of tables) await probeCondition(sql, quotedName(outbox.table), options.pending);
    await flushWal(peek);
    const peeked = await unconfirmedEvents(peek, options, tables);
    if (peeked.messages > 0) {
      throw new RelayError('SOURCE_HANDBACK_UNCONFIRMED', `${peeked.messages} events of the message outboxes are after the slot's confirmed position: they exist only in the WAL the slot holds, and dropping it would lose them (no poller ever carries them); stop the applications emitting them, run the relay until it confirms them (stop it with SIGTERM), then hand back; nothing was changed`);
    }
    const pending = `coalesce((${options.pending}), false)`;
    const perTable: { readonly table: string; readonly where: string; readonly unconfirmed: readonly string[]; readonly marked: number }[] = [];
    let unconfirmed = 0;
    let leftPending = 0;
    for (const { outbox } of tables) {
      const ids = peeked.eventIds.get(qualifiedName(outbox.table)) ?? [];
      unconfirmed += ids.length;
      const table = quotedName(outbox.table);
      const notUnconfirmed = `NOT (${pg.escapeIdentifier(outbox.columns.eventId)}::text = ANY ($1::text[]))`;
      const counts = await sql.query<{ marked: string; left: string }>(extended(`SELECT count(*) FILTER (WHERE ${notUnconfirmed}) AS marked, count(*) FILTER (WHERE NOT ${notUnconfirmed}) AS left FROM ${table} WHERE ${pending}`, [ids]));
      perTable.push({ table, where: `${pending} AND ${notUnconfirmed}`, unconfirmed: ids, marked: Number(counts.rows[0]!.marked) });
      leftPending += Number(counts.rows[0]!.left);
    }
    context.logger.info({ slot: options.slot, confirmed: confirmedAt, unconfirmed }, `handback: ${unconfirmed} events after the slot's confirmed position stay pending`);
    const report = { marked: perTable.reduce((sum, table) => sum + table.marked, 0), leftPending, unconfirmed, confirmedAt };
    if (context.dryRun) {
      await sql.query('ROLLBACK');
      return report;
    }
    for (const table of perTable) await markSent(sql, table.table, table.where, table.unconfirmed, options, table.marked);
    await sql.query('COMMIT');
    return report;
  } catch (error) {
    await sql.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/**
 * A peek decodes only WAL already flushed: a row committed with synchronous_commit=off can be
 * visible before its commit record is. A synchronous commit of our own flushes every record
 * before it, so the peek sees every transaction the snapshot sees.
 */
async function flushWal(client: pg.Client): Promise<void> {
  await client.query('BEGIN');
  await client.query('SET LOCAL synchronous_commit = on');
  await client.query('SELECT pg_current_xact_id()');
  await client.query('COMMIT');
}

/** The SET clause is joined to the relay's own WHERE: a comment in it could hide that WHERE. */
function refuseComments(markSent: string): void {
  if (/--|\/\*|;/.test(markSent)) {
    throw new RelayError('CUTOVER_CONDITION', `--mark-sent "${markSent}" holds a comment or a semicolon; expected only a SET clause, e.g. status = 'sent', sent_at = now()`);
  }
}

/**
 * The event ids of every outbox table's inserts after the slot's confirmed position, by table,
 * and how many events of the message outboxes are there too (peeked, not consumed).
 */
async function unconfirmedEvents(client: pg.Client, options: HandbackOptions, tables: readonly TableReading[]): Promise<{ readonly eventIds: ReadonlyMap<string, readonly string[]>; readonly messages: number }> {
  const decoder = new PgoutputDecoder();
  const eventIdColumn = new Map(tables.map(({ outbox }) => [qualifiedName(outbox.table), outbox.columns.eventId]));
  const prefixes = new Set(options.outboxes.flatMap((outbox) => (outbox.kind === 'messages' ? [outbox.prefix] : [])));
  const eventIds = new Map<string, string[]>();
  let messages = 0;
  await client.query('BEGIN');
  try {
    await client.query(
      `DECLARE peeked NO SCROLL CURSOR FOR SELECT data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2, 'messages', $3)`,
      [options.slot, pg.escapeIdentifier(options.publication), String(prefixes.size > 0)],
    );
    for (;;) {
      const { rows } = await client.query<{ data: Buffer }>(`FETCH ${FETCH} FROM peeked`);
      if (rows.length === 0) break;
      for (const { data } of rows) {
        // A peeked change is the pgoutput message a stream carries after XLogData's header: framed so, the stream's decoder reads it.
        const message = decoder.decode(Buffer.concat([XLOG_DATA_HEADER, data]));
        if (message?.kind === 'message' && message.transactional && prefixes.has(message.prefix)) messages += 1;
        if (message?.kind !== 'insert') continue;
        const table = qualifiedName(message.relation);
        const column = eventIdColumn.get(table);
        const id = column === undefined ? undefined : message.row[column];
        if (id === null || id === undefined) continue;
        const ids = eventIds.get(table);
        if (ids) ids.push(String(id));
        else eventIds.set(table, [String(id)]);
      }
    }
  } finally {
    await client.query('ROLLBACK');
  }
  return { eventIds, messages };
}

/** XLogData's 25-byte header ('w', start, end, send time): only its tag is read. */
const XLOG_DATA_HEADER = Buffer.concat([Buffer.from('w'), Buffer.alloc(24)]);

/**
 * One UPDATE in the snapshot's transaction (a partitioned outbox has no row id unique across its
 * partitions to batch by). It must change exactly the rows counted, and leave none of them
 * pending, or nothing is changed.
 */
async function markSent(sql: pg.Client, table: string, where: string, unconfirmed: readonly string[], options: HandbackOptions, counted: number): Promise<void> {
  let updated: number;
  try {
    updated = (await sql.query(extended(`UPDATE ${table} SET ${options.markSent} WHERE ${where}`, [unconfirmed]))).rowCount ?? 0;
  } catch (error) {
    if (sqlState(error) === SERIALIZATION_FAILURE) {
      throw new RelayError('CUTOVER_CONDITION', `rows handback would mark were changed meanwhile (${(error as Error).message}): is the poller still running? Stop it, then run handback again; nothing was changed`, { cause: error });
    }
    throw conditionRefused('--mark-sent', options.markSent, table, error);
  }
  if (updated !== counted) {
    throw new RelayError('CUTOVER_CONDITION', `--mark-sent "${options.markSent}" changed ${updated} rows where ${counted} were to be marked; nothing was changed. Expected only a SET clause`);
  }
  // Our own updates are visible to us: a SET clause that leaves a row pending would have the poller send it again.
  const { rows } = await sql.query<{ n: string }>(extended(`SELECT count(*)::text AS n FROM ${table} WHERE ${where}`, [unconfirmed]));
  if (Number(rows[0]!.n) > 0) {
    throw new RelayError('CUTOVER_CONDITION', `--mark-sent "${options.markSent}" leaves ${rows[0]!.n} of the rows it marked matching --pending "${options.pending}": a poller would send them again; nothing was changed. Expected a SET clause after which --pending is false, e.g. status = 'sent', sent_at = now()`);
  }
}

const SERIALIZATION_FAILURE = '40001';

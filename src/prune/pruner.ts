import pg from 'pg';
import { connectPostgres, type DatabaseAccess } from '../pg-connection.js';
import type { Logger } from 'pino';
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { RelayError, sqlState } from '../errors.js';
import { refuseDuringRecovery } from '../setup/recovery-marker.js';
import { ensurePruneMarks, pruneMarksTable } from './marks.js';
import { qualifiedName } from '../outboxes.js';
import { onSlotServer, type SlotServer } from '../slot-server.js';

export interface PruneOptions {
  /** The primary, where rows are deleted and marks written. */
  readonly database: DatabaseAccess;
  /** Where the slot's confirmed position is read: the primary, or OUTBOX_REPLICA_URL's standby (its LSNs are the primary's). */
  readonly slotServer: SlotServer;
  readonly table: { readonly schema: string; readonly name: string };
  /** The metrics' `outbox` label: the table, or the pattern of OUTBOX_SOURCES that named it (one series per entry, not per tenant). */
  readonly label: string;
  readonly createdAtColumn: string;
  readonly slot: string;
  readonly retentionMs: number;
  readonly batchSize: number;
  readonly logger: Logger;
  readonly metrics: PruneMetrics;
}

export function createPruneMetrics(registry = new Registry()) {
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  return {
    registry,
    // By outbox (`schema.table`, or a pattern for all its tenants' tables: bounded however many tenants).
    rowsDeleted: new Counter({ name: 'outbox_prune_rows_deleted_total', help: 'Outbox rows deleted by the pruner, by outbox.', labelNames: ['outbox'], registers }),
    oldestRowAge: new Gauge({ name: 'outbox_prune_oldest_row_age_seconds', help: 'Age of the oldest row left, by outbox (the oldest of a pattern\'s tables).', labelNames: ['outbox'], registers }),
    tableBytes: new Gauge({ name: 'outbox_prune_table_bytes', help: 'Size of the outbox tables with their indexes and TOAST, by outbox (summed over a pattern\'s tables).', labelNames: ['outbox'], registers }),
    lastSuccess: new Gauge({ name: 'outbox_prune_last_success_timestamp_seconds', help: 'When a prune pass over every outbox table last completed.', registers }),
  };
}

export type PruneMetrics = ReturnType<typeof createPruneMetrics>;

export interface PruneResult {
  readonly deleted: number;
  /** The WAL position below which rows were provably confirmed, or null if none yet. */
  readonly safeBelowLsn: string | null;
  readonly oldestRowAgeSeconds: number;
  readonly totalBytes: number;
}

/**
 * Deletes outbox rows older than the retention — but never a row the relay has not confirmed.
 *
 * The outbox row does not know its commit LSN, so each pass records a mark: the WAL insert
 * position and the oldest transaction still running, read in one statement. Every transaction
 * older than that oldest running one had finished before the position was read, so its commit
 * lies below the mark's LSN. Once the slot's confirmed_flush_lsn passes a mark's LSN, rows
 * inserted by transactions older than the mark's oldest running transaction are confirmed and
 * may go. Transaction ids are compared as 64-bit (epoch-extended) values, so wraparound cannot
 * make an old id look new. Deletes publish nothing: the publication carries inserts only.
 */
const INSUFFICIENT_PRIVILEGE = '42501';

export class Pruner {
  private readonly table: string;
  private readonly marks: string;
  /** `schema.table`, for the logs. */
  readonly outbox: string;

  constructor(private readonly options: PruneOptions) {
    const { schema, name } = options.table;
    this.table = `${pg.escapeIdentifier(schema)}.${pg.escapeIdentifier(name)}`;
    this.outbox = qualifiedName(options.table);
    this.marks = pruneMarksTable(options.table);
  }

  async pass(): Promise<PruneResult> {
    const client = await connectPostgres(this.options.database, 'outbox-relay-prune');
    try {
      await ensurePruneMarks(client, this.options.table);
      const confirmed = await this.confirmedFlushLsn(client);
      // After reading the slot: recover marks before it drops or creates one and clears the mark
      // only when done, so a position read from a slot being recovered is always caught here.
      await refuseDuringRecovery(client, [this.options.table], 'prune');
      await this.recordMark(client);
      const mark = await this.newestConfirmedMark(client, confirmed);
      let deleted = 0;
      if (mark) {
        deleted = await this.deleteConfirmed(client, mark);
        await client.query(`DELETE FROM ${this.marks} WHERE wal_lsn < $1::pg_lsn`, [mark.walLsn]);
      } else {
        this.options.logger.info({ outbox: this.outbox, confirmed }, 'prune: no mark confirmed by the relay yet; nothing deleted this pass');
      }
      return { deleted, safeBelowLsn: mark?.walLsn ?? null, ...(await this.size(client)) };
    } catch (error) {
      if (sqlState(error) !== INSUFFICIENT_PRIVILEGE) throw error;
      const role = (await client.query<{ role: string }>('SELECT current_user AS role').catch(() => null))?.rows[0]?.role ?? 'the pruner\'s role';
      throw new RelayError(
        'SETUP_PRIVILEGE',
        `role "${role}" may not prune ${this.table} (${(error as Error).message}); it needs SELECT, DELETE on ${this.table} and SELECT, INSERT, DELETE on ${this.marks}: \`outbox-relay setup --print-roles\` prints the grants`,
        { cause: error },
      );
    } finally {
      await client.end();
    }
  }

  private async confirmedFlushLsn(client: pg.Client): Promise<string | null> {
    const { rows } = await onSlotServer(
      this.options.slotServer,
      client,
      (slotClient) => slotClient.query<{ lsn: string | null }>('SELECT confirmed_flush_lsn::text AS lsn FROM pg_replication_slots WHERE slot_name = $1', [this.options.slot]),
      'outbox-relay-prune',
    );
    if (!rows[0]) throw new RelayError('SOURCE_SLOT_MISSING', `replication slot "${this.options.slot}" does not exist; the pruner deletes only what the relay confirmed through it`);
    return rows[0].lsn;
  }

  private async recordMark(client: pg.Client): Promise<void> {
    // Read first, in a statement of its own: the snapshot is taken before the insert position is
    // read, and no transaction id of ours is in it yet.
    const { rows } = await client.query<{ wal_lsn: string; oldest: string }>(
      'SELECT pg_current_wal_insert_lsn()::text AS wal_lsn, pg_snapshot_xmin(pg_current_snapshot())::text AS oldest',
    );
    const sample = rows[0]!;
    await client.query(`INSERT INTO ${this.marks} (taken_at, wal_lsn, oldest_running_xid) VALUES (clock_timestamp(), $1, $2)`, [sample.wal_lsn, sample.oldest]);
  }

  private async newestConfirmedMark(client: pg.Client, confirmed: string | null): Promise<{ walLsn: string; oldestRunningXid: string; takenAt: Date } | null> {
    if (confirmed === null) return null;
    const { rows } = await client.query<{ wal_lsn: string; oldest_running_xid: string; taken_at: Date }>(
      `SELECT wal_lsn::text, oldest_running_xid::text, taken_at FROM ${this.marks} WHERE wal_lsn <= $1::pg_lsn ORDER BY wal_lsn DESC LIMIT 1`,
      [confirmed],
    );
    const row = rows[0];
    return row ? { walLsn: row.wal_lsn, oldestRunningXid: row.oldest_running_xid, takenAt: row.taken_at } : null;
  }

  /** Small batches, each its own transaction: short locks, progress visible, safe to stop. */
  private async deleteConfirmed(client: pg.Client, mark: { oldestRunningXid: string; takenAt: Date }): Promise<number> {
    const { logger, retentionMs, batchSize, metrics } = this.options;
    let total = 0;
    const started = Date.now();
    const createdAt = pg.escapeIdentifier(this.options.createdAtColumn);
    for (;;) {
      // A row's 64-bit xid is our own xid minus age(xmin): age() counts from our xid once we
      // have one, so take it first. A frozen row (age 2^31-1) counts as old, which is why rows
      // must also predate the mark's time.
      await client.query('BEGIN');
      let deleted = 0;
      let found: number;
      try {
        const own = await client.query<{ xid: string }>('SELECT pg_current_xact_id()::text AS xid');
        const { rows } = await client.query<{ part: string; ctids: string[] }>(
          `SELECT tableoid::int8::text AS part, array_agg(ctid)::text[] AS ctids FROM (
             SELECT tableoid, ctid FROM ${this.table}
              WHERE ${createdAt} < now() - make_interval(secs => $1::float8 / 1000)
                AND ${createdAt} < $2
                AND $3::bigint - age(xmin) < $4::bigint
              LIMIT $5) AS confirmed
            GROUP BY tableoid`,
          [retentionMs, mark.takenAt, own.rows[0]!.xid, mark.oldestRunningXid, batchSize],
        );
        found = rows.reduce((sum, row) => sum + row.ctids.length, 0);
        // A ctid is unique only within one table: in a partitioned outbox the same place holds a
        // row in every partition, so each partition's rows are deleted with its tableoid.
        for (const { part, ctids } of rows) {
          const result = await client.query(`DELETE FROM ${this.table} WHERE tableoid = $1::int8::oid AND ctid = ANY ($2::tid[])`, [part, ctids]);
          deleted += result.rowCount ?? 0;
        }
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      }
      total += deleted;
      metrics.rowsDeleted.inc({ outbox: this.options.label }, deleted);
      if (deleted > 0) logger.info({ outbox: this.outbox, deleted: total, elapsedMs: Date.now() - started }, 'prune: progress');
      if (found < batchSize) return total;
    }
  }

  private async size(client: pg.Client): Promise<Pick<PruneResult, 'oldestRowAgeSeconds' | 'totalBytes'>> {
    const { rows } = await client.query<{ age: number | null; bytes: string }>(
      `SELECT extract(epoch FROM now() - min(${pg.escapeIdentifier(this.options.createdAtColumn)}))::float8 AS age,
              pg_total_relation_size(${pg.escapeLiteral(this.table)})::text AS bytes FROM ${this.table}`,
    );
    return { oldestRowAgeSeconds: rows[0]?.age ?? 0, totalBytes: Number(rows[0]?.bytes ?? 0) };
  }
}

/**
 * A pass over every outbox table, each by its own Pruner; a pattern's tables as they are at the
 * pass (a tenant added since is pruned too). A table that fails does not keep the others from
 * being pruned; the pass then throws the first failure, and `lastSuccess` is set only by a pass
 * in which every table was pruned. The gauges are set per entry: the oldest row of its tables,
 * their bytes summed.
 */
export async function pruneAll(tables: () => Promise<readonly { readonly table: PruneOptions['table']; readonly createdAtColumn: string; readonly entry: string }[]>, options: Omit<PruneOptions, 'table' | 'createdAtColumn' | 'label'>): Promise<{ readonly deleted: number; readonly tables: number }> {
  const { metrics } = options;
  const byEntry = new Map<string, { age: number; bytes: number }>();
  let deleted = 0;
  let failure: unknown = null;
  const found = await tables();
  for (const { table, createdAtColumn, entry } of found) {
    try {
      const result = await new Pruner({ ...options, table, createdAtColumn, label: entry }).pass();
      deleted += result.deleted;
      const sum = byEntry.get(entry) ?? { age: 0, bytes: 0 };
      byEntry.set(entry, { age: Math.max(sum.age, result.oldestRowAgeSeconds), bytes: sum.bytes + result.totalBytes });
    } catch (error) {
      failure ??= error;
    }
  }
  for (const [entry, { age, bytes }] of byEntry) {
    metrics.oldestRowAge.set({ outbox: entry }, age);
    metrics.tableBytes.set({ outbox: entry }, bytes);
  }
  if (failure !== null) throw failure;
  metrics.lastSuccess.set(Date.now() / 1000);
  return { deleted, tables: found.length };
}

import { readFile } from 'node:fs/promises';
import pg from 'pg';
import { qualifiedTable, type Queryable } from './writer.js';

const CONSUMED_EVENTS_SQL = new URL('../../sql/002_consumed_events.sql', import.meta.url);

/** Creates the dedup table (sql/002_consumed_events.sql) under `table` when it is missing. */
export async function ensureConsumedEventsTable(db: Queryable, table = 'consumed_events'): Promise<void> {
  const target = qualifiedTable(table);
  const indexName = pg.escapeIdentifier(`${table.split('.').pop()!}_consumed_at_idx`);
  const sql = (await readFile(CONSUMED_EVENTS_SQL, 'utf8'))
    .replace(/\bconsumed_events_consumed_at_idx\b/g, indexName)
    .replace(/\bconsumed_events\b/g, target);
  await db.query(sql);
}

/**
 * Claims `eventId` for `consumerGroup` inside the caller's transaction: true when this is the
 * first time (apply the effect), false when the group already applied it (skip). A concurrent
 * claim of the same id waits for the first transaction and then sees its outcome.
 */
export async function claimEvent(tx: Queryable, consumerGroup: string, eventId: string, table = 'consumed_events'): Promise<boolean> {
  const result = (await tx.query(`INSERT INTO ${qualifiedTable(table)} (consumer_group, event_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, [consumerGroup, eventId])) as { rowCount: number | null };
  return result.rowCount === 1;
}

export interface PruneConsumedEventsOptions {
  /** Delete rows consumed longer ago than this. Must exceed how long an event can come back (topic retention). */
  readonly olderThanMs: number;
  /** @default 'consumed_events' */
  readonly table?: string;
  /** Only this group's rows; all groups when left out. */
  readonly consumerGroup?: string;
  /** Rows per DELETE (one short transaction each, so locks and WAL stay small). @default 10000 */
  readonly batchSize?: number;
}

/**
 * Retention for the dedup table: deletes rows older than `olderThanMs` in batches and returns how
 * many went. Pass a pool (each batch commits on its own), not a client inside a transaction.
 * An event delivered again after its row was pruned is applied again: keep rows longer than the
 * Kafka topic's retention (and the outbox's, if you replay from it).
 */
export async function pruneConsumedEvents(db: Queryable, options: PruneConsumedEventsOptions): Promise<number> {
  if (!Number.isFinite(options.olderThanMs) || options.olderThanMs < 0) throw new RangeError(`olderThanMs must be a non-negative number, got ${options.olderThanMs}`);
  const batchSize = options.batchSize ?? 10_000;
  if (!Number.isSafeInteger(batchSize) || batchSize < 1) throw new RangeError(`batchSize must be a positive integer, got ${batchSize}`);
  const table = qualifiedTable(options.table ?? 'consumed_events');
  const groupFilter = options.consumerGroup === undefined ? '' : 'AND consumer_group = $3';
  const params: unknown[] = [options.olderThanMs, batchSize];
  if (options.consumerGroup !== undefined) params.push(options.consumerGroup);
  let deleted = 0;
  for (;;) {
    const result = (await db.query(
      `DELETE FROM ${table} WHERE ctid = ANY (ARRAY(
         SELECT ctid FROM ${table}
          WHERE consumed_at < now() - make_interval(secs => $1::double precision / 1000) ${groupFilter}
          LIMIT $2))`,
      params,
    )) as { rowCount: number | null };
    const count = result.rowCount ?? 0;
    deleted += count;
    if (count < batchSize) return deleted;
  }
}

import pg from 'pg';
import { RelayError } from '../errors.js';
import { relationOids, relationsWhere, tablesMatching } from './catalog.js';
import { ensurePruneMarks, pruneMarksTable } from '../prune/marks.js';
import type { RelationRef } from '../source/messages.js';

/**
 * While `recover` or `cutover` runs, the new slot exists but the rows before it are not all
 * published yet: a crash then (kill -9, a lost connection) must not let `run` stream from that
 * slot, nor the pruner delete those rows. The mark is a comment on the pruner's marks table of
 * every outbox table the handover reads (the relay's own tables; every command knows them from
 * its outboxes), set before the slot is touched and cleared once every row is acknowledged. The
 * same command run again finds it and starts over.
 */
export type Handover = 'recover' | 'cutover';

const MARKS: Readonly<Record<Handover, string>> = { recover: 'outbox-relay: recovering since ', cutover: 'outbox-relay: cutover since ' };

export interface UnfinishedHandover {
  readonly command: Handover;
  readonly since: string;
}

/** Marks every table (a tenant per table: a commit per few hundred, not per table). */
export async function markRecovering(client: pg.ClientBase, tables: readonly RelationRef[], command: Handover): Promise<void> {
  const since = new Date().toISOString();
  await inTransactions(client, tables, async (table) => {
    await ensurePruneMarks(client, table);
    await client.query(`COMMENT ON TABLE ${pruneMarksTable(table)} IS '${MARKS[command]}${since}'`);
  });
}

export async function clearRecovering(client: pg.ClientBase, tables: readonly RelationRef[]): Promise<void> {
  await inTransactions(client, tables, (table) => client.query(`COMMENT ON TABLE ${pruneMarksTable(table)} IS NULL`));
}

/**
 * Tables per transaction: each COMMENT locks its table until the commit, and thousands of locks
 * in one transaction exhaust the lock table (max_locks_per_transaction × max_connections). A
 * table's mark stands on its own: marking needs no transaction around them all.
 */
const TABLES_PER_TRANSACTION = 500;

async function inTransactions(client: pg.ClientBase, tables: readonly RelationRef[], each: (table: RelationRef) => Promise<unknown>): Promise<void> {
  for (let from = 0; from < tables.length; from += TABLES_PER_TRANSACTION) {
    await client.query('BEGIN');
    try {
      for (const table of tables.slice(from, from + TABLES_PER_TRANSACTION)) await each(table);
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  }
}

/**
 * Which command began and did not finish, and when, on any of `outboxTables` (tables, or
 * patterns naming a schema per tenant: a handover marks every table it reads); or null. A few
 * catalog reads however many tenants (./catalog.ts); one, of the comments alone, when no
 * handover left a mark anywhere in the database (every start of a relay that is not recovering).
 */
export async function unfinishedRecovery(client: pg.ClientBase, outboxTables: readonly RelationRef[]): Promise<UnfinishedHandover | null> {
  // pg_description holds every comment of the database (a few thousand rows, the built-in
  // functions' among them), not a row per table: scanned for marks first, the tables are
  // listed only when a mark exists (with 10,000 tenants their listing cost 350 ms of each start).
  const { rows: anyMark } = await client.query(`SELECT 1 FROM pg_description WHERE classoid = 'pg_class'::regclass AND objsubid = 0 AND description LIKE 'outbox-relay: %' LIMIT 1`);
  if (anyMark.length === 0) return null;
  // Each table's marks table by its name as Postgres cut it (63 bytes, as CREATE cut it): a
  // pattern's tables listed first, so that a long tenant table's marks are found too.
  const tables: RelationRef[] = [];
  for (const table of outboxTables) tables.push(...(table.schema.includes('*') || table.name.includes('*') ? await tablesMatching(client, table) : [table]));
  const marks = (await relationOids(client, tables.map(pruneMarksTable))).values();
  const rows = await relationsWhere<{ comment: string }>(client, "obj_description(oid, 'pg_class') AS comment", marks, "obj_description(oid, 'pg_class') LIKE 'outbox-relay: %'");
  const comment = rows.map((row) => row.comment).sort()[0] ?? null;
  for (const [command, mark] of Object.entries(MARKS) as [Handover, string][]) {
    if (comment?.startsWith(mark)) return { command, since: comment.slice(mark.length) };
  }
  return null;
}

/** Refuses what must wait for `recover` or `cutover` to finish on any of `outboxTables`: streaming, setup, pruning. */
export async function refuseDuringRecovery(client: pg.ClientBase, outboxTables: readonly RelationRef[], what: string): Promise<void> {
  const unfinished = await unfinishedRecovery(client, outboxTables);
  if (unfinished === null) return;
  const again = unfinished.command === 'cutover' ? '`outbox-relay cutover` again with the same --pending' : '`outbox-relay recover` again';
  throw new RelayError(
    'SOURCE_RECOVERY_UNFINISHED',
    `cannot ${what}: \`outbox-relay ${unfinished.command}\` began at ${unfinished.since} and did not finish, so rows before the new slot may not be published yet; run ${again} (it starts over)`,
  );
}

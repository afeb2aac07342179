import pg from 'pg';
import { RelayError } from '../errors.js';
import { ensurePruneMarks, pruneMarksTable } from '../prune/marks.js';
import type { RelationRef } from '../source/messages.js';

/**
 * While `recover` runs, the new slot exists but the rows before it are not all published yet: a
 * crash then (kill -9, a lost connection) must not let `run` stream from that slot, nor the
 * pruner delete those rows. The mark is a comment on the pruner's marks table (the relay's own
 * table; every command knows it from OUTBOX_TABLE), set before the slot is touched and cleared
 * once every row is acknowledged. `recover` run again finds it and starts over.
 */
const MARK = 'outbox-relay: recovering since ';

export async function markRecovering(client: pg.ClientBase, table: RelationRef): Promise<void> {
  await ensurePruneMarks(client, table);
  await client.query(`COMMENT ON TABLE ${pruneMarksTable(table)} IS '${MARK}${new Date().toISOString()}'`);
}

export async function clearRecovering(client: pg.ClientBase, table: RelationRef): Promise<void> {
  await client.query(`COMMENT ON TABLE ${pruneMarksTable(table)} IS NULL`);
}

/** When an unfinished recovery began, or null. */
export async function unfinishedRecovery(client: pg.ClientBase, table: RelationRef): Promise<string | null> {
  // Inlined, not bound: a replication connection (the stream's check) speaks only simple queries.
  const { rows } = await client.query<{ comment: string | null }>(`SELECT obj_description(to_regclass(${pg.escapeLiteral(pruneMarksTable(table))}), 'pg_class') AS comment`);
  const comment = rows[0]?.comment ?? null;
  return comment?.startsWith(MARK) ? comment.slice(MARK.length) : null;
}

/** Refuses what must wait for `recover` to finish: streaming, setup, pruning. */
export async function refuseDuringRecovery(client: pg.ClientBase, table: RelationRef, what: string): Promise<void> {
  const since = await unfinishedRecovery(client, table);
  if (since === null) return;
  throw new RelayError(
    'SOURCE_RECOVERY_UNFINISHED',
    `cannot ${what}: \`outbox-relay recover\` began at ${since} and did not finish, so rows before the new slot may not be published yet; run \`outbox-relay recover\` again (it starts over)`,
  );
}

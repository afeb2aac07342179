import pg from 'pg';
import { RelayError } from '../errors.js';
import { ensurePruneMarks, pruneMarksTable } from '../prune/marks.js';
import type { RelationRef } from '../source/messages.js';

/**
 * While `recover` or `cutover` runs, the new slot exists but the rows before it are not all
 * published yet: a crash then (kill -9, a lost connection) must not let `run` stream from that
 * slot, nor the pruner delete those rows. The mark is a comment on the pruner's marks table (the
 * relay's own table; every command knows it from OUTBOX_TABLE), set before the slot is touched
 * and cleared once every row is acknowledged. The same command run again finds it and starts over.
 */
export type Handover = 'recover' | 'cutover';

const MARKS: Readonly<Record<Handover, string>> = { recover: 'outbox-relay: recovering since ', cutover: 'outbox-relay: cutover since ' };

export interface UnfinishedHandover {
  readonly command: Handover;
  readonly since: string;
}

export async function markRecovering(client: pg.ClientBase, table: RelationRef, command: Handover = 'recover'): Promise<void> {
  await ensurePruneMarks(client, table);
  await client.query(`COMMENT ON TABLE ${pruneMarksTable(table)} IS '${MARKS[command]}${new Date().toISOString()}'`);
}

export async function clearRecovering(client: pg.ClientBase, table: RelationRef): Promise<void> {
  await client.query(`COMMENT ON TABLE ${pruneMarksTable(table)} IS NULL`);
}

/** Which command began and did not finish, and when; or null. */
export async function unfinishedRecovery(client: pg.ClientBase, table: RelationRef): Promise<UnfinishedHandover | null> {
  // Inlined, not bound: a replication connection (the stream's check) speaks only simple queries.
  const { rows } = await client.query<{ comment: string | null }>(`SELECT obj_description(to_regclass(${pg.escapeLiteral(pruneMarksTable(table))}), 'pg_class') AS comment`);
  const comment = rows[0]?.comment ?? null;
  for (const [command, mark] of Object.entries(MARKS) as [Handover, string][]) {
    if (comment?.startsWith(mark)) return { command, since: comment.slice(mark.length) };
  }
  return null;
}

/** Refuses what must wait for `recover` or `cutover` to finish: streaming, setup, pruning. */
export async function refuseDuringRecovery(client: pg.ClientBase, table: RelationRef, what: string): Promise<void> {
  const unfinished = await unfinishedRecovery(client, table);
  if (unfinished === null) return;
  const again = unfinished.command === 'cutover' ? '`outbox-relay cutover` again with the same --pending' : '`outbox-relay recover` again';
  throw new RelayError(
    'SOURCE_RECOVERY_UNFINISHED',
    `cannot ${what}: \`outbox-relay ${unfinished.command}\` began at ${unfinished.since} and did not finish, so rows before the new slot may not be published yet; run ${again} (it starts over)`,
  );
}

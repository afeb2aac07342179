import pg from 'pg';
import { sqlState } from '../errors.js';
import type { RelationRef } from '../source/messages.js';
import { pruneMarksTable } from '../prune/marks.js';

/**
 * Whether a slot of this outbox ever existed, for the one question a missing slot raises on a
 * table with rows: is this a first start (the rows are a polling relay's, `cutover` takes over)
 * or was a slot lost (`recover` publishes what it may not have delivered)? The relay records each
 * slot it creates as a comment on the outbox's publication (Postgres keeps it with the
 * publication, dropping a slot leaves it); a pruner mark, taken only while a slot exists, is the
 * same evidence for outboxes set up before that record existed.
 */
const CREATED = 'outbox-relay: slot ';

/**
 * Returns null when recorded, else why not: only the publication's owner may comment on it, and a
 * missing record must not fail a setup whose slot already exists (the record is evidence, not state).
 */
export async function recordSlotCreated(client: pg.ClientBase, publication: string, slot: string): Promise<string | null> {
  try {
    await client.query(`COMMENT ON PUBLICATION ${pg.escapeIdentifier(publication)} IS ${pg.escapeLiteral(`${CREATED}${slot} created ${new Date().toISOString()}`)}`);
    return null;
  } catch (error) {
    if (sqlState(error) !== '42501') throw error;
    return `slot ${slot}: not recorded on publication ${publication} (${(error as Error).message}): if this slot is ever lost, \`setup\` cannot tell it from a first start and names both \`cutover\` and \`recover\``;
  }
}

export type SlotHistory = { readonly existed: true; readonly evidence: string } | { readonly existed: false };

export async function slotHistory(client: pg.ClientBase, target: { readonly publication: string; readonly slot: string; readonly table: RelationRef }): Promise<SlotHistory> {
  const { rows } = await client.query<{ comment: string | null }>(`SELECT obj_description(oid, 'pg_publication') AS comment FROM pg_publication WHERE pubname = $1`, [target.publication]);
  const comment = rows[0]?.comment ?? null;
  if (comment?.startsWith(`${CREATED}${target.slot} created `)) return { existed: true, evidence: `the publication "${target.publication}" records that slot ${comment.slice(CREATED.length)}` };
  const marks = pruneMarksTable(target.table);
  const { rows: found } = await client.query<{ found: string | null }>('SELECT to_regclass($1)::text AS found', [marks]);
  if (found[0]?.found) {
    const { rows: taken } = await client.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${marks}`);
    if (Number(taken[0]!.n) > 0) return { existed: true, evidence: `the pruner left ${taken[0]!.n} marks in ${marks}, which it takes only while a slot exists` };
  }
  return { existed: false };
}

import { readFile } from 'node:fs/promises';
import pg from 'pg';
import type { RelationRef } from '../source/messages.js';

const ROLES_SQL = new URL('../../sql/003_roles.sql', import.meta.url);

/** The roles sql/003_roles.sql creates, by what they do. */
export const ROLES = { relay: 'outbox_relay', pruner: 'outbox_pruner', writer: 'outbox_writer' } as const;

/**
 * What each role may do on an outbox table and on its prune marks table (with USAGE on the
 * schema): the grants of sql/003_roles.sql, which roles.test.ts holds equal to these. The
 * trigger that adds a new tenant's table gives them too (outbox-tables.ts).
 */
export const TABLE_GRANTS: readonly { readonly role: string; readonly table: string; readonly marks?: string }[] = [
  { role: ROLES.relay, table: 'SELECT' },
  { role: ROLES.pruner, table: 'SELECT, DELETE', marks: 'SELECT, INSERT, DELETE' },
  { role: ROLES.writer, table: 'INSERT' },
];

/**
 * sql/003_roles.sql for this outbox table: its schema, name and prune-marks table in place of
 * the defaults. Printed by `setup --print-roles`, applied by `setup --create-roles`.
 */
export async function rolesSql(table: RelationRef): Promise<string> {
  const template = await readFile(ROLES_SQL, 'utf8');
  const schema = pg.escapeIdentifier(table.schema);
  const qualified = (name: string) => `${schema}.${pg.escapeIdentifier(name)}`;
  return template
    .replace(/\bpublic\.event_outbox_prune_marks\b/g, qualified(`${table.name}_prune_marks`))
    .replace(/\bpublic\.event_outbox\b/g, qualified(table.name))
    .replace(/\bSCHEMA public\b/g, `SCHEMA ${schema}`);
}

import pg from 'pg';
import { likePatterns, qualifiedName } from '../outboxes.js';
import { PRUNE_MARKS_COLUMNS } from '../prune/marks.js';
import { tablesMatching } from './catalog.js';
import { TABLE_GRANTS } from './roles.js';
import type { RelationRef } from '../source/messages.js';

/** An outbox table (or every table a pattern names) and the column its rows' age is read from (status, prune). */
export type TableByAge = { readonly createdAtColumn: string } & ({ readonly table: RelationRef } | { readonly pattern: RelationRef });

/** A table found in the database, and the entry it came from (its name, or its pattern's: the metrics' label). */
export interface FoundTable {
  readonly table: RelationRef;
  readonly createdAtColumn: string;
  readonly entry: string;
}

/** The tables of each entry as they are now: a named one whether or not it exists, a pattern's those that exist, in name order. */
export async function findTables(client: pg.ClientBase, entries: readonly TableByAge[]): Promise<FoundTable[]> {
  const found: FoundTable[] = [];
  for (const entry of entries) {
    if ('table' in entry) {
      found.push({ table: entry.table, createdAtColumn: entry.createdAtColumn, entry: qualifiedName(entry.table) });
      continue;
    }
    for (const table of await tablesMatching(client, entry.pattern)) found.push({ table, createdAtColumn: entry.createdAtColumn, entry: qualifiedName(entry.pattern) });
  }
  return found;
}

/** PL/pgSQL giving `grant`'s privileges on the new table `created` (and its marks table) if its role exists. */
function grantsIfRoleExists(grant: (typeof TABLE_GRANTS)[number]): string {
  const role = pg.escapeIdentifier(grant.role);
  const statements = [
    `format('GRANT USAGE ON SCHEMA %I TO ${role}', created.nspname)`,
    `format('GRANT ${grant.table} ON %I.%I TO ${role}', created.nspname, created.relname)`,
    ...(grant.marks ? [`format('GRANT ${grant.marks} ON %I.%I TO ${role}', created.nspname, created.relname || '_prune_marks')`] : []),
  ];
  const body = statements.map((statement) => `            EXECUTE ${statement};`).join('\n');
  return `          IF to_regrole(${pg.escapeLiteral(grant.role)}) IS NOT NULL THEN\n${body}\n          END IF;`;
}

/** The function and event trigger that add a new tenant's outbox table to the publication: named after the publication. */
export function tenantTriggerName(publication: string): string {
  return `outbox_relay_${publication}_adds_tables`;
}

/**
 * The event trigger that adds every new table a pattern names to the publication, inside the
 * transaction that creates it: Postgres decodes a table's inserts only from the WAL written
 * after it joined the publication, and no row can be inserted into the table before its
 * CREATE TABLE ran, so from its very first row (in its creating transaction too) nothing of a
 * new tenant is missed. SECURITY DEFINER: a tenant's migration role owns its table but not the
 * publication. Made again (CREATE OR REPLACE) by every setup, with the patterns of the
 * configuration; dropped when there are none.
 */
export async function ensureTenantTrigger(client: pg.ClientBase, publication: string, patterns: readonly RelationRef[]): Promise<string | null> {
  const name = tenantTriggerName(publication);
  const { rows: existing } = await client.query('SELECT 1 FROM pg_event_trigger WHERE evtname = $1', [name]);
  if (patterns.length === 0) {
    // Nothing to say where there never was a pattern: a single table's setup says what it always said.
    if (existing.length === 0) return null;
    await client.query(`DROP EVENT TRIGGER ${pg.escapeIdentifier(name)}; DROP FUNCTION IF EXISTS public.${pg.escapeIdentifier(name)}()`);
    return `event trigger ${name}: dropped (no pattern in OUTBOX_SOURCES any more)`;
  }
  const conditions = patterns.map((pattern) => {
    const like = likePatterns(pattern);
    return `(d.schema_name LIKE ${pg.escapeLiteral(like.schema)} AND c.relname LIKE ${pg.escapeLiteral(like.name)})`;
  });
  await client.query(`
    CREATE OR REPLACE FUNCTION public.${pg.escapeIdentifier(name)}() RETURNS event_trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $body$
    DECLARE
      created record;
    BEGIN
      IF current_setting('outbox_relay.making_marks', true) = 'on' THEN
        RETURN;
      END IF;
      FOR created IN
        SELECT d.schema_name AS nspname, c.relname FROM pg_event_trigger_ddl_commands() d JOIN pg_class c ON c.oid = d.objid
         WHERE d.classid = 'pg_class'::regclass AND d.object_type = 'table' AND NOT c.relispartition
           AND c.relname NOT LIKE '%\\_prune\\_marks' AND (${conditions.join(' OR ')})
      LOOP
        EXECUTE format('ALTER PUBLICATION %I ADD TABLE %I.%I', ${pg.escapeLiteral(publication)}, created.nspname, created.relname);
        -- Its pruner's marks table, made here as setup makes every other tenant's (this trigger
        -- fires for it too: the setting keeps that firing from taking it for a tenant's table),
        -- and the grants. Neither may cost the tenant its table: a failure is a warning, and the
        -- pruner then names what is missing.
        BEGIN
          PERFORM set_config('outbox_relay.making_marks', 'on', true);
          EXECUTE format('CREATE TABLE IF NOT EXISTS %I.%I ${PRUNE_MARKS_COLUMNS}', created.nspname, created.relname || '_prune_marks');
          PERFORM set_config('outbox_relay.making_marks', 'off', true);
          -- The least-privilege roles that exist (setup --create-roles) get on it what they have on the others.
${TABLE_GRANTS.map(grantsIfRoleExists).join('\n')}
        EXCEPTION WHEN others THEN
          RAISE WARNING 'outbox-relay: %.% joined the publication, but its prune marks table or grants were not made (%): run outbox-relay setup', created.nspname, created.relname, SQLERRM;
        END;
      END LOOP;
    END
    $body$`);
  await client.query(`REVOKE ALL ON FUNCTION public.${pg.escapeIdentifier(name)}() FROM PUBLIC`);
  if (existing.length === 0) {
    await client.query(`CREATE EVENT TRIGGER ${pg.escapeIdentifier(name)} ON ddl_command_end WHEN TAG IN ('CREATE TABLE', 'CREATE TABLE AS', 'SELECT INTO') EXECUTE FUNCTION public.${pg.escapeIdentifier(name)}()`);
    return `event trigger ${name}: created (a new table named by ${patterns.map(qualifiedName).join(', ')} joins the publication in its creating transaction)`;
  }
  return `event trigger ${name}: exists (for ${patterns.map(qualifiedName).join(', ')})`;
}

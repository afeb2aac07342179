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

/** PL/pgSQL giving `grant`'s privileges on the new tenant table `tenant` (and its marks table) if its role exists. */
function grantsIfRoleExists(grant: (typeof TABLE_GRANTS)[number]): string {
  const role = pg.escapeIdentifier(grant.role);
  const statements = [
    `format('GRANT USAGE ON SCHEMA %I TO ${role}', tenant.nspname)`,
    `format('GRANT ${grant.table} ON %I.%I TO ${role}', tenant.nspname, tenant.relname)`,
    ...(grant.marks ? [`format('GRANT ${grant.marks} ON %I.%I TO ${role}', tenant.nspname, tenant.relname || '_prune_marks')`] : []),
  ];
  const body = statements.map((statement) => `            EXECUTE ${statement};`).join('\n');
  return `          IF to_regrole(${pg.escapeLiteral(grant.role)}) IS NOT NULL THEN\n${body}\n          END IF;`;
}

/** The function and event trigger that keep the publication on the tenants' outbox tables: named after the publication. */
export function tenantTriggerName(publication: string): string {
  return `outbox_relay_${publication}_adds_tables`;
}

/** The commands the event trigger follows: a table made, renamed or moved, a schema renamed. (A dropped table leaves every publication by itself.) */
const TRIGGER_TAGS = ['CREATE TABLE', 'CREATE TABLE AS', 'SELECT INTO', 'ALTER TABLE', 'ALTER SCHEMA'];

/**
 * The event trigger that keeps the publication on exactly the tables the patterns name, inside
 * the transaction of the DDL that changes them:
 * - a new table a pattern names joins it in its creating transaction: Postgres decodes a
 *   table's inserts only from the WAL written after it joined the publication, and no row can be
 *   inserted into the table before its CREATE TABLE ran, so from its very first row (in its
 *   creating transaction too) nothing of a new tenant is missed;
 * - a table renamed or moved into a pattern (ALTER TABLE ... RENAME / SET SCHEMA, ALTER SCHEMA
 *   ... RENAME) joins it, and one renamed out of every pattern (and not named outright) leaves
 *   it: a tenant's rename is that tenant's business, never a publication the relay refuses.
 * SECURITY DEFINER: a tenant's migration role owns its table but not the publication. An ALTER
 * TABLE costs two catalog lookups by oid. Made again (CREATE OR REPLACE) by every setup, with
 * the patterns of the configuration; dropped when there are none.
 */
export async function ensureTenantTrigger(client: pg.ClientBase, publication: string, patterns: readonly RelationRef[], named: readonly RelationRef[] = []): Promise<string | null> {
  const name = tenantTriggerName(publication);
  const { rows: existing } = await client.query<{ tags: string[] }>('SELECT evttags AS tags FROM pg_event_trigger WHERE evtname = $1', [name]);
  if (patterns.length === 0) {
    // Nothing to say where there never was a pattern: a single table's setup says what it always said.
    if (existing.length === 0) return null;
    await client.query(`DROP EVENT TRIGGER ${pg.escapeIdentifier(name)}; DROP FUNCTION IF EXISTS public.${pg.escapeIdentifier(name)}()`);
    return `event trigger ${name}: dropped (no pattern in OUTBOX_SOURCES any more)`;
  }
  const matches = patterns.map((pattern) => {
    const like = likePatterns(pattern);
    return `(n.nspname LIKE ${pg.escapeLiteral(like.schema)} AND c.relname LIKE ${pg.escapeLiteral(like.name)})`;
  });
  const kept = named.map((table) => `(n.nspname = ${pg.escapeLiteral(table.schema)} AND c.relname = ${pg.escapeLiteral(table.name)})`);
  const pub = pg.escapeLiteral(publication);
  await client.query(`
    CREATE OR REPLACE FUNCTION public.${pg.escapeIdentifier(name)}() RETURNS event_trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $body$
    DECLARE
      touched record;
      tenant record;
    BEGIN
      IF current_setting('outbox_relay.making_marks', true) = 'on' THEN
        RETURN;
      END IF;
      -- The tables each command touched: the table itself, or every table of a renamed schema.
      FOR touched IN
        SELECT DISTINCT c.oid FROM pg_event_trigger_ddl_commands() d JOIN pg_class c
            ON (d.object_type = 'table' AND c.oid = d.objid) OR (d.object_type = 'schema' AND c.relnamespace = d.objid)
         WHERE d.classid IN ('pg_class'::regclass, 'pg_namespace'::regclass)
      LOOP
        SELECT n.nspname, c.relname,
               (c.relkind IN ('r', 'p') AND NOT c.relispartition AND c.relname NOT LIKE '%\\_prune\\_marks'
                 AND (${matches.join(' OR ')})) AS tenant,
               (${kept.length > 0 ? kept.join(' OR ') : 'false'}) AS named,
               EXISTS (SELECT 1 FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid WHERE p.pubname = ${pub} AND r.prrelid = c.oid) AS published
          INTO tenant FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = touched.oid;
        IF tenant.published AND NOT tenant.tenant AND NOT tenant.named THEN
          EXECUTE format('ALTER PUBLICATION %I DROP TABLE %I.%I', ${pub}, tenant.nspname, tenant.relname);
          RAISE WARNING 'outbox-relay: %.% left the pattern of the publication %: its inserts are no tenant''s events from now on', tenant.nspname, tenant.relname, ${pub};
          CONTINUE;
        END IF;
        IF tenant.published OR NOT tenant.tenant THEN
          CONTINUE;
        END IF;
        EXECUTE format('ALTER PUBLICATION %I ADD TABLE %I.%I', ${pub}, tenant.nspname, tenant.relname);
        -- Its pruner's marks table, made here as setup makes every other tenant's (this trigger
        -- fires for it too: the setting keeps that firing from taking it for a tenant's table),
        -- and the grants. Neither may cost the tenant its table: a failure is a warning, and the
        -- pruner then names what is missing.
        BEGIN
          PERFORM set_config('outbox_relay.making_marks', 'on', true);
          EXECUTE format('CREATE TABLE IF NOT EXISTS %I.%I ${PRUNE_MARKS_COLUMNS}', tenant.nspname, tenant.relname || '_prune_marks');
          PERFORM set_config('outbox_relay.making_marks', 'off', true);
          -- The least-privilege roles that exist (setup --create-roles) get on it what they have on the others.
${TABLE_GRANTS.map(grantsIfRoleExists).join('\n')}
        EXCEPTION WHEN others THEN
          RAISE WARNING 'outbox-relay: %.% joined the publication, but its prune marks table or grants were not made (%): run outbox-relay setup', tenant.nspname, tenant.relname, SQLERRM;
        END;
      END LOOP;
    END
    $body$`);
  await client.query(`REVOKE ALL ON FUNCTION public.${pg.escapeIdentifier(name)}() FROM PUBLIC`);
  const follows = `(a table named by ${patterns.map(qualifiedName).join(', ')} joins the publication in its creating transaction, or when renamed into the pattern; one renamed out of it leaves)`;
  if (existing.length > 0 && TRIGGER_TAGS.every((tag) => existing[0]!.tags.includes(tag))) return `event trigger ${name}: exists ${follows}`;
  // An older trigger followed CREATE TABLE only: made again with the renames.
  await client.query(`${existing.length > 0 ? `DROP EVENT TRIGGER ${pg.escapeIdentifier(name)}; ` : ''}CREATE EVENT TRIGGER ${pg.escapeIdentifier(name)} ON ddl_command_end WHEN TAG IN (${TRIGGER_TAGS.map((tag) => pg.escapeLiteral(tag)).join(', ')}) EXECUTE FUNCTION public.${pg.escapeIdentifier(name)}()`);
  return `event trigger ${name}: ${existing.length > 0 ? 'made again to follow renames' : 'created'} ${follows}`;
}

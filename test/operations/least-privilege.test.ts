import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { createOutboxWriter } from '../../src/client/index.js';
import { ROLES, rolesSql } from '../../src/setup/roles.js';
import { cli } from '../harness/cli.js';
import { useTestOutbox } from '../harness/fixture.js';
import { eventually, RelayProcess } from '../harness/relay-process.js';

/**
 * The roles of sql/003_roles.sql are enough, and no more is needed: the relay streams and
 * reports as a LOGIN REPLICATION role with SELECT, the pruner prunes with SELECT and DELETE,
 * an application inserts through outbox_writer. A role short of a privilege gets the reason
 * and the fix, not a bare "permission denied".
 */
describe('least privilege', () => {
  const { outbox, reader } = useTestOutbox({ read: true });
  const app = `app_${outbox.id}`;
  const as = (role: string): Record<string, string> => {
    const url = new URL(outbox.databaseUrl);
    url.username = role;
    url.password = '';
    return outbox.relayEnv({ DATABASE_URL: url.toString() });
  };

  afterAll(async () => {
    await outbox.pool.query(`DROP ROLE IF EXISTS ${app}`);
  });

  it('setup --print-roles prints the grants for this table; setup --create-roles applies them', async () => {
    const printed = await cli(['setup', '--print-roles'], outbox.relayEnv());
    expect(printed.code, printed.stderr).toBe(0);
    expect(printed.stdout).toContain(`GRANT SELECT ON "public"."${outbox.table}" TO outbox_relay;`);
    expect(printed.stdout).toContain(`GRANT SELECT, INSERT, DELETE ON "public"."${outbox.table}_prune_marks" TO outbox_pruner;`);
    const created = await cli(['setup', '--create-roles'], outbox.relayEnv());
    expect(created.code, created.stderr).toBe(0);
    const { rows } = await outbox.pool.query<{ rolname: string; rolreplication: boolean; rolsuper: boolean }>(
      "SELECT rolname, rolreplication, rolsuper FROM pg_roles WHERE rolname LIKE 'outbox\\_%' ORDER BY rolname",
    );
    expect(rows).toEqual([
      { rolname: 'outbox_pruner', rolreplication: false, rolsuper: false },
      { rolname: 'outbox_relay', rolreplication: true, rolsuper: false },
      { rolname: 'outbox_writer', rolreplication: false, rolsuper: false },
    ]);
  });

  it('the relay (outbox_relay), an application (outbox_writer) and the pruner (outbox_pruner) each do their part with those grants alone', async () => {
    await outbox.pool.query(`CREATE ROLE ${app} LOGIN; GRANT outbox_writer TO ${app}`);
    const relay = new RelayProcess(as('outbox_relay')).start();
    const eventId = randomUUID();
    try {
      await relay.waitActive();
      const client = await outbox.pool.connect();
      try {
        await client.query(`BEGIN; SET LOCAL ROLE ${app}`);
        await createOutboxWriter({ table: `public.${outbox.table}` }).write(client, { eventId, aggregateType: 'invoice', aggregateId: 'inv_priv', eventType: 'invoice.paid', payload: { invoice_id: 'inv_priv' } });
        await client.query('COMMIT');
        // An application may insert, not delete.
        await client.query(`BEGIN; SET LOCAL ROLE ${app}`);
        await expect(client.query(`DELETE FROM ${outbox.table}`)).rejects.toThrow(/permission denied/);
        await client.query('ROLLBACK');
      } finally {
        client.release();
      }
      await reader.until('the event', (records) => records.some((record) => record.headers.event_id === eventId), 30_000, () => relay.tail());

      const status = await cli(['status', '--json'], as('outbox_relay'));
      expect(status.code, status.stderr).toBe(0);

      await eventually('the pruner, as outbox_pruner, to delete the confirmed row', async () => {
        const pass = await cli(['prune', '--retention', '0s'], as('outbox_pruner'));
        if (pass.code !== 0) throw new Error(pass.stderr);
        const { rows } = await outbox.pool.query(`SELECT 1 FROM ${outbox.table} WHERE event_id = $1`, [eventId]);
        return rows.length === 0 ? true : undefined;
      }, 30_000, 500);
    } finally {
      expect(await relay.stop()).toBe(0);
    }
  });

  it('a role short of a privilege is told which and how to fix it: setup without ownership, prune without DELETE', async () => {
    const setup = await cli(['setup'], { ...as('outbox_relay'), OUTBOX_TABLE: `public.other_${outbox.id}`, OUTBOX_SLOT: `other_${outbox.id}`, OUTBOX_PUBLICATION: `other_${outbox.id}` });
    expect(setup.code).toBe(1);
    expect(setup.stderr).toMatch(/\[SETUP_PRIVILEGE\]: role "outbox_relay" may not create the outbox table public\.other_\w+ \(permission denied for schema public\): run `outbox-relay setup` once as the owner/);

    const prune = await cli(['prune', '--retention', '0s'], as('outbox_relay'));
    expect(prune.code).toBe(1);
    expect(prune.stderr).toMatch(/\[SETUP_PRIVILEGE\]: role "outbox_relay" may not prune .* it needs SELECT, DELETE on .* `outbox-relay setup --print-roles` prints the grants/);
  });

  it('two setups creating the roles at the same moment both succeed (the second waits for the first, then finds the roles made)', async () => {
    // The file's roles under names of this test's own, so that they are new to the cluster.
    const suffix = outbox.id;
    const renamed = Object.values(ROLES).map((role) => [role, `${role}_${suffix}`] as const);
    let sql = await rolesSql({ schema: 'public', name: outbox.table });
    for (const [role, name] of renamed) sql = sql.replace(new RegExp(`\\b${role}\\b`, 'g'), name);
    const [first, second] = [await outbox.pool.connect(), await outbox.pool.connect()];
    try {
      await first.query('BEGIN');
      await first.query(sql);
      // The second's CREATE ROLE waits on the first's uncommitted one, then meets its name.
      const secondDone = second.query(sql);
      const secondPid = (second as unknown as { processID: number }).processID;
      await eventually('the second setup waiting on the first', async () => {
        const { rows } = await outbox.pool.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'", [secondPid]);
        return rows.length > 0 || undefined;
      }, 10_000, 50);
      await first.query('COMMIT');
      await expect(secondDone).resolves.toBeDefined();
      const { rows } = await outbox.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_roles WHERE rolname = ANY($1)', [renamed.map(([, name]) => name)]);
      expect(rows).toEqual([{ n: 3 }]);
    } finally {
      first.release();
      second.release();
      for (const [, name] of renamed) {
        await outbox.pool.query(`DROP OWNED BY ${name}`).catch(() => undefined);
        await outbox.pool.query(`DROP ROLE IF EXISTS ${name}`);
      }
    }
  });
});

// vitest: runs alone (it measures reads made before autovacuum analyzes a new database's catalog: an attempt slowed by a neighbour is the more often caught)
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { cli } from '../harness/cli.js';
import { TEST_RELAY_TIMINGS } from '../harness/outbox.js';
import { eventually, RelayProcess } from '../harness/relay-process.js';

const TENANTS = 1_500;

/**
 * Thousands of tenants' tables just made (a first setup, a burst of sign-ups): until autovacuum
 * analyzes the catalogs, Postgres's statistics of them describe the catalog before the tenants,
 * and a join of pg_class to pg_namespace planned on them compares every tenant's table with
 * every tenant's schema. `setup` and the relay's start read the catalog for every tenant's
 * table: those reads must stay linear in the tenants then too. With 4,000 tenants one such
 * listing took 5.1 s of a Postgres core (27 ms once analyzed). Counted, not timed: the rows
 * Postgres read in the database, from its own statistics.
 */
describe(`${TENANTS} tenants' tables, read before autovacuum analyzed the catalog`, () => {
  const services = inject('services');
  const admin = new pg.Pool({ connectionString: services.databaseUrl, max: 2 });
  const databases: string[] = [];

  afterAll(async () => {
    for (const database of databases) {
      await admin.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1', [database]).catch(() => undefined);
      await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => undefined);
    }
    await admin.end();
  });

  /** A database of its own (nothing else reads in it), with TENANTS tenant schemas (250 a transaction: each takes 4 locks, table, key, toast and its index). */
  async function databaseWithTenants(): Promise<string> {
    const database = `catalog_${randomUUID().replaceAll('-', '').slice(0, 8)}`;
    databases.push(database);
    await admin.query(`CREATE DATABASE ${database} TEMPLATE template0`);
    const url = new URL(services.databaseUrl);
    url.pathname = `/${database}`;
    const client = new pg.Client({ connectionString: url.toString() });
    await client.connect();
    try {
      for (let first = 1; first <= TENANTS; first += 250) {
        await client.query(`DO $$ BEGIN FOR i IN ${first}..${Math.min(first + 249, TENANTS)} LOOP
        EXECUTE format('CREATE SCHEMA %I', 'tenant_' || lpad(i::text, 5, '0'));
        EXECUTE format('CREATE TABLE %I.event_outbox (event_id text PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL, payload jsonb NOT NULL, headers jsonb, created_at timestamptz NOT NULL DEFAULT now())', 'tenant_' || lpad(i::text, 5, '0'));
      END LOOP; END $$`);
      }
    } finally {
      await client.end();
    }
    return url.toString();
  }

  /** Rows the database's scans returned and fetched so far, once the closed sessions' counts have arrived (they are sent as each ends). */
  async function rowsRead(database: string): Promise<number> {
    let last = -1;
    return eventually(`the statistics of ${database} to settle`, async () => {
      const client = await admin.connect();
      try {
        await client.query('SELECT pg_stat_clear_snapshot()');
        const { rows } = await client.query<{ n: string }>('SELECT (tup_returned + tup_fetched)::text AS n FROM pg_stat_database WHERE datname = $1', [database]);
        const now = Number(rows[0]!.n);
        const settled = now === last;
        last = now;
        return settled ? now : undefined;
      } finally {
        client.release();
      }
    }, 30_000, 300);
  }

  /** Whether autovacuum has analyzed neither pg_class nor pg_namespace yet: the planner still sees the catalog before the tenants. */
  async function statisticsStale(url: string): Promise<boolean> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const { rows } = await client.query<{ stale: boolean }>(
        `SELECT (SELECT reltuples FROM pg_class WHERE oid = 'pg_class'::regclass) < (SELECT count(*) FROM pg_class) / 4
            AND (SELECT reltuples FROM pg_class WHERE oid = 'pg_namespace'::regclass) < (SELECT count(*) FROM pg_namespace) / 4 AS stale`,
      );
      return rows[0]!.stale;
    } finally {
      await client.end();
    }
  }

  it('setup and the relay\'s start read the catalog in rows linear in the tenants', { timeout: 240_000 }, async () => {
    // Autovacuum may analyze the new database's catalog at any moment: an attempt it caught proves nothing and is made again.
    for (let attempt = 1; attempt <= 3; attempt += 1) {
      const url = await databaseWithTenants();
      const database = new URL(url).pathname.slice(1);
      const env = {
        DATABASE_URL: url,
        KAFKA_BROKERS: services.kafkaBrokers,
        OUTBOX_SOURCES: JSON.stringify([{ tables: 'tenant_*.event_outbox' }]),
        OUTBOX_SLOT: `slot_${database}`,
        OUTBOX_PUBLICATION: `pub_${database}`,
        OUTBOX_TOPIC_TEMPLATE: `itest-${database}.{aggregate_type}`,
        OUTBOX_DEAD_LETTER_TOPIC: `itest-${database}.dead-letter`,
        ...TEST_RELAY_TIMINGS,
      };
      const before = await rowsRead(database);
      const setup = await cli(['setup'], env);
      expect(setup.code, setup.stderr).toBe(0);
      expect(setup.stdout).toContain(`tables tenant_*.event_outbox: ${TENANTS} found`);
      const afterSetup = await rowsRead(database);
      const relay = new RelayProcess(env).start();
      try {
        await relay.waitActive();
      } finally {
        expect(await relay.stop()).toBe(0);
      }
      const afterStart = await rowsRead(database);
      if (!(await statisticsStale(url))) {
        process.stdout.write(`tenant catalog: autovacuum analyzed ${database} during attempt ${attempt}; again\n`);
        continue;
      }
      const perTenant = { setup: (afterSetup - before) / TENANTS, start: (afterStart - afterSetup) / TENANTS };
      process.stdout.write(`tenant catalog: ${TENANTS} tenants, catalog statistics stale: setup read ${afterSetup - before} rows (${perTenant.setup.toFixed(0)} a tenant), the relay's start ${afterStart - afterSetup} (${perTenant.start.toFixed(0)} a tenant)\n`);
      // A read comparing every tenant with every other is TENANTS rows a tenant by itself (the
      // quadratic reads made it 3,100 for each); a scan of pg_attribute, the largest catalog
      // read, is about 25.
      expect(perTenant.setup, 'rows setup read per tenant').toBeLessThan(TENANTS / 4);
      expect(perTenant.start, "rows the relay's start read per tenant").toBeLessThan(TENANTS / 4);
      return;
    }
    throw new Error('autovacuum analyzed the catalog during each of 3 attempts: nothing was measured on stale statistics');
  });
});

/**
 * A pattern whose tables' names are long: each one's prune marks table is named after it plus
 * `_prune_marks`, cut by Postgres at 63 bytes. The mark of an unfinished `recover` is on those
 * tables, and must be found there whatever the cut left of the suffix.
 */
describe('a pattern whose tables have names of over 51 bytes', () => {
  const services = inject('services');
  const pool = new pg.Pool({ connectionString: services.databaseUrl, max: 2 });
  const id = `l${randomUUID().replaceAll('-', '').slice(0, 8)}`;
  const table = 'invoices_and_credit_notes_of_the_billing_ledger_outbox_table';
  const schemas = [`${id}_tenant_a`, `${id}_tenant_b`];
  const env = {
    DATABASE_URL: services.databaseUrl,
    KAFKA_BROKERS: services.kafkaBrokers,
    OUTBOX_SOURCES: JSON.stringify([{ tables: `${id}_tenant_*.${table}` }]),
    OUTBOX_SLOT: `slot_${id}`,
    OUTBOX_PUBLICATION: `pub_${id}`,
    OUTBOX_TOPIC_TEMPLATE: `itest-${id}.{aggregate_type}`,
    OUTBOX_DEAD_LETTER_TOPIC: `itest-${id}.dead-letter`,
    ...TEST_RELAY_TIMINGS,
  };

  afterAll(async () => {
    await pool.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active', [env.OUTBOX_SLOT]).catch(() => undefined);
    await pool.query(`DROP EVENT TRIGGER IF EXISTS outbox_relay_pub_${id}_adds_tables; DROP FUNCTION IF EXISTS public.outbox_relay_pub_${id}_adds_tables(); DROP PUBLICATION IF EXISTS pub_${id}`).catch(() => undefined);
    for (const schema of schemas) await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await pool.end();
  });

  it('a recover killed half way keeps run refusing', { timeout: 120_000 }, async () => {
    for (const schema of schemas) {
      await pool.query(`CREATE SCHEMA ${schema}; CREATE TABLE ${schema}.${table} (event_id text PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL, payload jsonb NOT NULL, headers jsonb, created_at timestamptz NOT NULL DEFAULT now())`);
    }
    const setup = await cli(['setup'], env);
    expect(setup.code, setup.stderr).toBe(0);
    const { rows } = await pool.query<{ name: string }>("SELECT relname AS name FROM pg_class WHERE relnamespace = $1::regnamespace AND relkind = 'r' AND relname LIKE 'invoices%' AND relname <> $2", [schemas[0], table]);
    expect(rows.map((row) => row.name), 'the marks table, its name cut at 63 bytes').toEqual([`${table}_prune_marks`.slice(0, 63)]);
    // Enough rows that the recover below is caught half way.
    await pool.query(`INSERT INTO ${schemas[1]}.${table} (event_id, aggregate_type, aggregate_id, event_type, payload) SELECT gen_random_uuid()::text, 'invoice', 'inv_1', 'invoice.paid', '{}' FROM generate_series(1, 20000)`);
    await pool.query('SELECT pg_drop_replication_slot($1)', [env.OUTBOX_SLOT]);

    const recover = new RelayProcess(env, [], 'recover').start();
    await recover.waitForLog(/^recover: progress/, 60_000);
    await recover.kill9();
    const refused = new RelayProcess(env).start();
    expect(await refused.waitExit(30_000), refused.tail()).toBe(1);
    expect(refused.tail()).toMatch(/\[SOURCE_RECOVERY_UNFINISHED\]: cannot stream: `outbox-relay recover` began at .* and did not finish/);
  });
});

import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { cli } from '../harness/cli.js';
import { TEST_RELAY_TIMINGS } from '../harness/outbox.js';
import { RelayProcess } from '../harness/relay-process.js';

const OUTBOX_COLUMNS = 'event_id text PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL, payload jsonb NOT NULL, headers jsonb, created_at timestamptz NOT NULL DEFAULT now()';

/**
 * The start reads each distinct list of columns of a pattern's tables once (a schema per tenant:
 * thousands of tables of one shape) and the publication's tables by oid. What it finds must stay
 * per table: tables of another shape that read alike share a line, one whose columns the relay
 * ignores has its own, and each table of a shape that cannot be mapped is quarantined under its
 * own name.
 */
describe("a pattern's tables of different columns", () => {
  const services = inject('services');
  const pool = new pg.Pool({ connectionString: services.databaseUrl, max: 2 });
  const id = `s${randomUUID().replaceAll('-', '').slice(0, 8)}`;
  const tenant = (n: string) => `${id}_tenant_${n}`;
  const env = {
    DATABASE_URL: services.databaseUrl,
    KAFKA_BROKERS: services.kafkaBrokers,
    OUTBOX_SOURCES: JSON.stringify([{ tables: `${id}_tenant_*.event_outbox` }]),
    OUTBOX_SLOT: `slot_${id}`,
    OUTBOX_PUBLICATION: `pub_${id}`,
    OUTBOX_TOPIC_TEMPLATE: `itest-${id}.{aggregate_type}`,
    OUTBOX_DEAD_LETTER_TOPIC: `itest-${id}.dead-letter`,
    ...TEST_RELAY_TIMINGS,
  };
  const tables: Record<string, string> = {
    [tenant('a1')]: OUTBOX_COLUMNS,
    [tenant('a2')]: OUTBOX_COLUMNS,
    // Another shape that reads alike: a column's type the relay does not check.
    [tenant('a3')]: OUTBOX_COLUMNS.replace('aggregate_type text', 'aggregate_type varchar(40)'),
    // A column the relay ignores: its own line.
    [tenant('b1')]: `${OUTBOX_COLUMNS}, note text`,
    // One shape that cannot be mapped, twice: each quarantined under its own name.
    [tenant('z1')]: OUTBOX_COLUMNS.replace('event_id text PRIMARY KEY', 'id bigserial PRIMARY KEY'),
    [tenant('z2')]: OUTBOX_COLUMNS.replace('event_id text PRIMARY KEY', 'id bigserial PRIMARY KEY'),
  };

  afterAll(async () => {
    await pool.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active', [env.OUTBOX_SLOT]).catch(() => undefined);
    await pool.query(`DROP EVENT TRIGGER IF EXISTS outbox_relay_pub_${id}_adds_tables; DROP FUNCTION IF EXISTS public.outbox_relay_pub_${id}_adds_tables(); DROP PUBLICATION IF EXISTS pub_${id}`).catch(() => undefined);
    for (const schema of Object.keys(tables)) await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await pool.end();
  });

  it('setup and run say what they found of each shape, quarantine each unmappable table by its name, and status lists them', async () => {
    for (const [schema, columns] of Object.entries(tables)) await pool.query(`CREATE SCHEMA ${schema}; CREATE TABLE ${schema}.event_outbox (${columns})`);
    const setup = await cli(['setup'], env);
    expect(setup.code, setup.stderr).toBe(0);
    const pattern = `${id}_tenant_*.event_outbox`;
    expect(setup.stdout).toContain(`tables ${pattern}: 6 found`);
    expect(setup.stdout).toMatch(new RegExp(`^columns of 3 tables of ${pattern.replace('*', '\\*')}: .*; ignored \\(never read, never written\\): none$`, 'm'));
    expect(setup.stdout).toMatch(new RegExp(`^columns of 1 table of ${pattern.replace('*', '\\*')}: .*; ignored \\(never read, never written\\): note$`, 'm'));
    expect(setup.stdout).toMatch(/^payload column "payload" is jsonb: .* \(in each\)$/m);

    const relay = new RelayProcess(env).start();
    try {
      await relay.waitActive();
      for (const bad of [tenant('z1'), tenant('z2')]) {
        const line = relay.logs.find((each) => /quarantined/.test(each.msg) && JSON.stringify(each).includes(`"table":"${bad}.event_outbox"`));
        expect(line, relay.tail()).toBeDefined();
        expect(JSON.stringify(line)).toContain(`outbox table ${bad}.event_outbox has no column \\"event_id\\"`);
      }
      expect(relay.logs.filter((each) => /quarantined/.test(each.msg)), relay.tail()).toHaveLength(2);
    } finally {
      expect(await relay.stop()).toBe(0);
    }

    const status = await cli(['status'], env);
    expect(status.code, status.stderr).toBe(0);
    for (const bad of [tenant('z1'), tenant('z2')]) {
      expect(status.stdout).toMatch(new RegExp(`^quarantined +${bad}\\.event_outbox: outbox table ${bad}\\.event_outbox has no column "event_id"`, 'm'));
    }
    expect(status.stdout.match(/^quarantined /gm)).toHaveLength(2);
  });
});

/**
 * A publication of whole schemas (FOR TABLES IN SCHEMA, Postgres 15+) covers tables nobody added
 * one by one: the start reads a publication's tables as added, and must not miss these.
 */
describe('a publication of a whole schema', () => {
  const services = inject('services');
  const pool = new pg.Pool({ connectionString: services.databaseUrl, max: 2 });
  const id = `p${randomUUID().replaceAll('-', '').slice(0, 8)}`;
  const env = {
    DATABASE_URL: services.databaseUrl,
    KAFKA_BROKERS: services.kafkaBrokers,
    OUTBOX_TABLE: `${id}.event_outbox`,
    OUTBOX_SLOT: `slot_${id}`,
    OUTBOX_PUBLICATION: `pub_${id}`,
    OUTBOX_TOPIC_TEMPLATE: `itest-${id}.{aggregate_type}`,
    ...TEST_RELAY_TIMINGS,
  };

  afterAll(async () => {
    await pool.query(`DROP PUBLICATION IF EXISTS pub_${id}; DROP SCHEMA IF EXISTS ${id} CASCADE`).catch(() => undefined);
    await pool.end();
  });

  it('is refused when the schema holds a table that is no outbox, naming it', async () => {
    await pool.query(`CREATE SCHEMA ${id}; CREATE TABLE ${id}.event_outbox (${OUTBOX_COLUMNS}); CREATE TABLE ${id}.invoices (id int PRIMARY KEY)`);
    await pool.query(`CREATE PUBLICATION pub_${id} FOR TABLES IN SCHEMA ${id} WITH (publish = 'insert')`);
    const setup = await cli(['setup'], env);
    expect(setup.code, setup.stdout).toBe(1);
    expect(setup.stderr).toContain(`publication "pub_${id}" cannot be used: it covers [${id}.event_outbox_prune_marks, ${id}.invoices], which are no outboxes of this relay (expected exactly [${id}.event_outbox])`);
  });
});

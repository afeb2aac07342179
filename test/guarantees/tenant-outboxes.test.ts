import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { cli } from '../harness/cli.js';
import { createTopics, TopicReader } from '../harness/kafka.js';
import { TEST_RELAY_TIMINGS } from '../harness/outbox.js';
import { delay, eventually, RelayProcess } from '../harness/relay-process.js';

/**
 * A schema per tenant (OUTBOX_SOURCES {"tables": "<prefix>_*.event_outbox"}), tenants created
 * while the relay streams, by a migration role that owns its tables and not the publication:
 * each new tenant's rows, from the first one in its creating transaction, reach Kafka, across a
 * kill -9 of the relay.
 */
describe('a schema per tenant, tenants created under load', () => {
  const id = `t${randomUUID().replaceAll('-', '').slice(0, 8)}`;
  const tenantPrefix = `${id}_tenant`;
  const migrator = `${id}_migrator`;
  const slot = `slot_${id}`;
  const publication = `pub_${id}`;
  const topic = `itest-${id}.invoice`;
  const services = inject('services');
  const pool = new pg.Pool({ connectionString: services.databaseUrl, max: 8 });
  const tenants: string[] = [];
  let made = 0;
  const env = {
    DATABASE_URL: services.databaseUrl,
    KAFKA_BROKERS: services.kafkaBrokers,
    OUTBOX_SOURCES: JSON.stringify([{ tables: `${tenantPrefix}_*.event_outbox` }]),
    OUTBOX_SLOT: slot,
    OUTBOX_PUBLICATION: publication,
    OUTBOX_TOPIC_TEMPLATE: `itest-${id}.{aggregate_type}`,
    OUTBOX_DEAD_LETTER_TOPIC: `itest-${id}.dead-letter`,
    ...TEST_RELAY_TIMINGS,
  };

  /** A tenant as its migration makes it: schema, outbox table and its first rows, in one transaction, as the migration role. */
  async function createTenant(client: pg.ClientBase, firstRows: number): Promise<string> {
    const schema = `${tenantPrefix}_${String((made += 1)).padStart(4, '0')}`;
    await client.query('BEGIN');
    await client.query(`SET LOCAL ROLE ${migrator}`);
    await client.query(`CREATE SCHEMA ${schema}`);
    await client.query(`CREATE TABLE ${schema}.event_outbox (event_id text PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL, payload jsonb NOT NULL, headers jsonb, created_at timestamptz NOT NULL DEFAULT now())`);
    await insert(client, schema, firstRows);
    await client.query('COMMIT');
    // Written to by the other writers only once it exists.
    tenants.push(schema);
    return schema;
  }

  async function insert(client: pg.ClientBase, schema: string, rows: number): Promise<void> {
    for (let row = 0; row < rows; row += 1) {
      await client.query(`INSERT INTO ${schema}.event_outbox (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'invoice', $2, 'invoice.paid', '{}')`, [randomUUID(), `${schema}-inv`]);
    }
  }

  async function committedIds(): Promise<Map<string, string>> {
    const ids = new Map<string, string>();
    for (const schema of tenants) {
      const { rows } = await pool.query<{ event_id: string }>(`SELECT event_id FROM ${schema}.event_outbox`);
      for (const row of rows) ids.set(row.event_id, `${schema}.event_outbox`);
    }
    return ids;
  }

  beforeAll(async () => {
    await pool.query(`CREATE ROLE ${migrator} NOLOGIN; GRANT CREATE ON DATABASE ${new URL(services.databaseUrl).pathname.slice(1)} TO ${migrator}`);
    const client = await pool.connect();
    try {
      // Two tenants before setup: setup finds them and puts them in the publication.
      for (let tenant = 0; tenant < 2; tenant += 1) await createTenant(client, 0);
    } finally {
      client.release();
    }
    await createTopics([topic]);
    const done = await cli(['setup'], env);
    expect(done.code, done.stderr).toBe(0);
    expect(done.stdout).toContain(`tables ${tenantPrefix}_*.event_outbox: 2 found`);
    expect(done.stdout).toContain(`event trigger outbox_relay_${publication}_adds_tables: created`);
    // The tenants' column maps are alike: one line for them all, not one per tenant.
    expect(done.stdout).toContain(`columns of 2 tables of ${tenantPrefix}_*.event_outbox: event_id -> header event_id,`);
    expect(done.stdout).toContain(`payload column "payload" is jsonb: published as Postgres's JSON text (with OUTBOX_FORMAT=avro: its JSON encoded with the event type's Avro schema) (in each)`);
  });

  afterAll(async () => {
    await pool.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active', [slot]).catch(() => undefined);
    await pool.query(`DROP EVENT TRIGGER IF EXISTS outbox_relay_${publication}_adds_tables; DROP FUNCTION IF EXISTS public.outbox_relay_${publication}_adds_tables(); DROP PUBLICATION IF EXISTS ${publication}`).catch(() => undefined);
    for (const schema of tenants) await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await pool.query(`REVOKE ALL ON DATABASE ${new URL(services.databaseUrl).pathname.slice(1)} FROM ${migrator}; DROP ROLE IF EXISTS ${migrator}`).catch(() => undefined);
    await pool.end();
  });

  it("streams every tenant's rows, a new tenant's from the first row of its creating transaction, across kill -9", async () => {
    let relay = new RelayProcess(env).start();
    await relay.waitActive();
    let running = true;
    // Writers on the tenants that exist; a creator adding a tenant every 300 ms, rows in its
    // creating transaction and right after it.
    const writers = Array.from({ length: 2 }, async () => {
      const client = await pool.connect();
      try {
        while (running) {
          await insert(client, tenants[Math.floor(Math.random() * tenants.length)]!, 3);
          await delay(5);
        }
      } finally {
        client.release();
      }
    });
    const creator = (async () => {
      const client = await pool.connect();
      try {
        for (let created = 0; running && created < 12; created += 1) {
          const schema = await createTenant(client, 5);
          await insert(client, schema, 5);
          await delay(300);
        }
      } finally {
        client.release();
      }
    })();
    try {
      await delay(2_000);
      await relay.kill9();
      await eventually('the slot to be released', async () => ((await pool.query<{ active: boolean }>('SELECT active FROM pg_replication_slots WHERE slot_name = $1', [slot])).rows[0]?.active === false ? true : undefined));
      relay = new RelayProcess(env).start();
      await relay.waitActive();
      await creator;
    } finally {
      running = false;
      await Promise.all([...writers, creator]);
    }
    const committed = await committedIds();
    const reader = await new TopicReader().start([topic]);
    try {
      await reader.until(`all ${committed.size} committed events`, (records) => new Set(records.map((r) => r.headers.event_id)).size >= committed.size, 120_000, () => relay.tail());
      const delivered = new Set(reader.records.map((record) => record.headers.event_id!));
      const missed = [...committed.keys()].filter((eventId) => !delivered.has(eventId));
      expect(missed, 'committed events of a tenant that never arrived').toEqual([]);
      for (const record of reader.records) expect(record.headers.outbox_source).toBe(committed.get(record.headers.event_id!));
      const newTenants = tenants.slice(2);
      expect(newTenants.length).toBeGreaterThanOrEqual(5);
      process.stdout.write(`tenant outboxes: ${tenants.length} tenants (${newTenants.length} created under load), ${committed.size} events committed, ${delivered.size} delivered, 0 missed, ${reader.records.length - delivered.size} copies after a kill -9\n`);
    } finally {
      await reader.stop();
      await relay.stop();
    }
    // Every tenant's table joined the publication, each in its creating transaction.
    const { rows } = await pool.query<{ tables: string }>('SELECT count(*)::text AS tables FROM pg_publication_tables WHERE pubname = $1', [publication]);
    expect(Number(rows[0]!.tables)).toBe(tenants.length);
  });

  it("recover after the slot was dropped publishes every tenant's rows again, a tenant made meanwhile too; killed half way, it keeps run and the tenants' pruner refusing", { timeout: 180_000 }, async () => {
    const client = await pool.connect();
    try {
      for (const schema of tenants) await insert(client, schema, 2);
      await pool.query('SELECT pg_drop_replication_slot($1)', [slot]);
      // A tenant made while the slot is gone, with enough rows that the recover below is caught half way.
      const late = await createTenant(client, 1);
      await client.query(`INSERT INTO ${late}.event_outbox (event_id, aggregate_type, aggregate_id, event_type, payload) SELECT gen_random_uuid()::text, 'invoice', $1, 'invoice.paid', '{}' FROM generate_series(1, 20000)`, [`${late}-inv`]);
    } finally {
      client.release();
    }
    const committed = await committedIds();
    const dryRun = await cli(['recover', '--dry-run'], env);
    expect(dryRun.code, dryRun.stderr).toBe(0);
    expect(dryRun.stdout).toContain(`would publish again: ${committed.size} rows`);

    const first = new RelayProcess(env, [], 'recover').start();
    await first.waitForLog(/^recover: progress/, 60_000);
    await first.kill9();
    const refused = new RelayProcess(env).start();
    expect(await refused.waitExit(30_000), refused.tail()).toBe(1);
    expect(refused.tail()).toMatch(/\[SOURCE_RECOVERY_UNFINISHED\]: cannot stream: `outbox-relay recover` began at .* and did not finish/);
    const prune = await cli(['prune', '--retention', '0s'], env);
    expect(prune.code, prune.stdout).toBe(1);
    expect(prune.stderr).toMatch(/\[SOURCE_RECOVERY_UNFINISHED\]/);

    const recovered = await cli(['recover'], env, 120_000);
    expect(recovered.code, recovered.stderr).toBe(0);
    expect(recovered.stdout).toContain(`published again: ${committed.size} rows`);
    const relay = new RelayProcess(env).start();
    const reader = await new TopicReader().start([topic]);
    try {
      await relay.waitActive();
      // The stream goes on from the new slot: a tenant made now, and rows of the one made meanwhile.
      const client = await pool.connect();
      try {
        await createTenant(client, 3);
        await insert(client, tenants.at(-2)!, 3);
      } finally {
        client.release();
      }
      const all = await committedIds();
      await reader.until(`all ${all.size} committed events`, (records) => {
        const seen = new Set(records.map((record) => record.headers.event_id));
        return [...all.keys()].every((eventId) => seen.has(eventId));
      }, 120_000, () => relay.tail());
      process.stdout.write(`tenant outboxes, recover: ${tenants.length} tenants, ${committed.size} rows published again (a recover killed half way first), ${all.size} delivered after it\n`);
    } finally {
      await reader.stop();
      expect(await relay.stop()).toBe(0);
    }
  });

  it("refuses to stream while the trigger that adds new tenants' tables is disabled, naming it", async () => {
    await pool.query(`ALTER EVENT TRIGGER outbox_relay_${publication}_adds_tables DISABLE`);
    try {
      const run = await cli(['run'], env, 60_000);
      expect(run.code).not.toBe(0);
      expect(run.stderr).toContain(`[SETUP_PUBLICATION]: the event trigger outbox_relay_${publication}_adds_tables is missing or disabled`);
    } finally {
      await pool.query(`ALTER EVENT TRIGGER outbox_relay_${publication}_adds_tables ENABLE`);
    }
  });

  it('a tenant made after setup gets its prune marks and the least-privilege roles\' grants: the pruner prunes it, the relay reports it', { timeout: 120_000 }, async () => {
    const roles = await cli(['setup', '--create-roles'], env);
    expect(roles.code, roles.stderr).toBe(0);
    const client = await pool.connect();
    let late: string;
    try {
      late = await createTenant(client, 2);
    } finally {
      client.release();
    }
    const as = (role: string) => {
      const url = new URL(services.databaseUrl);
      url.username = role;
      url.password = '';
      return { ...env, DATABASE_URL: url.toString() };
    };
    const prune = await cli(['prune', '--retention', '0s'], as('outbox_pruner'));
    expect(prune.code, `${prune.stdout}\n${prune.stderr}`).toBe(0);
    const status = await cli(['status', '--json'], as('outbox_relay'));
    expect(status.code, status.stderr).toBe(0);
    const reported = (JSON.parse(status.stdout) as { outboxes: { table: string; rows: number }[] }).outboxes.find((outbox) => outbox.table === `${late}.event_outbox`);
    expect(reported, status.stdout).toMatchObject({ rows: 2 });
  });
});

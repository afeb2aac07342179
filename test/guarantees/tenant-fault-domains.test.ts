import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { cli } from '../harness/cli.js';
import { get, metric } from '../harness/http.js';
import { createTopics, TopicReader, type ConsumedRecord } from '../harness/kafka.js';
import { TEST_RELAY_TIMINGS } from '../harness/outbox.js';
import { freePort } from '../harness/ports.js';
import { delay, eventually, RelayProcess } from '../harness/relay-process.js';

/**
 * A tenant is a fault domain (a schema per tenant, `<prefix>_*.event_outbox`): under load, with
 * two writers per tenant and a kill -9 of the relay, tenants are created (rows in the creating
 * transaction), dropped, renamed out of and into the pattern; one tenant's table cannot be
 * mapped at all, another's migration drops a mapped column. Every committed event of every
 * healthy tenant arrives, in order per aggregate; the broken tenants' rows are dead letters
 * naming the table, and reach the topic after the fix (`replay`); the relay never stops.
 */
describe('a tenant is a fault domain', () => {
  const id = `f${randomUUID().replaceAll('-', '').slice(0, 8)}`;
  const prefix = `${id}_tenant`;
  const slot = `slot_${id}`;
  const publication = `pub_${id}`;
  const topic = `itest-${id}.invoice`;
  const deadLetterTopic = `itest-${id}.dead-letter`;
  const services = inject('services');
  const pool = new pg.Pool({ connectionString: services.databaseUrl, max: 24 });
  const schemas = new Set<string>();
  const started = new Date();
  let httpPort = 0;
  const env = () => ({
    DATABASE_URL: services.databaseUrl,
    KAFKA_BROKERS: services.kafkaBrokers,
    OUTBOX_SOURCES: JSON.stringify([{ tables: `${prefix}_*.event_outbox` }]),
    OUTBOX_SLOT: slot,
    OUTBOX_PUBLICATION: publication,
    OUTBOX_TOPIC_TEMPLATE: `itest-${id}.{aggregate_type}`,
    OUTBOX_DEAD_LETTER_TOPIC: deadLetterTopic,
    ...TEST_RELAY_TIMINGS,
    OUTBOX_HTTP_PORT: String(httpPort),
  });

  const OUTBOX_COLUMNS = 'event_id text PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text, payload jsonb NOT NULL, headers jsonb, created_at timestamptz NOT NULL DEFAULT now()';

  /** Committed events by id: the tenant table it was written to, its aggregate and its place in that aggregate. */
  const committed = new Map<string, { readonly table: string; readonly aggregate: string; readonly seq: number }>();

  async function insert(client: pg.ClientBase, schema: string, aggregate: string, seq: number): Promise<string> {
    const eventId = randomUUID();
    await client.query(`INSERT INTO ${schema}.event_outbox (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'invoice', $2, 'invoice.paid', $3)`, [eventId, aggregate, JSON.stringify({ seq })]);
    return eventId;
  }

  /** Two writers on one tenant, each its own aggregate, recording what committed. */
  class TenantWriters {
    private running = true;
    private readonly loops: Promise<void>[];

    constructor(readonly schema: string) {
      this.loops = [1, 2].map((writer) => this.write(`${schema}-agg${writer}`));
    }

    private async write(aggregate: string): Promise<void> {
      const client = await pool.connect();
      try {
        for (let seq = 1; this.running; seq += 1) {
          const eventId = await insert(client, this.schema, aggregate, seq);
          committed.set(eventId, { table: `${this.schema}.event_outbox`, aggregate, seq });
          await delay(10);
        }
      } finally {
        client.release();
      }
    }

    async stop(): Promise<void> {
      this.running = false;
      await Promise.all(this.loops);
    }
  }

  /** A tenant as its migration makes it: schema, table and its first rows in one transaction. */
  async function createTenant(schema: string, firstRows: number): Promise<void> {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(`CREATE SCHEMA ${schema}; CREATE TABLE ${schema}.event_outbox (${OUTBOX_COLUMNS})`);
      const ids: string[] = [];
      for (let seq = 1; seq <= firstRows; seq += 1) ids.push(await insert(client, schema, `${schema}-first`, seq));
      await client.query('COMMIT');
      ids.forEach((eventId, index) => committed.set(eventId, { table: `${schema}.event_outbox`, aggregate: `${schema}-first`, seq: index + 1 }));
      schemas.add(schema);
    } finally {
      client.release();
    }
  }

  const tenant = (n: string) => `${prefix}_${n}`;

  beforeAll(async () => {
    httpPort = await freePort();
    for (const n of ['0001', '0002', '0003', '0004']) await createTenant(tenant(n), 0);
    // Not a tenant yet: renamed into the pattern later. Its rows from before are no tenant's events.
    await pool.query(`CREATE SCHEMA ${id}_other_0007; CREATE TABLE ${id}_other_0007.event_outbox (${OUTBOX_COLUMNS})`);
    schemas.add(`${id}_other_0007`);
    await pool.query(`INSERT INTO ${id}_other_0007.event_outbox (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES ('before-${id}', 'invoice', 'x', 'invoice.paid', '{}')`);
    await createTopics([topic, deadLetterTopic]);
    const done = await cli(['setup'], env());
    expect(done.code, done.stderr).toBe(0);
  });

  afterAll(async () => {
    await pool.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active', [slot]).catch(() => undefined);
    await pool.query(`DROP EVENT TRIGGER IF EXISTS outbox_relay_${publication}_adds_tables; DROP FUNCTION IF EXISTS public.outbox_relay_${publication}_adds_tables(); DROP PUBLICATION IF EXISTS ${publication}`).catch(() => undefined);
    for (const schema of [...schemas, `${id}_gone_0002`, tenant('0007'), tenant('zbad')]) await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await pool.end();
  });

  it("streams every healthy tenant's events through renames, drops, an unmappable table, a dropped column and kill -9; the broken tenants' rows are dead letters, delivered after the fix", { timeout: 240_000 }, async () => {
    let relay = new RelayProcess(env()).start();
    await relay.waitActive();
    const writers = new Map<string, TenantWriters>();
    const write = (schema: string) => writers.set(schema, new TenantWriters(schema));
    const stopWriting = async (schema: string) => {
      await writers.get(schema)?.stop();
      writers.delete(schema);
    };
    for (const n of ['0001', '0002', '0003', '0004']) write(tenant(n));
    const deadLettered = new Map<string, string>();
    try {
      await delay(800);
      // A tenant created under load, rows in its creating transaction.
      await createTenant(tenant('0005'), 3);
      write(tenant('0005'));
      // A tenant whose table the relay cannot map: no event_id, no aggregate, no payload.
      const bad = tenant('zbad');
      await pool.query(`CREATE SCHEMA ${bad}; CREATE TABLE ${bad}.event_outbox (id bigserial PRIMARY KEY, data text, created_at timestamptz NOT NULL DEFAULT now())`);
      schemas.add(bad);
      await pool.query(`INSERT INTO ${bad}.event_outbox (data) SELECT 'row ' || n FROM generate_series(1, 5) AS n`);
      await delay(500);
      // A tenant renamed out of the pattern: what it committed before is delivered, what comes after is no tenant's.
      await stopWriting(tenant('0002'));
      await pool.query(`ALTER SCHEMA ${tenant('0002')} RENAME TO ${id}_gone_0002`);
      schemas.delete(tenant('0002'));
      const goneIds = [];
      for (let seq = 1; seq <= 3; seq += 1) goneIds.push(await insert(pool as unknown as pg.ClientBase, `${id}_gone_0002`, 'gone', seq));
      // A schema renamed into the pattern: a tenant from then on.
      await pool.query(`ALTER SCHEMA ${id}_other_0007 RENAME TO ${tenant('0007')}`);
      schemas.delete(`${id}_other_0007`);
      schemas.add(tenant('0007'));
      write(tenant('0007'));
      // A tenant's migration drops a mapped column; its application writes on without it.
      await stopWriting(tenant('0004'));
      await pool.query(`ALTER TABLE ${tenant('0004')}.event_outbox DROP COLUMN event_type`);
      const withoutType: string[] = [];
      for (let seq = 1; seq <= 4; seq += 1) {
        const eventId = randomUUID();
        await pool.query(`INSERT INTO ${tenant('0004')}.event_outbox (event_id, aggregate_type, aggregate_id, payload) VALUES ($1, 'invoice', 'broken', '{}')`, [eventId]);
        withoutType.push(eventId);
      }
      await delay(800);
      // kill -9, and a start that meets all of the above in the catalog.
      await relay.kill9();
      await eventually('the slot to be released', async () => ((await pool.query<{ active: boolean }>('SELECT active FROM pg_replication_slots WHERE slot_name = $1', [slot])).rows[0]?.active === false ? true : undefined));
      relay = new RelayProcess(env()).start();
      await relay.waitActive();
      expect(relay.logs.some((line) => /quarantined/.test(line.msg) && JSON.stringify(line).includes(`"table":"${bad}.event_outbox"`)), relay.tail()).toBe(true);
      // A tenant dropped under load: what it committed before is delivered.
      await stopWriting(tenant('0003'));
      await pool.query(`DROP SCHEMA ${tenant('0003')} CASCADE`);
      schemas.delete(tenant('0003'));
      await delay(800);
      for (const schema of [...writers.keys()]) await stopWriting(schema);

      const reader = await new TopicReader().start([topic, deadLetterTopic]);
      try {
        const events = (records: readonly ConsumedRecord[]) => records.filter((record) => record.topic === topic);
        await reader.until(`all ${committed.size} committed events of the healthy tenants`, (records) => {
          const seen = new Set(events(records).map((record) => record.headers.event_id));
          return [...committed.keys()].every((eventId) => seen.has(eventId));
        }, 120_000, () => relay.tail());
        await reader.until('dead letters of every broken row', (records) => {
          const letters = records.filter((record) => record.topic === deadLetterTopic);
          return new Set(letters.filter((r) => r.headers.dead_letter_source_table === `${bad}.event_outbox`).map((r) => JSON.parse(r.value!.toString()).id)).size === 5
            && withoutType.every((eventId) => letters.some((r) => r.headers.event_id === eventId));
        }, 60_000, () => relay.tail());
        const delivered = events(reader.records);
        // In order per aggregate, counting each event at its first arrival (a kill -9 sends some again).
        const firstSeen = new Set<string>();
        const lastSeq = new Map<string, number>();
        for (const record of delivered) {
          const eventId = record.headers.event_id!;
          if (firstSeen.has(eventId)) continue;
          firstSeen.add(eventId);
          const event = committed.get(eventId);
          expect(event, `an event nobody committed to a tenant: ${eventId} from ${record.headers.outbox_source}`).toBeDefined();
          expect(record.headers.outbox_source).toBe(event!.table);
          expect(event!.seq, `order of ${event!.aggregate}`).toBeGreaterThan(lastSeq.get(event!.aggregate) ?? 0);
          lastSeq.set(event!.aggregate, event!.seq);
        }
        expect(goneIds.filter((eventId) => firstSeen.has(eventId)), 'rows of a schema renamed out of the pattern').toEqual([]);
        expect(firstSeen.has(`before-${id}`), 'a row from before its schema joined the pattern').toBe(false);
        for (const record of reader.records.filter((r) => r.topic === deadLetterTopic)) deadLettered.set(record.headers.event_id ?? JSON.parse(record.value!.toString()).id, record.headers.dead_letter_code!);
        expect(new Set(reader.records.filter((r) => r.topic === deadLetterTopic && r.headers.dead_letter_source_table === `${bad}.event_outbox`).map((r) => r.headers.dead_letter_code))).toEqual(new Set(['OUTBOX_TABLE_QUARANTINED']));
        const body = (await get(httpPort, '/metrics')).body;
        expect(metric(body, 'outbox_relay_outbox_table_quarantined', `table="${bad}.event_outbox"`)).toBe(1);
        expect(metric(body, 'outbox_relay_outbox_table_quarantined', `table="${tenant('0004')}.event_outbox"`)).toBe(1);
        const status = await cli(['status'], env());
        expect(status.code, status.stderr).toBe(0);
        expect(status.stdout).toMatch(new RegExp(`^quarantined +${bad}\\.event_outbox: outbox table ${bad}\\.event_outbox has no column "event_id"`, 'm'));
        expect(status.stdout).toMatch(new RegExp(`^quarantined +${tenant('0004')}\\.event_outbox: .*no column "event_type"`, 'm'));
        process.stdout.write(`tenant fault domains: ${committed.size} events of healthy tenants committed, ${firstSeen.size} delivered, 0 missed, ${delivered.length - firstSeen.size} copies after a kill -9; ${deadLettered.size} rows of 2 quarantined tables dead-lettered\n`);

        // The fix: the bad table gets the outbox's columns, the dropped column comes back. New rows flow; the dead-lettered ones are replayed.
        await pool.query(`ALTER TABLE ${bad}.event_outbox ADD COLUMN event_id text, ADD COLUMN aggregate_type text, ADD COLUMN aggregate_id text, ADD COLUMN event_type text, ADD COLUMN payload jsonb`);
        await pool.query(`UPDATE ${bad}.event_outbox SET event_id = 'zbad-' || id, aggregate_type = 'invoice', aggregate_id = 'zbad', event_type = 'invoice.paid', payload = json_build_object('data', data)`);
        await pool.query(`ALTER TABLE ${tenant('0004')}.event_outbox ADD COLUMN event_type text; UPDATE ${tenant('0004')}.event_outbox SET event_type = 'invoice.paid' WHERE event_type IS NULL`);
        const afterFix = [await insert(pool as unknown as pg.ClientBase, bad, 'zbad', 100), await insert(pool as unknown as pg.ClientBase, tenant('0004'), 'fixed', 1)];
        await reader.until('rows written after the fix', (records) => afterFix.every((eventId) => events(records).some((r) => r.headers.event_id === eventId)), 60_000, () => relay.tail());
        await eventually('the quarantine to be lifted', async () => (metric((await get(httpPort, '/metrics')).body, 'outbox_relay_outbox_table_quarantined', `table="${bad}.event_outbox"`) === 0 ? true : undefined));
        const replayBad = await cli(['replay', '--since', started.toISOString()], { ...env(), OUTBOX_SOURCES: JSON.stringify([{ table: `${bad}.event_outbox` }]) });
        expect(replayBad.code, replayBad.stderr).toBe(0);
        const replayColumn = await cli(['replay', '--event-id', withoutType.join(',')], env());
        expect(replayColumn.code, replayColumn.stderr).toBe(0);
        const zbadIds = [1, 2, 3, 4, 5].map((n) => `zbad-${n}`);
        await reader.until('the quarantined rows, replayed', (records) => [...zbadIds, ...withoutType].every((eventId) => events(records).some((r) => r.headers.event_id === eventId)), 60_000);
      } finally {
        await reader.stop();
      }
      // The publication follows the pattern: the renamed-out tenant left it, the renamed-in one joined, the dropped one is gone.
      const { rows } = await pool.query<{ name: string }>("SELECT schemaname || '.' || tablename AS name FROM pg_publication_tables WHERE pubname = $1 ORDER BY 1", [publication]);
      expect(rows.map((row) => row.name)).toEqual(['0001', '0004', '0005', '0007', 'zbad'].map((n) => `${tenant(n)}.event_outbox`));
      expect(await relay.stop()).toBe(0);
    } finally {
      for (const schema of [...writers.keys()]) await stopWriting(schema);
      await relay.stop().catch(() => undefined);
    }
  });

  it('a table renamed out of the pattern leaves the publication in the same transaction, and joins it again when renamed back; a table moved into a tenant schema joins it', async () => {
    const published = async (schema: string, table: string) => (await pool.query('SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3', [publication, schema, table])).rows.length === 1;
    await createTenant(tenant('0009'), 0);
    expect(await published(tenant('0009'), 'event_outbox')).toBe(true);
    await pool.query(`ALTER TABLE ${tenant('0009')}.event_outbox RENAME TO event_outbox_old`);
    expect(await published(tenant('0009'), 'event_outbox_old')).toBe(false);
    await pool.query(`ALTER TABLE ${tenant('0009')}.event_outbox_old RENAME TO event_outbox`);
    expect(await published(tenant('0009'), 'event_outbox')).toBe(true);
    await pool.query(`CREATE SCHEMA ${tenant('0010')}; CREATE TABLE public.${id}_staged (${OUTBOX_COLUMNS}); ALTER TABLE public.${id}_staged SET SCHEMA ${tenant('0010')}`);
    schemas.add(tenant('0010'));
    expect(await published(tenant('0010'), `${id}_staged`)).toBe(false);
    await pool.query(`ALTER TABLE ${tenant('0010')}.${id}_staged RENAME TO event_outbox`);
    expect(await published(tenant('0010'), 'event_outbox')).toBe(true);
  });

  it('setup takes a table out of the publication that left the pattern while the event trigger was off, and run streams meanwhile', async () => {
    const trigger = `outbox_relay_${publication}_adds_tables`;
    await createTenant(tenant('0008'), 0);
    await pool.query(`ALTER EVENT TRIGGER ${trigger} DISABLE; ALTER SCHEMA ${tenant('0008')} RENAME TO ${id}_left_0008; ALTER EVENT TRIGGER ${trigger} ENABLE`);
    schemas.delete(tenant('0008'));
    schemas.add(`${id}_left_0008`);
    const relay = new RelayProcess(env()).start();
    try {
      await relay.waitActive();
      expect(relay.logs.some((line) => line.msg.includes(`covers ${id}_left_0008.event_outbox, which no outbox of this relay names`)), relay.tail()).toBe(true);
    } finally {
      expect(await relay.stop()).toBe(0);
    }
    const done = await cli(['setup'], env());
    expect(done.code, done.stderr).toBe(0);
    expect(done.stdout).toContain(`publication ${publication}: removed ${id}_left_0008.event_outbox`);
    const { rows } = await pool.query('SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2', [publication, `${id}_left_0008`]);
    expect(rows).toEqual([]);
  });
});

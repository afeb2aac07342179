import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli } from '../harness/cli.js';
import { createTopics, TopicReader, type ConsumedRecord } from '../harness/kafka.js';
import { TestOutbox } from '../harness/outbox.js';
import { eventually, RelayProcess } from '../harness/relay-process.js';

/**
 * The three outbox tables teams moving off a polling relay have, used as they are: column
 * mapping only, no migration. On each, `setup` refuses a first start on rows (pointing to
 * cutover), `cutover` publishes the rows the poller has not sent, `run` streams what follows, and
 * every record carries the row as mapped: key, headers and payload bytes.
 */
interface Shape {
  readonly name: string;
  readonly ddl: (table: string) => string;
  /** Inserts one row; `sent` as the poller would have left it. Returns its event id. */
  readonly insert: (outbox: TestOutbox, row: { aggregateId: string; eventType: string; payload: string; sent: boolean }) => Promise<string>;
  readonly env: Record<string, string>;
  readonly pending: string;
  /** Columns the relay does not read. */
  readonly ignored: readonly string[];
  readonly aggregateType: string | null;
  readonly eventIdColumn: string;
  readonly payloadColumn: string;
}

const SHAPES: readonly Shape[] = [
  {
    name: 'shape 1: uuid ids, a status column, a partial index on pending rows, no aggregate type',
    ddl: (table) => `
      CREATE TABLE ${table} (outbox_id uuid PRIMARY KEY DEFAULT gen_random_uuid(), event_id uuid NOT NULL UNIQUE, aggregate_id uuid NOT NULL, event_type text NOT NULL,
        payload jsonb NOT NULL, status text NOT NULL DEFAULT 'pending', attempts int NOT NULL DEFAULT 0, created_at timestamptz NOT NULL DEFAULT now(), sent_at timestamptz);
      CREATE INDEX ${table}_pending_idx ON ${table} (created_at) WHERE status = 'pending'`,
    insert: async (outbox, row) => {
      const { rows } = await outbox.pool.query<{ id: string }>(
        `INSERT INTO ${outbox.table} (event_id, aggregate_id, event_type, payload, status, sent_at) VALUES (gen_random_uuid(), $1, $2, $3, $4, $5) RETURNING event_id::text AS id`,
        [row.aggregateId, row.eventType, row.payload, row.sent ? 'sent' : 'pending', row.sent ? new Date() : null],
      );
      return rows[0]!.id;
    },
    env: { OUTBOX_COLUMN_AGGREGATE_TYPE: '' },
    pending: "status = 'pending'",
    ignored: ['outbox_id', 'status', 'attempts', 'sent_at'],
    aggregateType: null,
    eventIdColumn: 'event_id',
    payloadColumn: 'payload',
  },
  {
    name: 'shape 2: text ids, the JSON payload as text, a published flag',
    ddl: (table) => `
      CREATE TABLE ${table} (id text PRIMARY KEY, aggregate_id text, aggregate_type text, event_type text, event_data text, created_at timestamptz,
        published boolean NOT NULL DEFAULT false, published_at timestamptz)`,
    insert: async (outbox, row) => {
      const id = `evt_${randomUUID()}`;
      await outbox.pool.query(`INSERT INTO ${outbox.table} (id, aggregate_id, aggregate_type, event_type, event_data, created_at, published) VALUES ($1, $2, 'invoice', $3, $4, now(), $5)`, [id, row.aggregateId, row.eventType, row.payload, row.sent]);
      return id;
    },
    env: { OUTBOX_COLUMN_EVENT_ID: 'id', OUTBOX_COLUMN_PAYLOAD: 'event_data' },
    pending: 'NOT published',
    ignored: ['published', 'published_at'],
    aggregateType: 'invoice',
    eventIdColumn: 'id',
    payloadColumn: 'event_data',
  },
  {
    name: 'shape 3: a status column with attempts and a retry time',
    ddl: (table) => `
      CREATE TABLE ${table} (id text PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL, payload jsonb NOT NULL, status text NOT NULL,
        attempts int NOT NULL DEFAULT 0, next_attempt_at timestamptz, created_at timestamptz NOT NULL DEFAULT now(), published_at timestamptz)`,
    insert: async (outbox, row) => {
      const id = randomUUID();
      await outbox.pool.query(`INSERT INTO ${outbox.table} (id, aggregate_type, aggregate_id, event_type, payload, status, next_attempt_at) VALUES ($1, 'invoice', $2, $3, $4, $5, now())`, [id, row.aggregateId, row.eventType, row.payload, row.sent ? 'published' : 'pending']);
      return id;
    },
    env: { OUTBOX_COLUMN_EVENT_ID: 'id' },
    pending: "status <> 'published'",
    ignored: ['status', 'attempts', 'next_attempt_at', 'published_at'],
    aggregateType: 'invoice',
    eventIdColumn: 'id',
    payloadColumn: 'payload',
  },
];

describe.each(SHAPES)('a polling outbox as it is: $name', (shape) => {
  const outbox = new TestOutbox();
  const topic = `${outbox.topicPrefix}.invoice.paid`;
  const env = outbox.relayEnv({ OUTBOX_TOPIC_TEMPLATE: `${outbox.topicPrefix}.{event_type}`, ...shape.env });
  const rows = { sent: [] as string[], pending: [] as string[] };

  beforeAll(async () => {
    await outbox.pool.query(shape.ddl(outbox.table));
    await createTopics([topic]);
    for (let n = 0; n < 6; n += 1) {
      const sent = n % 3 === 0;
      const id = await shape.insert(outbox, { aggregateId: randomUUID(), eventType: 'invoice.paid', payload: `{"invoice": ${n},   "amount_cents": 1250, "note": "ünïcode"}`, sent });
      (sent ? rows.sent : rows.pending).push(id);
    }
  });
  afterAll(() => outbox.destroy());

  /** What the table holds for an event, as the relay must publish it. */
  async function stored(eventId: string): Promise<{ key: string; value: string; createdAt: Date }> {
    const { rows: found } = await outbox.pool.query<{ key: string; value: string; created_at: Date }>(
      `SELECT aggregate_id::text AS key, ${shape.payloadColumn}::text AS value, created_at FROM ${outbox.table} WHERE ${shape.eventIdColumn}::text = $1`,
      [eventId],
    );
    return { key: found[0]!.key, value: found[0]!.value, createdAt: found[0]!.created_at };
  }

  async function expectAsMapped(record: ConsumedRecord): Promise<void> {
    const row = await stored(record.headers.event_id!);
    expect(record.key).toBe(row.key);
    expect(record.value!.toString('utf8')).toBe(row.value);
    const expected: Record<string, string> = { event_id: record.headers.event_id!, event_type: 'invoice.paid', created_at: row.createdAt.toISOString() };
    if (shape.aggregateType !== null) expected.aggregate_type = shape.aggregateType;
    expect(record.headers).toMatchObject(expected);
    if (shape.aggregateType === null) expect(record.headers).not.toHaveProperty('aggregate_type');
  }

  it('`setup` refuses a first start on a table with rows and points to `cutover`, creating no slot', async () => {
    const setup = await cli(['setup'], env);
    expect(setup.code, setup.stderr).toBe(1);
    expect(setup.stderr).toMatch(new RegExp(`\\[SETUP_CUTOVER_NEEDED\\]: outbox table public\\.${outbox.table} holds 6 rows and no slot "${outbox.slot}" was ever made for it.*outbox-relay cutover --pending`));
    expect((await outbox.pool.query('SELECT 1 FROM pg_replication_slots WHERE slot_name = $1', [outbox.slot])).rows).toHaveLength(0);
  });

  it('`cutover --dry-run` counts the pending rows and changes nothing; a condition that is not one is refused with Postgres\'s words', async () => {
    const dry = await cli(['cutover', '--pending', shape.pending, '--dry-run'], env);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(new RegExp(`would publish: 4 rows matching ${shape.pending.replace(/[()]/g, '\\$&')} \\(created .* to .*\\), in transaction id order; 2 rows do not match`));
    expect((await outbox.pool.query('SELECT 1 FROM pg_replication_slots WHERE slot_name = $1', [outbox.slot])).rows).toHaveLength(0);

    const notBoolean = await cli(['cutover', '--pending', 'created_at'], env);
    expect(notBoolean.code).toBe(1);
    expect(notBoolean.stderr).toMatch(/\[CUTOVER_CONDITION\]: --pending "created_at" was refused by Postgres: argument of WHERE must be type boolean, not type timestamp with time zone; expected a boolean expression/);
    const twoStatements = await cli(['cutover', '--pending', `true; DROP TABLE ${outbox.table}`], env);
    expect(twoStatements.code).toBe(1);
    expect(twoStatements.stderr).toMatch(/\[CUTOVER_CONDITION\]/);
    expect((await outbox.pool.query(`SELECT count(*)::int AS n FROM ${outbox.table}`)).rows[0].n).toBe(6);
  });

  it('`cutover` publishes the pending rows as mapped, says what it mapped and ignored, and `run` streams what follows', async () => {
    const reader = await new TopicReader().start([topic]);
    try {
      const cutover = await cli(['cutover', '--pending', shape.pending], env);
      expect(cutover.code, cutover.stderr).toBe(0);
      expect(cutover.stdout).toContain(`ignored (never read, never written): ${shape.ignored.join(', ')}`);
      expect(cutover.stdout).toMatch(/published: 4 rows matching/);
      if (shape.aggregateType === null) expect(cutover.stdout).toMatch(new RegExp(`warning: index ${outbox.table}_pending_idx is partial \\(WHERE \\(status = 'pending'::text\\)\\) on status`));
      // Qualified: an outbox outside the search path's schemas is not found otherwise.
      if (shape.aggregateType === null) expect(cutover.stdout).toContain(`DROP INDEX CONCURRENTLY "public"."${outbox.table}_pending_idx"`);

      const relay = new RelayProcess(env).start();
      try {
        await relay.waitActive();
        expect(relay.logs.some((line) => line.msg.startsWith(`columns of public.${outbox.table}:`))).toBe(true);
        const streamed = await shape.insert(outbox, { aggregateId: randomUUID(), eventType: 'invoice.paid', payload: '{"invoice": 99}', sent: false });
        await reader.until('the pending rows and the streamed one', (records) => records.length >= 5, 30_000, () => relay.tail());
        expect(reader.records.map((record) => record.headers.event_id).sort()).toEqual([...rows.pending, streamed].sort());
        for (const record of reader.records) await expectAsMapped(record);
      } finally {
        expect(await relay.stop()).toBe(0);
      }
    } finally {
      await reader.stop();
    }
  });

  it('a topic template naming a missing aggregate type is refused at start, with the reason', async () => {
    if (shape.aggregateType !== null) {
      const run = await cli(['run'], { ...env, OUTBOX_TOPIC_TEMPLATE: 'outbox.{aggregate_type}', OUTBOX_COLUMN_AGGREGATE_TYPE: '' });
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(/OUTBOX_TOPIC_TEMPLATE "outbox\.\{aggregate_type\}" uses \{aggregate_type\}, but OUTBOX_COLUMN_AGGREGATE_TYPE is empty/);
      return;
    }
    const run = await cli(['run'], { ...env, OUTBOX_TOPIC_TEMPLATE: 'outbox.{aggregate_type}' });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/OUTBOX_TOPIC_TEMPLATE "outbox\.\{aggregate_type\}" uses \{aggregate_type\}, but OUTBOX_COLUMN_AGGREGATE_TYPE is empty \(the table has no aggregate type\)/);
    // And a column named for it that the table lacks is refused by name, not dead-lettered per row.
    const setup = await cli(['setup'], { ...env, OUTBOX_COLUMN_AGGREGATE_TYPE: 'aggregate_type' });
    expect(setup.code).toBe(1);
    expect(setup.stderr).toMatch(/\[SETUP_TABLE\]: outbox table public\.\S+ has no column "aggregate_type" \(OUTBOX_COLUMN_AGGREGATE_TYPE\).*set it empty/);
  });

  it('the pruner deletes confirmed rows of the table as mapped, and cutover refuses to run twice', async () => {
    const again = await cli(['cutover', '--pending', shape.pending], env);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/replication slot "\S+" exists: the relay already streams/);
    const relay = new RelayProcess(env).start();
    try {
      await relay.waitActive();
      const prune = (): Promise<{ code: number; stdout: string; stderr: string }> => cli(['prune', '--retention', '0s'], env);
      const first = await prune();
      expect(first.code, first.stderr).toBe(0);
      // A later pass finds its mark confirmed by the relay and deletes every row before it.
      await eventually('a prune pass that deletes every row', async () => {
        const second = await prune();
        expect(second.code, second.stderr).toBe(0);
        return Number((await outbox.pool.query(`SELECT count(*) AS n FROM ${outbox.table}`)).rows[0].n) === 0 ? true : undefined;
      }, 30_000);
    } finally {
      expect(await relay.stop()).toBe(0);
    }
  });
});

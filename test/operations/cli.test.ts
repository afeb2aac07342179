import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli } from '../harness/cli.js';
import { createTopics, TopicReader } from '../harness/kafka.js';
import { billingEvent, TestOutbox } from '../harness/outbox.js';
import { RelayProcess } from '../harness/relay-process.js';

describe('operator CLI', () => {
  const outbox = new TestOutbox();

  beforeAll(async () => {
    await createTopics([outbox.topic('invoice'), outbox.deadLetterTopic]);
  });

  afterAll(async () => {
    await outbox.destroy();
  });

  it('setup twice is harmless and says what it did', async () => {
    const first = await cli(['setup'], outbox.relayEnv());
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(new RegExp(`table public.${outbox.table}: created`));
    expect(first.stdout).toMatch(/slot .*: created at/);
    const second = await cli(['setup'], outbox.relayEnv());
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toBe(
      `table public.${outbox.table}: exists\nprune marks table "public"."${outbox.table}_prune_marks": exists\npublication ${outbox.publication}: exists\n` +
        `columns of public.${outbox.table}: event_id -> header event_id, aggregate_type -> header aggregate_type, aggregate_id -> the Kafka key, event_type -> header event_type, payload -> the record value, headers -> extra headers, created_at -> header created_at, and the pruner's age; ignored (never read, never written): none\n` +
        `payload column "payload" is jsonb: published as Postgres's JSON text (with OUTBOX_FORMAT=avro: its JSON encoded with the event type's Avro schema)\n` +
        `slot ${outbox.slot}: exists\n`,
    );
  });

  it('refuses a publication that also publishes updates, saying what is wrong and what is expected', async () => {
    const other = new TestOutbox();
    try {
      await other.pool.query(`CREATE TABLE ${other.table} (event_id text primary key)`);
      await other.pool.query(`CREATE PUBLICATION ${other.publication} FOR TABLE ${other.table} WITH (publish = 'insert, update')`);
      const result = await cli(['setup'], other.relayEnv());
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(/\[SETUP_PUBLICATION\].*it publishes update \(expected insert only\).*Expected: CREATE PUBLICATION .* WITH \(publish = 'insert'\)/s);
    } finally {
      await other.destroy();
    }
  });

  it('fails at start on bad configuration, naming the variable and what was expected', async () => {
    const result = await cli(['run'], outbox.relayEnv({ OUTBOX_ON_POISON: 'ignore', OUTBOX_BATCH_MAX_EVENTS: 'lots' }));
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/OUTBOX_ON_POISON="ignore" is not an allowed value; expected one of dead-letter \| fail\./);
    expect(result.stderr).toMatch(/OUTBOX_BATCH_MAX_EVENTS="lots" is not an integer/);
    const typo = await cli(['status', '--jsno'], outbox.relayEnv());
    expect(typo.code).toBe(2);
    expect(typo.stderr).toMatch(/unknown option --jsno/);
    const stray = await cli(['status', '--json', 'extra'], outbox.relayEnv());
    expect(stray.code).toBe(2);
    expect(stray.stderr).toMatch(/--json takes no value \(got "extra"\)/);
    const schemas = await cli(['schemas', '--help'], {});
    expect(schemas.code).toBe(0);
    expect(schemas.stdout).toMatch(/schemas check +parse and compile/i);
    const version = await cli(['--version'], {});
    expect(version.code).toBe(0);
    expect(version.stdout).toMatch(/^outbox-relay \d+\.\d+\.\d+\n$/);
  });

  it("ends every failure with one of the relay's codes, Postgres's own kept in the message", async () => {
    const missing = new URL(outbox.relayEnv().DATABASE_URL!);
    missing.pathname = '/no_such_database';
    const noDatabase = await cli(['status'], outbox.relayEnv({ DATABASE_URL: missing.href }));
    expect(noDatabase.code).toBe(1);
    expect(noDatabase.stderr).toMatch(/^outbox-relay status failed \[SOURCE_DATABASE_MISSING\]: Postgres has no such database \(3D000: database "no_such_database" does not exist\)/);
    const noTable = await cli(['status'], outbox.relayEnv({ OUTBOX_TABLE: 'public.no_such_outbox' }));
    expect(noTable.code).toBe(1);
    expect(noTable.stderr).toMatch(/^outbox-relay status failed \[SETUP_TABLE\]: Postgres answered 42P01: .*; check OUTBOX_TABLE\n/);
    // The hint names where the tables were declared: OUTBOX_SOURCES, when that is what is set.
    const sources = JSON.stringify([{ table: 'no_such_schema.outbox' }, { messages: 'outbox' }]);
    for (const command of ['setup', 'status', 'prune']) {
      const noSchema = await cli([command], outbox.relayEnv({ OUTBOX_SOURCES: sources }));
      expect(noSchema.code, noSchema.stderr).toBe(1);
      expect(noSchema.stderr).toMatch(new RegExp(`^outbox-relay ${command} failed \\[SETUP_TABLE\\]: Postgres answered (3F000: schema|42P01: relation) "no_such_schema(\\.outbox)?" does not exist; .*OUTBOX_SOURCES\\n$`));
      expect(noSchema.stderr).not.toMatch(/OUTBOX_TABLE/);
    }
    const refused = new URL(outbox.relayEnv().DATABASE_URL!);
    refused.port = '1';
    const down = await cli(['setup'], outbox.relayEnv({ DATABASE_URL: refused.href }));
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/^outbox-relay setup failed \[SOURCE_DISCONNECTED\]: cannot reach Postgres \(ECONNREFUSED: /);
    const noPort = await cli(['run'], outbox.relayEnv({ KAFKA_BROKERS: '127.0.0.1' }));
    expect(noPort.code).toBe(2);
    expect(noPort.stderr).toMatch(/KAFKA_BROKERS="127\.0\.0\.1" has "127\.0\.0\.1", which is not host:port \(no port\); expected comma-separated host:port pairs/);
  });

  it('status --json matches what Postgres says', async () => {
    await outbox.insert([billingEvent('inv_status', 1), billingEvent('inv_status', 2)]);
    const result = await cli(['status', '--json'], outbox.relayEnv());
    expect(result.code, result.stderr).toBe(0);
    const status = JSON.parse(result.stdout) as {
      slot: { slot: string; exists: boolean; active: boolean; confirmedFlushLsn: string; lagBytes: number; walStatus: string };
      outboxes: { table: string; rows: number }[];
      deadLetters: { count: number | null };
    };
    const { rows } = await outbox.pool.query<{ confirmed: string; wal_status: string }>(
      'SELECT confirmed_flush_lsn::text AS confirmed, wal_status FROM pg_replication_slots WHERE slot_name = $1',
      [outbox.slot],
    );
    expect(status.slot).toMatchObject({ slot: outbox.slot, exists: true, active: false, confirmedFlushLsn: rows[0]!.confirmed, walStatus: rows[0]!.wal_status });
    expect(status.slot.lagBytes).toBeGreaterThan(0);
    expect(status.outboxes).toEqual([expect.objectContaining({ table: `public.${outbox.table}`, rows: 2 })]);
    expect(status.deadLetters.count).toBe(0);
    const human = await cli(['status'], outbox.relayEnv());
    expect(human.stdout).toMatch(/^slot\s+slot_/m);
    expect(human.stdout).toMatch(/^active reader\s+none$/m);
  });

  it('replay republishes exactly the rows asked for, with their original event ids', async () => {
    const reader = await new TopicReader().start([outbox.topic('invoice')]);
    const relay = new RelayProcess(outbox.relayEnv()).start();
    try {
      const rows = [billingEvent('inv_replay', 1), billingEvent('inv_replay', 2), billingEvent('inv_replay', 3)];
      await outbox.insert(rows);
      await reader.until('streamed events', (records) => records.length >= 5);
      const chosen = [rows[0]!.eventId, rows[2]!.eventId];
      const result = await cli(['replay', '--event-id', chosen.join(',')], outbox.relayEnv());
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toMatch(/replayed 2 events/);
      await reader.until('the replayed events', (records) => records.length >= 7);
      const replayed = reader.records.filter((record) => record.headers.outbox_commit_lsn === '0/0');
      expect(replayed.map((record) => record.headers.event_id).sort()).toEqual([...chosen].sort());
      expect(replayed.every((record) => record.key === 'inv_replay')).toBe(true);
      // The same bytes as the streamed record: a replay re-reads the row, it does not re-encode it.
      const streamed = (eventId: string) => reader.records.find((record) => record.headers.event_id === eventId && record.headers.outbox_commit_lsn !== '0/0')!;
      for (const record of replayed) expect(record.value!.equals(streamed(record.headers.event_id!).value!)).toBe(true);
      const refused = await cli(['replay'], outbox.relayEnv());
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/needs at least one of --since/);
      // Started as `node dist/cli.js run`, without the V8 flag the bin and the image pass: said once.
      expect(relay.logs.filter((line) => line.level === 40 && line.flag === '--max-semi-space-size=16'), relay.tail()).toHaveLength(1);
    } finally {
      await relay.stop();
      await reader.stop();
    }
  });

  it('drop-slot asks for confirmation, then drops and says where to replay from', async () => {
    const unconfirmed = await cli(['drop-slot'], outbox.relayEnv());
    expect(unconfirmed.code).toBe(2);
    expect(unconfirmed.stderr).toMatch(/--yes/);
    const dropped = await cli(['drop-slot', '--yes'], outbox.relayEnv());
    expect(dropped.code, dropped.stderr).toBe(0);
    expect(dropped.stdout).toMatch(/dropped slot .* confirmed up to/);
    const { rows } = await outbox.pool.query('SELECT 1 FROM pg_replication_slots WHERE slot_name = $1', [outbox.slot]);
    expect(rows).toHaveLength(0);
  });
});

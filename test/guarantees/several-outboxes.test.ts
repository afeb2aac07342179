// vitest: runs alone (its relay takes every logical message in the database, and it waits for its slot to reach the WAL's end)
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { cli } from '../harness/cli.js';
import { expectOrderPerAggregate } from '../harness/fixture.js';
import { createTopics, TopicReader } from '../harness/kafka.js';
import { consumerRegistry } from '../harness/registry-consumer.js';
import { delay, eventually, RelayProcess } from '../harness/relay-process.js';
import { SeveralOutboxes, TRANSACTION_SHAPE } from '../harness/several-outboxes.js';

/**
 * Several outboxes through one slot (OUTBOX_SOURCES): three tables of different shapes and a
 * message outbox (pg_logical_emit_message), every transaction writing to all of them, under
 * kill -9 of the relay. Every committed event arrives, in commit order per aggregate across
 * tables and messages, each naming its outbox; with exactly-once, exactly once.
 */
describe.each<{ delivery: string; env: Record<string, string> }>([
  { delivery: 'at-least-once', env: {} },
  { delivery: 'exactly-once', env: { OUTBOX_DELIVERY: 'exactly-once' } },
])('several outboxes in one stream, $delivery', ({ delivery, env }) => {
  const outboxes = new SeveralOutboxes();
  beforeAll(async () => {
    await outboxes.create();
    const done = await cli(['setup'], outboxes.relayEnv());
    expect(done.code, done.stderr).toBe(0);
    expect(done.stdout).toContain(`publication ${outboxes.publication}: created (inserts into public.${outboxes.tables.a}, public.${outboxes.tables.b}, public.${outboxes.tables.c})`);
  });
  afterAll(() => outboxes.destroy());

  it('delivers every committed event of every outbox across kill -9, in commit order per aggregate', async () => {
    const relayEnv = outboxes.relayEnv({ ...env, OUTBOX_PROGRESS_TOPIC: `${outboxes.topicPrefix}.progress` });
    const load = outboxes.load();
    let relay = new RelayProcess(relayEnv).start();
    try {
      await relay.waitActive();
      for (let crash = 0; crash < 2; crash += 1) {
        await delay(1_500 + Math.floor(Math.random() * 1_000));
        await relay.kill9();
        await eventually('the slot to be released', async () => {
          const { rows } = await outboxes.pool.query<{ active: boolean }>('SELECT active FROM pg_replication_slots WHERE slot_name = $1', [outboxes.slot]);
          return rows[0]?.active === false ? true : undefined;
        });
        relay = new RelayProcess(relayEnv).start();
        await relay.waitActive();
      }
      await delay(1_000);
    } finally {
      await load.stop();
    }
    const committed = await outboxes.committed();
    expect(committed.size).toBeGreaterThan(200);
    const reader = await new TopicReader().start([outboxes.sharedTopic, outboxes.tableCTopic]);
    try {
      await reader.until(`all ${committed.size} committed events`, (records) => new Set(records.map((r) => r.headers.event_id)).size >= committed.size, 120_000, () => relay.tail());
      await delay(1_000);
      const records = reader.records;
      const delivered = new Set(records.map((record) => record.headers.event_id!));
      expect([...committed.keys()].filter((id) => !delivered.has(id)), 'committed events that never arrived').toEqual([]);
      expect(records.filter((record) => !committed.has(record.headers.event_id!)).map((record) => record.headers.event_id), 'events of rolled-back transactions, or unknown ones').toEqual([]);
      expect(load.rolledBack.filter((id) => delivered.has(id))).toEqual([]);
      for (const record of records) expect(record.headers.outbox_source, `event ${record.headers.event_id}`).toBe(sourceOf(outboxes, committed.get(record.headers.event_id!)!));
      // Rows of table c go to its own topic ({table}); the others share the aggregate's.
      expect(records.filter((record) => record.headers.outbox_source === `public.${outboxes.tables.c}`).every((record) => record.topic === outboxes.tableCTopic)).toBe(true);
      // Commit order per aggregate, across tables and messages: the shared topic holds four
      // of each transaction's five events, with the transaction's sequences in order.
      expectOrderPerAggregate(records.filter((record) => record.topic === outboxes.sharedTopic));
      const copies = records.length - delivered.size;
      if (delivery === 'exactly-once') expect(copies, 'copies seen by a read_committed consumer').toBe(0);
      const byCarrier = countBy([...committed.values()]);
      process.stdout.write(`several outboxes (${delivery}): ${committed.size} committed (${JSON.stringify(byCarrier)}), ${records.length} delivered, ${copies} copies after 2 kills, ${load.rolledBack.length} rolled back and absent\n`);
    } finally {
      await reader.stop();
      await relay.stop();
    }
  });
});

describe('bad input to a message outbox', () => {
  const outboxes = useSeveralOutboxes();

  it('dead-letters each bad message with its reason, and streams on', async () => {
    // A small bound, so that one message is too large to publish.
    const relay = new RelayProcess(outboxes.relayEnv({ OUTBOX_MAX_MESSAGE_BYTES: '20000' })).start();
    const reader = await new TopicReader().start([outboxes.sharedTopic, outboxes.deadLetterTopic]);
    try {
      await relay.waitActive();
      // Written as text: a number beyond a double's digits survives only if nobody parses it.
      const good = (id: string) => `{"event_id":"${id}","aggregate_type":"invoice","aggregate_id":"inv-1","event_type":"invoice.paid","payload": {"amount_cents":12345678901234567890}}`;
      await outboxes.emit(outboxes.prefix, 'not json {');
      await outboxes.emit(outboxes.prefix, JSON.stringify({ event_id: 'no-type', aggregate_type: 'invoice', aggregate_id: 'inv-1', payload: {} }));
      await outboxes.emit(outboxes.prefix, good('not-atomic'), false);
      await outboxes.emit(`${outboxes.prefix}_typo`, good('typo'));
      // Emitted as bytea: a byte that is not UTF-8 inside a JSON string of the payload.
      const notUtf8 = Buffer.from(good('not-utf8').replace('"amount_cents"', '"amount_?ents"'), 'utf8');
      const badByteAt = notUtf8.indexOf('?');
      notUtf8[badByteAt] = 0xff;
      await outboxes.pool.query('SELECT pg_logical_emit_message(true, $1, $2::bytea)', [outboxes.prefix, notUtf8]);
      await outboxes.emit(outboxes.prefix, good('too-large').replace('{"amount_cents"', `{"note":"${'x'.repeat(30_000)}","amount_cents"`));
      await outboxes.emit(outboxes.prefix, good('after'));
      await reader.until('six dead letters and the good event after them', (records) => records.length >= 7, 60_000, () => relay.tail());
      // Keyed by their aggregate id where they have one (the one without lands on any partition): compared by reason, not by order.
      const byCode = new Map(reader.records.filter((record) => record.topic === outboxes.deadLetterTopic).map((record) => [`${record.headers.dead_letter_code} ${record.headers.event_id ?? '-'}`, record]));
      expect([...byCode.keys()].sort()).toEqual(['DECODE_BAD_MESSAGE -', 'DECODE_BAD_MESSAGE no-type', 'DECODE_BAD_MESSAGE not-utf8', 'SINK_TOO_LARGE too-large', 'SOURCE_MESSAGE_NOT_TRANSACTIONAL not-atomic', 'SOURCE_MESSAGE_UNDECLARED typo']);
      const dead = (key: string) => byCode.get(key)!;
      for (const key of ['DECODE_BAD_MESSAGE -', 'DECODE_BAD_MESSAGE no-type', 'DECODE_BAD_MESSAGE not-utf8', 'SINK_TOO_LARGE too-large', 'SOURCE_MESSAGE_NOT_TRANSACTIONAL not-atomic']) expect(dead(key).headers.dead_letter_source_table).toBe(`message:${outboxes.prefix}`);
      expect(dead('SOURCE_MESSAGE_UNDECLARED typo').headers.dead_letter_source_table).toBe(`message:${outboxes.prefix}_typo`);
      expect(dead('DECODE_BAD_MESSAGE -').headers.dead_letter_reason).toMatch(/^message content is not JSON .*expected a JSON object \{"event_id"/);
      expect(dead('DECODE_BAD_MESSAGE no-type').headers.dead_letter_reason).toMatch(/^message field "event_type" is missing/);
      // Nothing lost: each dead letter holds the message as it was written.
      expect(JSON.parse(dead('DECODE_BAD_MESSAGE -').value!.toString('utf8'))).toEqual({ prefix: outboxes.prefix, content: 'not json {' });
      expect(JSON.parse(dead('SOURCE_MESSAGE_UNDECLARED typo').value!.toString('utf8'))).toEqual({ prefix: `${outboxes.prefix}_typo`, content: good('typo') });
      // Content that is not UTF-8 is named with the offending byte, and kept byte for byte (base64).
      expect(dead('DECODE_BAD_MESSAGE not-utf8').headers.dead_letter_reason).toMatch(new RegExp(`^message content is not valid UTF-8 \\(byte 0xff at offset ${badByteAt}\\); expected UTF-8 text of a JSON object`));
      expect(JSON.parse(dead('DECODE_BAD_MESSAGE not-utf8').value!.toString('utf8'))).toEqual({ prefix: outboxes.prefix, content_base64: notUtf8.toString('base64') });
      // A message has no row to replay: the advice says what to do instead.
      const tooLarge = dead('SINK_TOO_LARGE too-large').headers;
      expect(tooLarge.dead_letter_reason).toMatch(/exceeds OUTBOX_MAX_MESSAGE_BYTES \(20000\); raise it .*emit the event again from the application: a message outbox has no row to replay/);
      expect(tooLarge.dead_letter_reason).not.toMatch(/replay the event/);
      expect(tooLarge.dead_letter_row_omitted).toMatch(/bytes omitted; a message outbox keeps no copy/);
      const [published] = reader.records.filter((record) => record.topic === outboxes.sharedTopic);
      expect(published!.headers.event_id).toBe('after');
      // The payload as written, digits beyond a double's included.
      expect(published!.value!.toString('utf8')).toBe('{"amount_cents":12345678901234567890}');
      // The non-transactional message was confirmed past: the slot moves on.
      await eventually('the slot to confirm past every message', async () => {
        const { rows } = await outboxes.pool.query<{ behind: boolean }>('SELECT confirmed_flush_lsn < pg_current_wal_lsn() AS behind FROM pg_replication_slots WHERE slot_name = $1', [outboxes.slot]);
        return rows[0]?.behind === false ? true : undefined;
      }, 30_000);
    } finally {
      await reader.stop();
      await relay.stop();
    }
  });

  it('refuses at start a configuration whose outbox table cannot be mapped, naming it', async () => {
    const sources = JSON.stringify([{ table: `public.${outboxes.tables.b}` }]);
    const done = await cli(['setup'], outboxes.relayEnv({ OUTBOX_SOURCES: sources, OUTBOX_SLOT: `${outboxes.slot}_x`, OUTBOX_PUBLICATION: `${outboxes.publication}_x` }));
    expect(done.code).not.toBe(0);
    expect(done.stderr).toMatch(/SETUP_TABLE/);
    expect(done.stderr).toContain(`public.${outboxes.tables.b}`);
  });
});

describe('each outbox in its own format', () => {
  const outboxes = useSeveralOutboxes();

  it('one table encoded with Avro through the registry, the other tables and the messages as JSON, in one stream; a topic keeps one format', async () => {
    const schemas = mkdtempSync(path.join(tmpdir(), 'several-formats-'));
    const fields = [{ name: 'invoice_id', type: 'string' }, { name: 'sequence', type: 'int' }, { name: 'amount_cents', type: 'long' }];
    writeFileSync(path.join(schemas, 'invoice.paid.avsc'), JSON.stringify({ type: 'record', name: 'InvoicePaid', namespace: `itest.${outboxes.slot}`, fields }));
    // A topic of its own: consumers of one topic read one format.
    const avroTopic = `${outboxes.topicPrefix}.avro-invoice`;
    await createTopics([avroTopic]);
    const sources = (JSON.parse(outboxes.sources) as Record<string, unknown>[]).map((entry) => (entry.table === `public.${outboxes.tables.b}` ? { ...entry, format: 'avro', topicTemplate: `${outboxes.topicPrefix}.avro-{aggregate_type}` } : entry));
    const relay = new RelayProcess(
      outboxes.relayEnv({ OUTBOX_SOURCES: JSON.stringify(sources), SCHEMA_REGISTRY_URL: inject('services').schemaRegistryUrl, OUTBOX_SCHEMAS_DIR: schemas, OUTBOX_SUBJECT_STRATEGY: 'record', OUTBOX_AUTO_REGISTER: 'true' }),
    ).start();
    const reader = await new TopicReader().start([outboxes.sharedTopic, outboxes.tableCTopic, avroTopic, outboxes.deadLetterTopic]);
    try {
      await relay.waitActive();
      const load = outboxes.load(1, 2);
      await delay(1_000);
      await load.stop();
      const committed = await outboxes.committed();
      await reader.until(`all ${committed.size} committed events`, (records) => new Set(records.map((r) => r.headers.event_id)).size >= committed.size, 60_000, () => relay.tail());
      const registry = consumerRegistry();
      const bySource = new Map<string, string[]>();
      for (const record of reader.records) {
        expect(record.topic, `event ${record.headers.event_id} dead-lettered: ${record.headers.dead_letter_reason}`).not.toBe(outboxes.deadLetterTopic);
        const source = record.headers.outbox_source!;
        // Avro's records start with the wire format's magic byte and decode through the registry; JSON's are the payload as JSON.
        const payload = source === `public.${outboxes.tables.b}` ? ((await registry.decode(record.value!)) as Record<string, unknown>) : (JSON.parse(record.value!.toString('utf8')) as Record<string, unknown>);
        expect(payload).toMatchObject({ invoice_id: expect.any(String), sequence: expect.any(Number) });
        bySource.set(source, [...(bySource.get(source) ?? []), record.value![0] === 0 ? 'avro' : 'json']);
      }
      expect(Object.fromEntries([...bySource].map(([source, formats]) => [source, [...new Set(formats)]]))).toEqual({
        [`public.${outboxes.tables.a}`]: ['json'],
        [`public.${outboxes.tables.b}`]: ['avro'],
        [`public.${outboxes.tables.c}`]: ['json'],
        [`message:${outboxes.prefix}`]: ['json'],
      });
      expect(new Set(reader.records.filter((record) => record.headers.outbox_source === `public.${outboxes.tables.b}`).map((record) => record.topic))).toEqual(new Set([avroTopic]));
      // The messages' template meets the Avro table's topic through an event's value: that event
      // is a dead letter naming both outboxes, and the stream goes on.
      const message = (id: string, aggregateType: string) => JSON.stringify({ event_id: id, aggregate_type: aggregateType, aggregate_id: 'inv-x', event_type: 'invoice.paid', payload: { invoice_id: 'inv-x', sequence: 1, amount_cents: 1 } });
      await outboxes.emit(outboxes.prefix, message('meets-avro', 'avro-invoice'));
      await outboxes.emit(outboxes.prefix, message('after-conflict', 'invoice'));
      await reader.until('the conflicting message dead-lettered and the next one published', (records) => records.some((record) => record.headers.event_id === 'after-conflict'), 60_000, () => relay.tail());
      const conflicting = reader.records.filter((record) => record.headers.event_id === 'meets-avro');
      expect(conflicting.map((record) => [record.topic, record.headers.dead_letter_code])).toEqual([[outboxes.deadLetterTopic, 'ROUTE_FORMAT_CONFLICT']]);
      expect(conflicting[0]!.headers.dead_letter_reason).toBe(
        `topic ${avroTopic} is written as avro by outbox public.${outboxes.tables.b} (topic template "${outboxes.topicPrefix}.avro-{aggregate_type}"); outbox message:${outboxes.prefix} (topic template "${outboxes.topicPrefix}.{aggregate_type}") would write it as json: its consumers would read two formats. Give one of them a "topicTemplate" of its own in OUTBOX_SOURCES (or both the same "format"), then emit the event again from the application: a message outbox has no row to replay (the dead letter holds the content, unless its dead_letter_row_omitted header says it was too large)`,
      );
      expect(reader.records.filter((record) => record.topic === avroTopic).every((record) => record.value![0] === 0)).toBe(true);
    } finally {
      await reader.stop();
      await relay.stop();
    }
  });
});

describe('commands over several outboxes', () => {
  const outboxes = useSeveralOutboxes();

  it('status lists every outbox table; prune deletes from each what the relay confirmed; a table added later joins the publication', async () => {
    const client = await outboxes.pool.connect();
    try {
      for (let sequence = 1; sequence <= 15; sequence += TRANSACTION_SHAPE.length) await outboxes.transaction(client, 'inv-1', sequence);
    } finally {
      client.release();
    }
    const status = await cli(['status', '--json'], outboxes.relayEnv());
    expect(status.code, status.stderr).toBe(0);
    const tables = Object.values(outboxes.tables).map((table) => `public.${table}`);
    expect((JSON.parse(status.stdout) as { outboxes: { table: string; rows: number }[] }).outboxes.map(({ table, rows }) => [table, rows])).toEqual(tables.map((table) => [table, 3]));
    expect(status.stdout).not.toContain('message:');

    // Nothing confirmed yet: nothing pruned.
    const early = await cli(['prune', '--retention', '0s'], outboxes.relayEnv());
    expect(early.stdout.trim().split('\n').at(-1), early.stderr).toBe('deleted 0 rows');
    const relay = new RelayProcess(outboxes.relayEnv()).start();
    const reader = await new TopicReader().start([outboxes.sharedTopic, outboxes.tableCTopic]);
    try {
      await reader.until('every event', (records) => records.length >= 15, 60_000, () => relay.tail());
      // A pruner mark, then the relay's confirmed position past it (idle keepalives confirm too).
      await cli(['prune', '--retention', '0s'], outboxes.relayEnv());
      const pruned = await eventually('a prune pass that deletes the confirmed rows of every table', async () => {
        const pass = await cli(['prune', '--retention', '0s'], outboxes.relayEnv());
        const { rows } = await outboxes.pool.query<{ left: string }>(`SELECT (SELECT count(*) FROM ${outboxes.tables.a}) + (SELECT count(*) FROM ${outboxes.tables.b}) + (SELECT count(*) FROM ${outboxes.tables.c}) AS left`);
        return rows[0]!.left === '0' ? pass : undefined;
      }, 30_000, 1_000);
      expect(pruned.code, pruned.stderr).toBe(0);
    } finally {
      await reader.stop();
      await relay.stop();
    }

    // An outbox table added to the configuration later: setup adds it to the publication if it
    // is empty, and refuses one whose rows a new member of the publication would never stream.
    const added = `${outboxes.tables.a}_added`;
    const filled = `${outboxes.tables.a}_filled`;
    await outboxes.pool.query(`CREATE TABLE ${added} (LIKE ${outboxes.tables.a} INCLUDING ALL); CREATE TABLE ${filled} (LIKE ${outboxes.tables.a} INCLUDING ALL)`);
    try {
      const withTables = (...names: string[]) => outboxes.relayEnv({ OUTBOX_SOURCES: JSON.stringify([...(JSON.parse(outboxes.sources) as object[]), ...names.map((name) => ({ table: `public.${name}` }))]) });
      const joined = await cli(['setup'], withTables(added));
      expect(joined.code, joined.stderr).toBe(0);
      expect(joined.stdout).toContain(`publication ${outboxes.publication}: added public.${added} (inserts from now on)`);
      await outboxes.pool.query(`INSERT INTO ${filled} (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES ('old', 'invoice', 'inv-9', 'invoice.paid', '{}')`);
      const refused = await cli(['setup'], withTables(added, filled));
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toContain('SETUP_CUTOVER_NEEDED');
      expect(refused.stderr).toContain(`outbox table public.${filled} holds rows and is not in the publication "${outboxes.publication}" yet`);
    } finally {
      await outboxes.pool.query(`DROP PUBLICATION IF EXISTS ${outboxes.publication}; DROP TABLE IF EXISTS ${added}, ${filled}`);
    }
  });
});

/** The file's outboxes for one describe block: tables, topics and setup before its tests, all removed after. */
function useSeveralOutboxes(): SeveralOutboxes {
  const outboxes = new SeveralOutboxes();
  beforeAll(async () => {
    await outboxes.create();
    const done = await cli(['setup'], outboxes.relayEnv());
    expect(done.code, done.stderr).toBe(0);
  });
  afterAll(() => outboxes.destroy());
  return outboxes;
}

function sourceOf(outboxes: SeveralOutboxes, carrier: (typeof TRANSACTION_SHAPE)[number]): string {
  return carrier === 'message' ? `message:${outboxes.prefix}` : `public.${outboxes.tables[carrier]}`;
}

function countBy(values: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const value of values) counts[value] = (counts[value] ?? 0) + 1;
  return counts;
}

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createIdempotentConsumer,
  deterministicEventId,
  ensureConsumedEventsTable,
  pruneConsumedEvents,
  writeOutboxEvents,
  type ConsumedEvent,
  type EventHandler,
  type IdempotentConsumer,
  type OutboxEventInput,
} from '../../src/client/index.js';
import { inject } from 'vitest';
import { cli } from '../harness/cli.js';
import { createTopics, kafkaClient, TopicReader } from '../harness/kafka.js';
import { TestOutbox } from '../harness/outbox.js';
import { eventually, RelayProcess } from '../harness/relay-process.js';

// The idempotent consumer against the real relay, Kafka, registry and Postgres. The effect table
// has no unique constraint on purpose: an event applied twice shows up as two rows.

interface InvoicePaid {
  readonly invoice_id: string;
  readonly amount_cents: number;
  readonly paid_at: Date;
}

const outbox = new TestOutbox();
const effects = `effects_${outbox.id}`;
const dedup = `consumed_${outbox.id}`;
const topic = outbox.topic('invoice');
const relays: RelayProcess[] = [];
const consumers: IdempotentConsumer[] = [];

function relay(extra: Record<string, string> = {}): RelayProcess {
  const process = new RelayProcess(outbox.relayEnv({ OUTBOX_FORMAT: 'avro', OUTBOX_AUTO_REGISTER: 'true', ...extra })).start();
  relays.push(process);
  return process;
}

function events(prefix: string, count: number, aggregates = 4): OutboxEventInput[] {
  return Array.from({ length: count }, (_, i) => {
    const invoiceId = `${prefix}_${i % aggregates}`;
    return {
      eventId: deterministicEventId([prefix, i]),
      aggregateType: 'invoice',
      aggregateId: invoiceId,
      eventType: 'invoice.paid',
      payload: { invoice_id: invoiceId, customer_id: 'cus_1', payment_id: `pay_${i}`, amount_cents: i, currency: 'EUR', paid_at: new Date(Date.UTC(2024, 0, 1) + i) },
    };
  });
}

async function write(batch: readonly OutboxEventInput[]): Promise<void> {
  const client = await outbox.pool.connect();
  try {
    await client.query('BEGIN');
    await writeOutboxEvents(client, batch, { table: outbox.table });
    await client.query('COMMIT');
  } finally {
    client.release();
  }
}

/** Effect: one row per application, in application order. */
async function applyEffect(groupId: string, event: ConsumedEvent<InvoicePaid>, tx: pg.PoolClient): Promise<void> {
  if (!(event.payload.paid_at instanceof Date)) throw new Error('paid_at should decode as a Date');
  await tx.query(`INSERT INTO ${effects} (group_id, event_id, aggregate_id, amount_cents) VALUES ($1, $2, $3, $4)`, [groupId, event.eventId, event.aggregateId, event.payload.amount_cents]);
}

function consumer(groupId: string, handler: EventHandler<InvoicePaid> = (event, tx) => applyEffect(groupId, event, tx)): IdempotentConsumer {
  const created = createIdempotentConsumer<InvoicePaid>({
    kafka: kafkaClient(),
    groupId,
    topics: [topic],
    pool: outbox.pool,
    handler,
    format: 'avro',
    schemaRegistryUrl: inject('services').schemaRegistryUrl,
    fromBeginning: true,
    table: dedup,
    consumerConfig: { retry: { retries: 50, initialRetryTime: 100, maxRetryTime: 1_000 } },
  });
  consumers.push(created);
  return created;
}

async function effectCounts(groupId: string): Promise<Map<string, number>> {
  const { rows } = await outbox.pool.query<{ event_id: string; n: number }>(`SELECT event_id, count(*)::int AS n FROM ${effects} WHERE group_id = $1 GROUP BY event_id`, [groupId]);
  return new Map(rows.map((row) => [row.event_id, row.n]));
}

async function dedupCount(groupId: string): Promise<number> {
  const { rows } = await outbox.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${dedup} WHERE consumer_group = $1`, [groupId]);
  return rows[0]!.n;
}

/** Every written event applied exactly once for the group. */
async function expectExactlyOnce(groupId: string, written: readonly OutboxEventInput[]): Promise<void> {
  const counts = await effectCounts(groupId);
  expect([...counts.values()].filter((n) => n !== 1)).toEqual([]);
  expect(new Set(counts.keys())).toEqual(new Set(written.map((event) => event.eventId)));
  expect(await dedupCount(groupId)).toBe(written.length);
}

async function waitApplied(groupId: string, count: number, what: string): Promise<void> {
  await eventually(what, async () => ([...(await effectCounts(groupId)).values()].reduce((a, b) => a + b, 0) >= count ? true : undefined), 90_000);
}

beforeAll(async () => {
  await outbox.create();
  await ensureConsumedEventsTable(outbox.pool, dedup);
  await ensureConsumedEventsTable(outbox.pool, dedup); // idempotent
  await outbox.pool.query(`CREATE TABLE ${effects} (seq bigserial PRIMARY KEY, group_id text NOT NULL, event_id text NOT NULL, aggregate_id text, amount_cents bigint)`);
  await createTopics([topic, outbox.deadLetterTopic]);
});

afterAll(async () => {
  for (const each of consumers) await each.stop().catch(() => undefined);
  for (const each of relays) await each.kill9();
  await outbox.pool.query(`DROP TABLE IF EXISTS ${effects}, ${dedup}`).catch(() => undefined);
  await outbox.destroy();
});

describe('idempotent consumer', () => {
  const written: OutboxEventInput[] = [];

  it('applies each event once, in per-aggregate order; an `outbox-relay replay` of all of them is skipped', async () => {
    const active = relay();
    await active.waitActive();
    for (let i = 0; i < 6; i += 1) {
      const batch = events(`replay${i}`, 10);
      await write(batch);
      written.push(...batch);
    }
    const first = consumer('g-replay');
    await first.start();
    await waitApplied('g-replay', written.length, 'every event applied');
    await expectExactlyOnce('g-replay', written);
    // Per aggregate, application order is commit order (amount_cents counts up within a batch).
    const { rows } = await outbox.pool.query<{ aggregate_id: string; amounts: string[] }>(`SELECT aggregate_id, array_agg(amount_cents ORDER BY seq) AS amounts FROM ${effects} WHERE group_id = 'g-replay' GROUP BY aggregate_id`);
    expect(rows).toHaveLength(24);
    for (const row of rows) {
      const amounts = row.amounts.map(Number);
      expect(amounts).toEqual([...amounts].sort((a, b) => a - b));
    }

    const replayed = await cli(['replay', '--since', '2000-01-01T00:00:00Z'], outbox.relayEnv({ OUTBOX_FORMAT: 'avro', OUTBOX_AUTO_REGISTER: 'true' }));
    expect(replayed.stdout).toMatch(new RegExp(`replayed ${written.length} events`));
    await eventually('the replayed events skipped', async () => (first.stats.duplicates >= written.length ? true : undefined), 90_000);
    expect(first.stats).toMatchObject({ applied: written.length, duplicates: written.length, failures: 0 });
    await expectExactlyOnce('g-replay', written);
    await first.stop();
    await active.stop();
  });

  it('a consumer that dies after its transaction but before its offset commit: the next one skips what was applied', async () => {
    const dying = consumer('g-restart');
    // The process "dies" between the Postgres COMMIT and the Kafka offset commit, for every event.
    dying.consumer.commitOffsets = async () => undefined;
    await dying.start();
    await waitApplied('g-restart', written.length, 'every event applied by the first consumer');
    await dying.stop();
    const admin = kafkaClient().admin();
    await admin.connect();
    const committed = await admin.fetchOffsets({ groupId: 'g-restart', topics: [topic] });
    await admin.disconnect();
    expect(committed[0]!.partitions.every((partition) => partition.offset === '-1')).toBe(true);

    const next = consumer('g-restart');
    await next.start();
    await eventually('every event delivered again and skipped', async () => (next.stats.duplicates >= written.length * 2 ? true : undefined), 90_000);
    expect(next.stats.applied).toBe(0);
    await expectExactlyOnce('g-restart', written);
    await next.stop();
  });

  it('a relay killed (kill -9) before it confirmed sends events again; each is applied once', async () => {
    // Confirm rarely, so the kill lands after Kafka acknowledged but before Postgres was told.
    const first = relay({ OUTBOX_STATUS_INTERVAL: '10m' });
    await first.waitActive();
    const reader = await new TopicReader().start([topic]);
    const batch = events('crash', 40, 5);
    await write(batch.slice(0, 20));
    await write(batch.slice(20));
    const before = written.length * 2 + batch.length; // first test: written + replay; now the new batch
    await reader.until('the new events on the topic', (records) => records.length >= before);
    await first.kill9();
    const second = relay();
    await second.waitActive();
    await reader.until('the events sent again after the crash', (records) => records.length >= before + batch.length);
    await reader.stop();
    written.push(...batch);

    const fresh = consumer('g-crash');
    await fresh.start();
    await eventually('all records consumed', async () => (fresh.stats.applied + fresh.stats.duplicates >= before + batch.length ? true : undefined), 90_000);
    expect(fresh.stats.applied).toBe(written.length);
    expect(fresh.stats.duplicates).toBeGreaterThanOrEqual(written.length);
    await expectExactlyOnce('g-crash', written);
    await fresh.stop();
    await second.stop();
  });

  it('a failing handler rolls back its effect and the dedup row; the event is delivered again and applied once', async () => {
    const target = written[7]!.eventId;
    const attempts = new Map<string, number>();
    const flaky = consumer('g-fail', async (event, tx) => {
      attempts.set(event.eventId, (attempts.get(event.eventId) ?? 0) + 1);
      if (event.eventId === target) {
        // Nothing of a failed attempt may survive: no effect row from attempt 1 is visible here.
        const { rows } = await tx.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${effects} WHERE group_id = 'g-fail' AND event_id = $1`, [target]);
        expect(rows[0]!.n).toBe(0);
      }
      await applyEffect('g-fail', event, tx);
      if (event.eventId === target && attempts.get(target) === 1) throw new Error('downstream hiccup');
    });
    await flaky.start();
    await eventually('every event applied', async () => (flaky.stats.applied >= written.length ? true : undefined), 90_000);
    // Had the dedup row of attempt 1 survived, attempt 2 would have been skipped as a duplicate.
    expect(attempts.get(target)).toBe(2);
    expect(flaky.stats.failures).toBe(1);
    expect(flaky.stats.applied).toBe(written.length);
    await expectExactlyOnce('g-fail', written);
    await flaky.stop();
  });

  it('prunes consumed_events by age, in batches, per group', async () => {
    const before = await dedupCount('g-fail');
    const kept = await dedupCount('g-replay');
    await outbox.pool.query(`UPDATE ${dedup} SET consumed_at = now() - interval '8 days' WHERE consumer_group = 'g-fail'`);
    expect(await pruneConsumedEvents(outbox.pool, { olderThanMs: 7 * 86_400_000, table: dedup, consumerGroup: 'g-restart' })).toBe(0);
    expect(await pruneConsumedEvents(outbox.pool, { olderThanMs: 7 * 86_400_000, table: dedup, batchSize: 7 })).toBe(before);
    expect(await dedupCount('g-fail')).toBe(0);
    expect(await dedupCount('g-replay')).toBe(kept);
    expect(kept).toBeGreaterThan(0);
  });
});

describe('idempotent consumer: records exactly as the relay wrote them', () => {
  /** Runs a consumer of `topics` until `count` events were handled; returns them by event id. */
  async function consumeAll(groupId: string, topics: readonly string[], count: number, format: 'avro' | 'json' = 'avro'): Promise<Map<string, ConsumedEvent<InvoicePaid>>> {
    const seen = new Map<string, ConsumedEvent<InvoicePaid>>();
    const reading = createIdempotentConsumer<InvoicePaid>({
      kafka: kafkaClient(),
      groupId,
      topics,
      pool: outbox.pool,
      handler: async (event) => {
        seen.set(event.eventId, event);
      },
      format,
      schemaRegistryUrl: inject('services').schemaRegistryUrl,
      fromBeginning: true,
      table: dedup,
    });
    consumers.push(reading);
    await reading.start();
    try {
      await eventually(`${count} events handled`, async () => (seen.size >= count ? true : undefined), 90_000);
    } finally {
      await reading.stop();
    }
    return seen;
  }

  const paid = (invoiceId: string) => JSON.stringify({ invoice_id: invoiceId, customer_id: 'cus_1', payment_id: 'pay_1', amount_cents: 1, currency: 'EUR', paid_at: '2024-01-01T00:00:00.000Z' });

  it("delivers header names that are Object.prototype's members, __proto__ included, exactly as produced", async () => {
    const headersTopic = outbox.topic('headers');
    await createTopics([headersTopic]);
    const active = relay();
    await active.waitActive();
    const headers = { constructor: 'c', toString: 't', hasOwnProperty: 'h', valueOf: 'v', __proto__x: 'x', traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' };
    // JSON text: `__proto__` as a key of a JS object literal would set its prototype instead.
    const headersJson = `{${Object.entries(headers).map(([name, value]) => `${JSON.stringify(name)}: ${JSON.stringify(value)}`).join(', ')}, "__proto__": "p"}`;
    const eventId = deterministicEventId(['headers', outbox.id]);
    await outbox.pool.query(`INSERT INTO ${outbox.table} (event_id, aggregate_type, aggregate_id, event_type, payload, headers) VALUES ($1, 'headers', 'inv_h', 'invoice.paid', $2, $3)`, [eventId, paid('inv_h'), headersJson]);
    const event = (await consumeAll('g-headers', [headersTopic], 1)).get(eventId)!;
    await active.stop();
    // fromEntries defines each name as an own property, `__proto__` as well.
    const relayHeaders = { event_id: eventId, event_type: 'invoice.paid', aggregate_type: 'headers', created_at: expect.any(String), outbox_commit_lsn: expect.any(String), outbox_source: `public.${outbox.table}` };
    expect({ ...event.headers }).toEqual(Object.fromEntries([...Object.entries(headers), ['__proto__', 'p'], ...Object.entries(relayHeaders)]));
    expect(Object.hasOwn(event.headers, '__proto__') && event.headers['__proto__']).toBe('p');
    expect(Object.getPrototypeOf(event.headers)).toBe(null);
    // Avro has no JSON text to give.
    expect(event.payloadJson).toBeNull();
  });

  it('gives a JSON value beside its parsed payload as the relay published it: parsed with the number source, a 64-bit id keeps every digit', async () => {
    const jsonTopic = outbox.topic('jsonexact');
    await createTopics([jsonTopic]);
    const active = relay({ OUTBOX_FORMAT: 'json' });
    await active.waitActive();
    const eventId = deterministicEventId(['jsonexact', outbox.id]);
    const payload = '{"invoice_id": "inv_j", "ledger_entry_id": 123456789012345678901}';
    await outbox.pool.query(`INSERT INTO ${outbox.table} (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'jsonexact', 'inv_j', 'invoice.paid', $2::jsonb)`, [eventId, payload]);
    const event = (await consumeAll('g-json-exact', [jsonTopic], 1, 'json')).get(eventId)!;
    await active.stop();
    expect(event.payloadJson).toBe((await outbox.pool.query<{ text: string }>('SELECT $1::jsonb::text AS text', [payload])).rows[0]!.text);
    // JSON.parse gives a reviver each value's source text (Node 22+; TypeScript's lib does not declare it yet).
    const parseWithSource = JSON.parse as (text: string, reviver: (key: string, value: unknown, context: { source?: string }) => unknown) => Record<string, unknown>;
    const exact = parseWithSource(event.payloadJson!, (key, value, context) => (key === 'ledger_entry_id' ? BigInt(context.source!) : value));
    expect(exact.ledger_entry_id).toBe(123456789012345678901n);
  });

  it('decodes an Avro key (OUTBOX_KEY_SCHEMA, a record or a string) through the registry into the aggregate id', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'outbox-key-'));
    try {
      const recordKey = path.join(dir, 'record-key.avsc');
      await writeFile(recordKey, JSON.stringify({ type: 'record', name: 'AggregateKey', namespace: 'com.example.billing', fields: [{ name: 'aggregate_id', type: 'string' }] }));
      const stringKey = path.join(dir, 'string-key.avsc');
      await writeFile(stringKey, JSON.stringify('string'));
      const cases: { aggregateType: string; env: Record<string, string> }[] = [
        { aggregateType: 'recordkey', env: { OUTBOX_KEY_SCHEMA: recordKey } },
        // A plain string key has no name: only the topic subject strategy can register it.
        { aggregateType: 'stringkey', env: { OUTBOX_KEY_SCHEMA: stringKey, OUTBOX_SUBJECT_STRATEGY: 'topic' } },
      ];
      await createTopics(cases.map((each) => outbox.topic(each.aggregateType)));
      const expected = new Map<string, string>();
      for (const each of cases) {
        const active = relay(each.env);
        await active.waitActive();
        for (let i = 0; i < 3; i += 1) {
          const eventId = deterministicEventId(['key', each.aggregateType, outbox.id, i]);
          const aggregateId = `${each.aggregateType}_ü_${i}`;
          expected.set(eventId, aggregateId);
          await outbox.pool.query(`INSERT INTO ${outbox.table} (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, $2, $3, 'invoice.paid', $4)`, [eventId, each.aggregateType, aggregateId, paid(aggregateId)]);
        }
        const reader = await new TopicReader().start([outbox.topic(each.aggregateType)]);
        await reader.until('the Avro-keyed records', (records) => records.length >= 3, 60_000, () => active.tail());
        await reader.stop();
        // The key on Kafka is in the Confluent wire format (magic byte 0), not the id as text.
        expect(reader.records.every((record) => record.key?.charCodeAt(0) === 0), each.aggregateType).toBe(true);
        await active.stop();
      }
      const events = await consumeAll('g-keys', cases.map((each) => outbox.topic(each.aggregateType)), expected.size);
      expect(new Map([...events].map(([eventId, event]) => [eventId, event.aggregateId]))).toEqual(expected);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

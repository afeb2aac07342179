import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestOutbox } from './harness/fixture.js';
import { billingEvent } from './harness/outbox.js';
import { eventIds } from './harness/kafka.js';
import { RelayProcess } from './harness/relay-process.js';

describe('delivery', () => {
  const { outbox, reader } = useTestOutbox({ aggregateTypes: ['invoice', 'subscription'], deadLetters: true, read: true });
  let relay: RelayProcess;

  beforeAll(async () => {
    relay = new RelayProcess(outbox.relayEnv({ OUTBOX_MAX_MESSAGE_BYTES: '20000' })).start();
    await relay.waitActive();
  });

  afterAll(async () => {
    await relay?.stop();
  });

  it('every committed row arrives with its key, topic, headers and payload; rolled-back rows never do', async () => {
    const committed = billingEvent('inv_1001', 1);
    const subscription = { ...billingEvent('sub_77', 1, 'subscription.renewed'), aggregateType: 'subscription', headers: null };
    await outbox.insert([committed, subscription]);

    const rolledBack = billingEvent('inv_1001', 2);
    const client = await outbox.pool.connect();
    try {
      await client.query('BEGIN');
      await outbox.insert([rolledBack], client);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    const after = billingEvent('inv_1001', 3);
    await outbox.insert([after]);

    await reader.until('three events', (records) => records.length >= 3);
    const byId = new Map(reader.records.map((record) => [record.headers.event_id, record]));
    const invoice = byId.get(committed.eventId)!;
    expect(invoice.topic).toBe(outbox.topic('invoice'));
    expect(invoice.key).toBe('inv_1001');
    expect(JSON.parse(invoice.value!.toString('utf8'))).toEqual(committed.payload);
    expect(invoice.headers).toMatchObject({
      event_id: committed.eventId,
      event_type: 'invoice.paid',
      aggregate_type: 'invoice',
      traceparent: committed.headers!.traceparent,
    });
    expect(invoice.headers.outbox_commit_lsn).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/);
    expect(new Date(invoice.headers.created_at!).getTime()).toBeGreaterThan(Date.now() - 120_000);
    expect(byId.get(subscription.eventId)?.topic).toBe(outbox.topic('subscription'));
    expect(byId.has(after.eventId)).toBe(true);
    expect(byId.has(rolledBack.eventId)).toBe(false);
    expect(reader.records).toHaveLength(3);
  });

  it('publishes a JSON payload as Postgres stored it: amounts beyond double precision keep every digit', async () => {
    // JSON.parse would turn these into doubles (12345678901234567000, 0.1); the relay passes the jsonb text through.
    const eventId = randomUUID();
    const payload = '{"amount_minor": 12345678901234567890123, "rate": 0.10000000000000000001, "note": "ünïcödé €"}';
    await outbox.pool.query(
      `INSERT INTO ${outbox.table} (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'invoice', 'inv_exact', 'invoice.paid', $2::jsonb)`,
      [eventId, payload],
    );
    await reader.until('the exact payload', (records) => records.some((r) => r.headers.event_id === eventId));
    const text = reader.records.find((r) => r.headers.event_id === eventId)!.value!.toString('utf8');
    expect(text).toContain('12345678901234567890123');
    expect(text).toContain('0.10000000000000000001');
    expect(text).toBe((await outbox.pool.query<{ text: string }>('SELECT $1::jsonb::text AS text', [payload])).rows[0]!.text);
  });

  it('keeps each aggregate in commit order across interleaved concurrent transactions', async () => {
    const aggregates = Array.from({ length: 20 }, (_, i) => `inv_order_${i}`);
    const perAggregate = 25;
    // Concurrent writers, each owning some aggregates, so commits interleave across aggregates
    // while each aggregate's own events commit in sequence.
    await Promise.all(
      [0, 1, 2, 3].map(async (writer) => {
        const mine = aggregates.filter((_, i) => i % 4 === writer);
        for (let sequence = 0; sequence < perAggregate; sequence += 1) {
          const client = await outbox.pool.connect();
          try {
            await client.query('BEGIN');
            for (const aggregate of mine) await outbox.insert([billingEvent(aggregate, sequence)], client);
            await client.query('COMMIT');
          } finally {
            client.release();
          }
        }
      }),
    );
    const expected = aggregates.length * perAggregate;
    const ours = () => reader.records.filter((record) => record.key?.startsWith('inv_order_'));
    await reader.until(`${expected} ordered events`, () => ours().length >= expected);
    for (const aggregate of aggregates) {
      const sequences = ours()
        .filter((record) => record.key === aggregate)
        .map((record) => (JSON.parse(record.value!.toString('utf8')) as { sequence: number }).sequence);
      expect(sequences, aggregate).toEqual(Array.from({ length: perAggregate }, (_, i) => i));
    }
    expect(new Set(eventIds(ours())).size).toBe(expected);
  });

  it('sends poison rows to the dead-letter topic with the reason, and the stream goes on', async () => {
    const before = billingEvent('inv_poison', 1);
    const poisonId = randomUUID();
    const after = billingEvent('inv_poison', 3);
    await outbox.insert([before]);
    // A topic Kafka would refuse, and headers that are not an object: both poison, neither a crash.
    await outbox.insert([{ ...billingEvent('inv_poison', 2), eventId: poisonId, aggregateType: 'bad topic!' }]);
    const badHeadersId = randomUUID();
    await outbox.pool.query(
      `INSERT INTO ${outbox.table} (event_id, aggregate_type, aggregate_id, event_type, payload, headers) VALUES ($1, 'invoice', 'inv_poison', 'invoice.paid', '{}', '[1,2]')`,
      [badHeadersId],
    );
    // Larger than the broker would take: a dead letter (without the row), not a batch failing forever.
    const huge = { ...billingEvent('inv_poison', 4), payload: { notes: 'x'.repeat(30_000) } };
    await outbox.insert([huge]);
    await outbox.insert([after]);

    await reader.until('the event after the poison rows', (records) => records.some((record) => record.headers.event_id === after.eventId));
    await reader.until('three dead letters', (records) => records.filter((record) => record.topic === outbox.deadLetterTopic).length >= 3);
    const deadLetters = reader.records.filter((record) => record.topic === outbox.deadLetterTopic);
    const route = deadLetters.find((record) => record.headers.event_id === poisonId)!;
    expect(route.headers.dead_letter_code).toBe('ROUTE_BAD_TOPIC');
    expect(route.headers.dead_letter_reason).toMatch(/not a legal Kafka topic/);
    expect(route.headers.outbox_commit_lsn).toMatch(/\//);
    expect(JSON.parse(route.value!.toString('utf8'))).toMatchObject({ event_id: poisonId, aggregate_type: 'bad topic!' });
    const headers = deadLetters.find((record) => record.headers.event_id === badHeadersId)!;
    expect(headers.headers.dead_letter_code).toBe('DECODE_BAD_VALUE');
    expect(headers.headers.dead_letter_reason).toMatch(/column "headers": expected a JSON object/);
    const tooLarge = deadLetters.find((record) => record.headers.event_id === huge.eventId)!;
    expect(tooLarge.headers.dead_letter_code).toBe('SINK_TOO_LARGE');
    expect(tooLarge.headers.dead_letter_reason).toMatch(/exceeds OUTBOX_MAX_MESSAGE_BYTES \(20000\)/);
    expect(tooLarge.headers.dead_letter_row_omitted).toMatch(/still in public\./);
    expect(reader.records.some((record) => record.headers.event_id === before.eventId)).toBe(true);
    expect(relay.logs.some((line) => line.msg.includes('poison') && JSON.stringify(line).includes('amount_cents'))).toBe(false);
  });
});

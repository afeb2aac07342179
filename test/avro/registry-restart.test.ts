import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serviceAction } from '../harness/control.js';
import { type ConsumedRecord } from '../harness/kafka.js';
import { useTestOutbox } from '../harness/fixture.js';
import { type OutboxRow } from '../harness/outbox.js';
import { consumerRegistry } from '../harness/registry-consumer.js';
import { delay, RelayProcess } from '../harness/relay-process.js';


function invoicePaid(aggregateId: string, n: number): OutboxRow {
  const payload = { invoice_id: aggregateId, customer_id: 'cus_1', subscription_id: null, payment_id: `pay_${n}`, amount_cents: n, currency: 'EUR', lines: [], paid_at: Date.UTC(2024, 0, 1) + n };
  return { eventId: randomUUID(), aggregateType: 'invoice', aggregateId, eventType: 'invoice.paid', payload, headers: null };
}

function paymentFailed(aggregateId: string, n: number): OutboxRow {
  const payload = { payment_id: `pay_${n}`, invoice_id: aggregateId, customer_id: 'cus_1', amount_cents: n, currency: 'EUR', failure_code: 'card_declined', failure_message: null, attempt: 1, next_retry_at: null, failed_at: Date.UTC(2024, 0, 1) + n };
  return { eventId: randomUUID(), aggregateType: 'invoice', aggregateId, eventType: 'payment.failed', payload, headers: null };
}

/** The payload as decoded: the timestamps as Dates. */
function expected(row: OutboxRow): Record<string, unknown> {
  const payload = row.payload as Record<string, unknown>;
  const stamp = row.eventType === 'invoice.paid' ? 'paid_at' : 'failed_at';
  return { ...payload, [stamp]: new Date(payload[stamp] as number) };
}

describe('avro: registry stopped and restarted mid-stream', () => {
  const { outbox, reader } = useTestOutbox({ deadLetters: true, read: true });
  let relay: RelayProcess;

  beforeAll(async () => {
    relay = new RelayProcess(outbox.relayEnv({ OUTBOX_FORMAT: 'avro', OUTBOX_SUBJECT_STRATEGY: 'topic-record', OUTBOX_AUTO_REGISTER: 'true' })).start();
    await relay.waitActive();
  });

  afterAll(async () => {
    await serviceAction('start', 'registry').catch(() => undefined);
    await relay?.stop();
  });

  it('nothing lost, nothing dead-lettered because of it; ids are resolved again after the restart', async () => {
    const sent: OutboxRow[] = [];
    const insert = async (rows: OutboxRow[]) => {
      await outbox.insert(rows);
      sent.push(...rows);
    };
    const has = (rows: readonly OutboxRow[]) => (records: readonly ConsumedRecord[]) => rows.every((row) => records.some((record) => record.headers.event_id === row.eventId));
    let n = 0;
    const aggregates = ['inv_a', 'inv_b', 'inv_c'];
    const batch = (make: (aggregate: string, n: number) => OutboxRow, count: number) => Array.from({ length: count }, () => make(aggregates[(n += 1) % 3]!, n));

    // Before: invoice.paid known; a consumer reads (and caches) its schema from the registry as it is now.
    const before = batch(invoicePaid, 20);
    await insert(before);
    await reader.until('the events before the stop', has(before), 60_000, () => relay.tail());
    const early = consumerRegistry();
    for (const record of reader.records) await early.decode(record.value!);

    await serviceAction('stop', 'registry');
    // During: invoice.paid still flows from the cached id; payment.failed needs the registry and waits for it.
    const during = batch(invoicePaid, 20);
    await insert(during);
    const blocked = [...batch(paymentFailed, 5), ...batch(invoicePaid, 10)];
    for (const row of blocked) await insert([row]);
    await relay.waitForLog(/schema registry unavailable/, 60_000);
    await delay(3_000);
    expect(reader.records.some((record) => record.headers.event_id === blocked[0]!.eventId)).toBe(false);

    await serviceAction('start', 'registry');
    const after = batch(invoicePaid, 10);
    await insert(after);
    await reader.until('every committed event', has(sent), 120_000, () => relay.tail());

    expect(new Set(await outbox.committedIds())).toEqual(new Set(sent.map((row) => row.eventId)));
    expect(reader.records.filter((record) => record.topic === outbox.deadLetterTopic)).toEqual([]);
    // Per aggregate, first deliveries in commit order (a restart may add duplicates, never reorder).
    for (const aggregate of aggregates) {
      const firsts = [...new Set(reader.records.filter((record) => record.key === aggregate).map((record) => record.headers.event_id))];
      expect(firsts).toEqual(sent.filter((row) => row.aggregateId === aggregate).map((row) => row.eventId));
    }
    // What was encoded once the registry came back carries ids of the registry as it is now
    // (it restarted empty): a consumer that never saw the old registry decodes it.
    const fresh = consumerRegistry();
    const rows = new Map(sent.map((row) => [row.eventId, row]));
    for (const row of [...blocked, ...after]) {
      const records = reader.records.filter((record) => record.headers.event_id === row.eventId);
      expect(await fresh.decode(records.at(-1)!.value!)).toEqual(expected(row));
    }
    for (const row of [...before, ...during]) {
      const record = reader.records.find((each) => each.headers.event_id === row.eventId)!;
      expect(await early.decode(record.value!)).toEqual(expected(rows.get(row.eventId)!));
    }
    expect(relay.logs.some((line) => line.code === 'ENCODE_REGISTRY')).toBe(true);
  });
});

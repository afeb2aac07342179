import { randomUUID } from 'node:crypto';
import { cp, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { createTopics, TopicReader, type ConsumedRecord } from '../harness/kafka.js';
import { useTestOutbox } from '../harness/fixture.js';
import { TestOutbox, type OutboxRow } from '../harness/outbox.js';
import { consumerRegistry } from '../harness/registry-consumer.js';
import { RelayProcess } from '../harness/relay-process.js';


/** The timestamp-millis fields of the billing schemas. */
const TIMESTAMPS = new Set(['current_period_start', 'current_period_end', 'trial_end', 'created_at', 'period_start', 'period_end', 'renewed_at', 'canceled_at', 'effective_at', 'paid_at', 'next_retry_at', 'failed_at', 'completed_at']);

/** The payload as a decoder gives it back: timestamps (ISO strings or epoch millis in) as Dates. */
function decoded(payload: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(payload).map(([name, value]) => [name, TIMESTAMPS.has(name) && value !== null ? new Date(value as string | number) : value]));
}

const BILLING: Record<string, (id: string, n: number) => Record<string, unknown>> = {
  'subscription.created': (id, n) => ({ subscription_id: id, customer_id: `cus_${n}`, plan_id: 'pro', quantity: 3, unit_amount_cents: 1_900, currency: 'EUR', billing_interval: 'month', current_period_start: '2024-03-01T00:00:00Z', current_period_end: Date.UTC(2024, 3, 1), trial_end: null, created_at: '2024-03-01T00:00:00.250+02:00' }),
  'subscription.renewed': (id, n) => ({ subscription_id: id, customer_id: `cus_${n}`, invoice_id: `inv_${n}`, amount_cents: 5_700, currency: 'EUR', period_start: '2024-04-01T00:00:00Z', period_end: '2024-05-01T00:00:00Z', renewed_at: Date.UTC(2024, 3, 1, 0, 0, 1) }),
  'subscription.canceled': (id, n) => ({ subscription_id: id, customer_id: `cus_${n}`, reason: 'too expensive', cancel_at_period_end: true, canceled_at: '2024-04-10T12:00:00Z', effective_at: '2024-05-01T00:00:00Z' }),
  'invoice.paid': (id, n) => ({ invoice_id: id, customer_id: `cus_${n}`, subscription_id: null, payment_id: `pay_${n}`, amount_cents: 1_000 + n, currency: 'USD', lines: [{ description: 'Pro plan', quantity: 1, amount_cents: 1_000 + n }], paid_at: '2024-03-01T10:15:30.123Z' }),
  'payment.failed': (id, n) => ({ payment_id: `pay_${n}`, invoice_id: id, customer_id: `cus_${n}`, amount_cents: 4_200, currency: 'EUR', failure_code: 'card_declined', failure_message: null, attempt: 2, next_retry_at: '2024-03-02T10:00:00Z', failed_at: Date.UTC(2024, 2, 1, 10) }),
  'refund.completed': (id, n) => ({ refund_id: `re_${n}`, payment_id: `pay_${n}`, invoice_id: id, customer_id: `cus_${n}`, amount_cents: 999, currency: 'GBP', reason: null, completed_at: '2024-03-05T08:00:00Z' }),
};

function row(eventType: string, aggregateId: string, n: number, payload?: unknown): OutboxRow {
  return { eventId: randomUUID(), aggregateType: eventType.split('.')[0]!, aggregateId, eventType, payload: payload ?? BILLING[eventType]!(aggregateId, n), headers: null };
}

/** A pass-through proxy in front of the registry that counts requests by method and path. */
class CountingProxy {
  readonly requests: string[] = [];
  private server: Server | null = null;
  constructor(private readonly target: URL) {}

  async start(): Promise<string> {
    this.server = createServer((incoming, outgoing) => {
      this.requests.push(`${incoming.method} ${incoming.url}`);
      const forward = httpRequest({ host: this.target.hostname, port: this.target.port, method: incoming.method, path: incoming.url, headers: incoming.headers }, (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(outgoing);
      });
      forward.on('error', () => outgoing.writeHead(502).end());
      incoming.pipe(forward);
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}${this.target.pathname}`;
  }

  async stop(): Promise<void> {
    await new Promise((resolve) => (this.server ? this.server.close(resolve) : resolve(undefined)));
  }
}

async function registryGet(route: string): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${inject('services').schemaRegistryUrl}${route}`);
  return { status: response.status, body: await response.json() };
}

function schemaIdOf(record: ConsumedRecord): number {
  return record.value!.readUInt32BE(1);
}

describe('avro: decoding, caching, dead letters', () => {
  const { outbox, reader } = useTestOutbox({ aggregateTypes: ['subscription', 'invoice', 'payment', 'refund'], deadLetters: true, read: true });
  const proxy = new CountingProxy(new URL(inject('services').schemaRegistryUrl));
  let relay: RelayProcess;

  beforeAll(async () => {
    const registryUrl = await proxy.start();
    relay = new RelayProcess(outbox.relayEnv({ OUTBOX_FORMAT: 'avro', SCHEMA_REGISTRY_URL: registryUrl, OUTBOX_SUBJECT_STRATEGY: 'topic-record', OUTBOX_AUTO_REGISTER: 'true' })).start();
    await relay.waitActive();
  });

  afterAll(async () => {
    await relay?.stop();
    await proxy.stop();
  });

  it('a consumer that knows nothing of the relay decodes every message through the registry and gets back the original payload, logical types included', async () => {
    const rows = Object.keys(BILLING).flatMap((eventType) => Array.from({ length: 5 }, (_, n) => row(eventType, `${eventType.split('.')[0]}_${n % 2}`, n)));
    await outbox.insert(rows.slice(0, 10));
    await outbox.insert(rows.slice(10));
    await reader.until(`${rows.length} records`, (records) => records.length >= rows.length, 90_000, () => relay.tail());
    const consumer = consumerRegistry();
    const byId = new Map(reader.records.map((record) => [record.headers.event_id, record]));
    for (const sent of rows) {
      const record = byId.get(sent.eventId)!;
      expect(record.topic).toBe(outbox.topic(sent.aggregateType));
      expect(record.key).toBe(sent.aggregateId);
      expect(record.value![0]).toBe(0);
      expect(await consumer.decode(record.value!)).toEqual(decoded(sent.payload as Record<string, unknown>));
    }
    expect(reader.records.filter((record) => record.topic === outbox.deadLetterTopic)).toEqual([]);
  });

  it('ids are cached: each subject is registered once, and later events do not reach the registry', async () => {
    const registrations = () => proxy.requests.filter((line) => line.startsWith('POST') && line.endsWith('/versions'));
    // topic-record: one subject per event type (each on its own topic here).
    expect(registrations()).toHaveLength(Object.keys(BILLING).length);
    const before = proxy.requests.length;
    const more = Array.from({ length: 200 }, (_, n) => row('invoice.paid', `invoice_${n % 7}`, n));
    await outbox.insert(more);
    await reader.until('200 more records', (records) => more.every((sent) => records.some((record) => record.headers.event_id === sent.eventId)), 90_000, () => relay.tail());
    expect(proxy.requests.slice(before)).toEqual([]);
  });

  it('invalid payloads and unknown types land in the dead-letter topic with their reason; valid ones around them arrive in order', async () => {
    const aggregate = `invoice_dl_${randomUUID().slice(0, 6)}`;
    const valid = [0, 1, 2].map((n) => row('invoice.paid', aggregate, n));
    const badAmount = row('invoice.paid', aggregate, 9, { ...BILLING['invoice.paid']!(aggregate, 9), amount_cents: '12.5' });
    const badLine = row('invoice.paid', aggregate, 9, { ...BILLING['invoice.paid']!(aggregate, 9), lines: [{ description: 'x', quantity: 1.5, amount_cents: 1 }] });
    const unknown = row('invoice.voided', aggregate, 9, { invoice_id: aggregate });
    await outbox.insert([valid[0]!, badAmount]);
    await outbox.insert([valid[1]!, unknown, badLine]);
    await outbox.insert([valid[2]!]);

    await reader.until('three dead letters and the last valid event', (records) =>
      records.filter((record) => record.topic === outbox.deadLetterTopic).length >= 3 && records.some((record) => record.headers.event_id === valid[2]!.eventId), 90_000, () => relay.tail());
    const dead = new Map(reader.records.filter((record) => record.topic === outbox.deadLetterTopic).map((record) => [record.headers.event_id, record.headers]));
    expect(dead.get(badAmount.eventId)).toMatchObject({ dead_letter_code: 'ENCODE_SCHEMA_MISMATCH' });
    expect(dead.get(badAmount.eventId)!.dead_letter_reason).toContain('amount_cents: expected long, got "12.5"');
    expect(dead.get(badLine.eventId)!.dead_letter_reason).toContain('lines[0].quantity: expected int, got 1.5');
    expect(dead.get(unknown.eventId)).toMatchObject({ dead_letter_code: 'ENCODE_NO_SCHEMA' });
    expect(dead.get(unknown.eventId)!.dead_letter_reason).toContain('invoice.voided');
    const consumer = consumerRegistry();
    const delivered = reader.records.filter((record) => record.key === aggregate && record.topic === outbox.topic('invoice'));
    expect(delivered.map((record) => record.headers.event_id)).toEqual(valid.map((sent) => sent.eventId));
    for (const [i, record] of delivered.entries()) expect(await consumer.decode(record.value!)).toEqual(decoded(valid[i]!.payload as Record<string, unknown>));
    expect(relay.logs.some((line) => line.msg.includes('stream interrupted'))).toBe(false);
  });
});

describe('avro: subject strategies', () => {
  it.each([
    ['topic', (topic: string) => `${topic}-value`],
    ['record', () => 'com.example.billing.RefundCompleted'],
    ['topic-record', (topic: string) => `${topic}-com.example.billing.RefundCompleted`],
  ] as const)('%s strategy registers under the expected subject, and the message carries that id', async (strategy, subjectFor) => {
    const outbox = new TestOutbox();
    const reader = new TopicReader();
    // One topic per event type, so that even the topic strategy sees one record type per subject.
    const topic = `${outbox.topicPrefix}.refund.completed`;
    await outbox.create();
    await createTopics([topic]);
    await reader.start([topic]);
    const relay = new RelayProcess(outbox.relayEnv({ OUTBOX_FORMAT: 'avro', OUTBOX_SUBJECT_STRATEGY: strategy, OUTBOX_AUTO_REGISTER: 'true', OUTBOX_TOPIC_TEMPLATE: `${outbox.topicPrefix}.{event_type}` })).start();
    try {
      await relay.waitActive();
      const sent = row('refund.completed', 'refund_1', 1);
      await outbox.insert([sent]);
      await reader.until('the refund', (records) => records.length >= 1, 60_000, () => relay.tail());
      const latest = await registryGet(`/subjects/${encodeURIComponent(subjectFor(topic))}/versions/latest`);
      expect(latest.status).toBe(200);
      expect(schemaIdOf(reader.records[0]!)).toBe((latest.body as { id: number }).id);
      expect(await consumerRegistry().decode(reader.records[0]!.value!)).toEqual(decoded(sent.payload as Record<string, unknown>));
    } finally {
      await relay.stop();
      await reader.stop();
      await outbox.destroy();
    }
  });
});

describe('avro: evolution', () => {
  const { outbox } = useTestOutbox({ aggregateTypes: [] });
  let dir: string;
  let namespace: string;
  const subject = () => `${namespace}.InvoicePaid`;
  const file = () => path.join(dir, 'billing', 'invoice.paid.avsc');

  beforeAll(async () => {
    // Our own copy of the billing schemas in a namespace of our own, so subjects (record strategy) are ours.
    dir = await mkdtemp(path.join(tmpdir(), 'avro-evolution-'));
    await cp('schemas', dir, { recursive: true });
    namespace = `itest.${outbox.id}`;
    for (const eventType of Object.keys(BILLING)) await editSchema(path.join(dir, 'billing', `${eventType}.avsc`), (schema) => ({ ...schema, namespace }));
  });

  async function editSchema(target: string, edit: (schema: Record<string, unknown>) => Record<string, unknown>): Promise<void> {
    await writeFile(target, JSON.stringify(edit(JSON.parse(await readFile(target, 'utf8')) as Record<string, unknown>), null, 2));
  }

  function startRelay(extra: Record<string, string> = {}): RelayProcess {
    return new RelayProcess(outbox.relayEnv({ OUTBOX_FORMAT: 'avro', OUTBOX_SUBJECT_STRATEGY: 'record', OUTBOX_AUTO_REGISTER: 'true', OUTBOX_SCHEMAS_DIR: dir, ...extra })).start();
  }

  async function versions(): Promise<number[]> {
    return (await registryGet(`/subjects/${encodeURIComponent(subject())}/versions`)).body as number[];
  }

  it('with auto-register off, a schema never registered fails the start, naming the subject', async () => {
    const relay = startRelay({ OUTBOX_AUTO_REGISTER: 'false' });
    expect(await relay.waitExit()).toBe(1);
    expect(relay.tail(50)).toContain(`subject "${subject()}" has no version equal to`);
  });

  it('a compatible change (optional field with a default) is accepted; an incompatible one is refused at start, naming the file and the reason', async () => {
    const first = startRelay();
    await first.waitActive();
    expect(await first.stop()).toBe(0);
    expect(await versions()).toHaveLength(1);
    // Whatever the registry's global default, this subject checks BACKWARD compatibility (the relay itself never sets it).
    const config = await fetch(`${inject('services').schemaRegistryUrl}/config/${encodeURIComponent(subject())}`, {
      method: 'PUT', headers: { 'content-type': 'application/vnd.schemaregistry.v1+json' }, body: JSON.stringify({ compatibility: 'BACKWARD' }),
    });
    expect(config.status).toBe(200);

    await editSchema(file(), (schema) => ({ ...schema, fields: [...(schema.fields as unknown[]), { name: 'note', type: ['null', 'string'], default: null }] }));
    const compatible = startRelay();
    await compatible.waitActive();
    expect(await compatible.stop()).toBe(0);
    expect(await versions()).toHaveLength(2);

    // Auto-register off finds the version equal to the local file.
    const lookup = startRelay({ OUTBOX_AUTO_REGISTER: 'false' });
    await lookup.waitActive();
    expect(await lookup.stop()).toBe(0);

    await editSchema(file(), (schema) => ({ ...schema, fields: (schema.fields as { name: string }[]).map((field) => (field.name === 'amount_cents' ? { ...field, type: 'string' } : field)) }));
    const incompatible = startRelay();
    expect(await incompatible.waitExit()).toBe(1);
    const output = incompatible.tail(50);
    expect(output).toContain('SCHEMA_INCOMPATIBLE');
    expect(output).toContain('invoice.paid.avsc');
    expect(output).toMatch(/incompatible: .*(STRING|string)/);
    expect(await versions()).toHaveLength(2);
  });
});

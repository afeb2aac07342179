import avro from 'avsc';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { PoisonEventError, RelayError } from '../../errors.js';
import type { OutboxEvent } from '../../event.js';
import { AvroEncoder, type KeySchema } from './avro-encoder.js';
import { FOR_SCHEMA_OPTIONS } from './logical-types.js';
import type { SchemaRegistryPort } from './registry.js';
import { loadSchemaSet, type LocalSchema } from './schema-set.js';
import type { SubjectStrategy } from './subjects.js';
import { unframe } from './wire.js';

const billing = await loadSchemaSet('schemas');

/** A registry at the port: ids by (subject, schema), every call recorded, failures on demand. */
class FakeRegistry implements SchemaRegistryPort {
  readonly calls: { operation: 'register' | 'lookup'; subject: string }[] = [];
  readonly registered = new Map<string, number>();
  failure: RelayError | null = null;
  private nextId = 41;

  async register(subject: string, schema: string): Promise<number> {
    this.calls.push({ operation: 'register', subject });
    if (this.failure) throw this.failure;
    const key = `${subject}\u0000${schema}`;
    let id = this.registered.get(key);
    if (id === undefined) this.registered.set(key, (id = (this.nextId += 1)));
    return id;
  }

  async lookup(subject: string, schema: string): Promise<number | null> {
    this.calls.push({ operation: 'lookup', subject });
    if (this.failure) throw this.failure;
    return this.registered.get(`${subject}\u0000${schema}`) ?? null;
  }
}

function encoderWith(registry: FakeRegistry, options: { strategy?: SubjectStrategy; autoRegister?: boolean; keySchema?: KeySchema } = {}): AvroEncoder {
  return new AvroEncoder({
    schemas: billing.byEventType,
    schemasDir: 'schemas',
    registry,
    strategy: options.strategy ?? 'topic',
    autoRegister: options.autoRegister ?? true,
    keySchema: options.keySchema ?? null,
    logger: pino({ level: 'silent' }),
  });
}

function event(payload: unknown, eventType = 'invoice.paid'): OutboxEvent {
  return { eventId: 'e1', aggregateType: 'invoice', aggregateId: 'inv_1', eventType, payload, headers: {}, createdAt: null };
}

function invoicePaid(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    invoice_id: 'inv_1',
    customer_id: 'cus_1',
    subscription_id: 'sub_1',
    payment_id: 'pay_1',
    amount_cents: 12_500,
    currency: 'EUR',
    lines: [
      { description: 'Pro plan', quantity: 2, amount_cents: 10_000 },
      { description: 'Extra seat', quantity: 1, amount_cents: 2_500 },
    ],
    paid_at: '2024-03-01T10:15:30.123Z',
    ...overrides,
  };
}

function schema(eventType: string): LocalSchema {
  return billing.byEventType.get(eventType)!;
}

async function poisonOf(work: () => unknown): Promise<PoisonEventError> {
  try {
    await work();
  } catch (error) {
    if (error instanceof PoisonEventError) return error;
    throw error;
  }
  throw new Error('expected a PoisonEventError');
}

describe('AvroEncoder', () => {
  it('frames the Avro body in the Confluent wire format with the registered id; timestamps round-trip as instants', async () => {
    const registry = new FakeRegistry();
    const framed = await encoderWith(registry).encode(event(invoicePaid()), 'billing.invoice');
    const { schemaId, body } = unframe(framed);
    expect(framed[0]).toBe(0);
    expect(schemaId).toBe([...registry.registered.values()][0]);
    expect(schema('invoice.paid').type.fromBuffer(body)).toEqual({ ...invoicePaid(), paid_at: new Date('2024-03-01T10:15:30.123Z') });
  });

  it('encodes a text or bytea payload holding JSON as the same record; text that is not JSON is poison', async () => {
    const encoder = encoderWith(new FakeRegistry());
    const fromJsonb = unframe(await encoder.encode(event(invoicePaid()), 't')).body;
    for (const stored of [JSON.stringify(invoicePaid()), Buffer.from(JSON.stringify(invoicePaid()))]) {
      expect(unframe(await encoder.encode(event(stored), 't')).body.equals(fromJsonb)).toBe(true);
    }
    const poison = await poisonOf(() => encoder.encode(event('amount=12.50'), 't'));
    expect(poison).toMatchObject({ code: 'DECODE_BAD_VALUE', message: expect.stringContaining('the payload is text that is not JSON') });
  });

  it('accepts epoch millis and ISO strings with an offset for timestamp-millis, and gives back the same instant', async () => {
    const encoder = encoderWith(new FakeRegistry());
    const millis = Date.UTC(2024, 2, 1, 9, 0, 0);
    for (const paidAt of [millis, '2024-03-01T10:00:00+01:00', '2024-03-01T09:00:00Z']) {
      const { body } = unframe(await encoder.encode(event(invoicePaid({ paid_at: paidAt })), 't'));
      expect((schema('invoice.paid').type.fromBuffer(body) as { paid_at: Date }).paid_at.getTime()).toBe(millis);
    }
  });

  it('fills an optional field that the payload leaves out with its default', async () => {
    const payload = invoicePaid();
    delete payload.subscription_id;
    const { body } = unframe(await encoderWith(new FakeRegistry()).encode(event(payload), 't'));
    expect(schema('invoice.paid').type.fromBuffer(body)).toMatchObject({ subscription_id: null });
  });

  it('is synchronous once the id is known, and asks the registry once per subject', async () => {
    const registry = new FakeRegistry();
    const encoder = encoderWith(registry);
    const first = encoder.encode(event(invoicePaid()), 'billing.invoice');
    expect(first).toBeInstanceOf(Promise);
    await first;
    for (let i = 0; i < 100; i += 1) expect(encoder.encode(event(invoicePaid()), 'billing.invoice')).toBeInstanceOf(Buffer);
    await encoder.encode(event(invoicePaid()), 'billing.other');
    expect(registry.calls).toEqual([
      { operation: 'register', subject: 'billing.invoice-value' },
      { operation: 'register', subject: 'billing.other-value' },
    ]);
  });

  it('shares one registry request among concurrent first uses', async () => {
    const registry = new FakeRegistry();
    const encoder = encoderWith(registry);
    await Promise.all([encoder.encode(event(invoicePaid()), 't'), encoder.encode(event(invoicePaid()), 't')]);
    expect(registry.calls).toHaveLength(1);
  });

  it.each([
    ['topic', 'billing.invoice-value'],
    ['record', 'com.example.billing.InvoicePaid'],
    ['topic-record', 'billing.invoice-com.example.billing.InvoicePaid'],
  ] as const)('names the subject by the %s strategy', async (strategy, subject) => {
    const registry = new FakeRegistry();
    await encoderWith(registry, { strategy }).encode(event(invoicePaid()), 'billing.invoice');
    expect(registry.calls).toEqual([{ operation: 'register', subject }]);
  });

  it('reports the path that does not fit, e.g. amount_cents: expected long, got "12.5"', async () => {
    const encoder = encoderWith(new FakeRegistry());
    const poison = await poisonOf(() => encoder.encode(event(invoicePaid({ amount_cents: '12.5' })), 't'));
    expect(poison.code).toBe('ENCODE_SCHEMA_MISMATCH');
    expect(poison.message).toContain('amount_cents: expected long, got "12.5"');
    expect(poison.message).toContain('schemas/billing/invoice.paid.avsc');
  });

  it.each([
    ['a nested array item', { lines: [{ description: 'x', quantity: 1, amount_cents: 1 }, { description: 'y', quantity: 1.5, amount_cents: 2 }] }, 'lines[1].quantity: expected int, got 1.5'],
    ['a missing field', { currency: undefined }, 'currency: expected string, got nothing (field missing)'],
    ['an undeclared field', { discount_cents: 5 }, 'discount_cents: not a field of com.example.billing.InvoicePaid'],
    ['a timestamp without zone', { paid_at: '2024-03-01T10:00:00' }, 'paid_at: expected timestamp-millis'],
    ['a long beyond 2^53', { amount_cents: 2 ** 53 + 2 }, 'amount_cents: expected long, got 9007199254740994'],
    ['a nullable string given a number', { subscription_id: 7 }, 'subscription_id: expected null | string, got 7'],
    ['not an object at all', null, '(payload): expected record com.example.billing.InvoicePaid, got null'],
  ])('refuses %s with its path', async (_what, overrides, reason) => {
    const payload = overrides === null ? null : invoicePaid(overrides);
    const poison = await poisonOf(() => encoderWith(new FakeRegistry()).encode(event(payload), 't'));
    expect(poison.message).toContain(reason);
  });

  it('makes an event type without a schema poison, naming where the schema was expected', async () => {
    const poison = await poisonOf(() => encoderWith(new FakeRegistry()).encode(event({}, 'invoice.voided'), 't'));
    expect(poison.code).toBe('ENCODE_NO_SCHEMA');
    expect(poison.message).toContain('schemas/**/invoice.voided.avsc');
  });

  it('checks the payload before the registry: a bad payload is poison even while the registry is down', async () => {
    const registry = new FakeRegistry();
    registry.failure = new RelayError('ENCODE_REGISTRY', 'down');
    const poison = await poisonOf(() => encoderWith(registry).encode(event(invoicePaid({ amount_cents: 'x' })), 't'));
    expect(poison.code).toBe('ENCODE_SCHEMA_MISMATCH');
  });

  it('an unreachable registry is a retriable error, never poison; the id cache is dropped and resolved again', async () => {
    const registry = new FakeRegistry();
    const encoder = encoderWith(registry);
    const before = unframe(await encoder.encode(event(invoicePaid()), 'a')).schemaId;
    registry.failure = new RelayError('ENCODE_REGISTRY', 'connection refused');
    const error = await Promise.resolve(encoder.encode(event(invoicePaid()), 'b')).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(RelayError);
    expect(error).not.toBeInstanceOf(PoisonEventError);
    expect((error as RelayError).retriable).toBe(true);
    // The registry came back empty (in-memory): ids are handed out anew and must be used.
    registry.failure = null;
    registry.registered.clear();
    const again = encoder.encode(event(invoicePaid()), 'a');
    expect(again).toBeInstanceOf(Promise);
    const after = unframe(await again).schemaId;
    expect(after).not.toBe(before);
    expect(after).toBe(registry.registered.get(`a-value\u0000${schema('invoice.paid').definition}`));
  });

  it('with auto-register off only looks up, and names the subject when no version equals the local schema', async () => {
    const registry = new FakeRegistry();
    const error = await Promise.resolve(encoderWith(registry, { autoRegister: false }).encode(event(invoicePaid()), 'billing.invoice')).catch((caught: unknown) => caught);
    expect(error).toMatchObject({ code: 'SCHEMA_NOT_REGISTERED', retriable: false });
    expect((error as Error).message).toContain('subject "billing.invoice-value"');
    expect(registry.calls.every((call) => call.operation === 'lookup')).toBe(true);

    await registry.register('billing.invoice-value', schema('invoice.paid').definition);
    const framed = await encoderWith(registry, { autoRegister: false }).encode(event(invoicePaid()), 'billing.invoice');
    expect(unframe(framed).schemaId).toBe(42);
  });

  it('names the schema file when the registry refuses it as incompatible', async () => {
    const registry = new FakeRegistry();
    registry.failure = new RelayError('SCHEMA_INCOMPATIBLE', 'the registry refused the schema for subject "s" as incompatible: reader type: LONG not compatible');
    const error = await Promise.resolve(encoderWith(registry).encode(event(invoicePaid()), 't')).catch((caught: unknown) => caught);
    expect(error).toMatchObject({ code: 'SCHEMA_INCOMPATIBLE', retriable: false });
    expect((error as Error).message).toMatch(/^schemas\/billing\/invoice\.paid\.avsc: .*LONG not compatible/);
  });

  it('prepare resolves every subject known before the first event, and lists every schema that cannot be used', async () => {
    const registry = new FakeRegistry();
    expect(await encoderWith(registry, { strategy: 'record' }).prepare(() => [])).toBe(billing.byEventType.size);
    expect(await encoderWith(new FakeRegistry(), { strategy: 'topic' }).prepare(() => [])).toBe(0);
    expect(await encoderWith(new FakeRegistry(), { strategy: 'topic' }).prepare((type) => [`billing.${type}`])).toBe(billing.byEventType.size);
    // Several outboxes route one event type to several topics: each topic's subject is resolved.
    expect(await encoderWith(new FakeRegistry(), { strategy: 'topic' }).prepare((type) => [`billing.${type}`, `payments.${type}`])).toBe(2 * billing.byEventType.size);

    const error = await encoderWith(new FakeRegistry(), { strategy: 'record', autoRegister: false }).prepare(() => []).catch((caught: unknown) => caught);
    expect(error).toMatchObject({ code: 'SCHEMA_NOT_REGISTERED' });
    expect((error as Error).message).toContain(`${billing.byEventType.size} schemas cannot be used`);
    expect((error as Error).message).toContain('subject "com.example.billing.RefundCompleted"');
  });

  it('encodes the key with the key schema when one is configured, else gives the aggregate id', async () => {
    const registry = new FakeRegistry();
    expect(encoderWith(registry).encodeKey(event(invoicePaid()), 't')).toBe('inv_1');
    const raw = { type: 'record', name: 'AggregateKey', namespace: 'com.example.billing', fields: [{ name: 'aggregate_id', type: 'string' }] };
    const keySchema: KeySchema = { file: 'key.avsc', fullName: 'com.example.billing.AggregateKey', definition: JSON.stringify(raw), type: avro.Type.forSchema(raw as avro.Schema, FOR_SCHEMA_OPTIONS), field: 'aggregate_id' };
    const key = await encoderWith(registry, { keySchema }).encodeKey(event(invoicePaid()), 'billing.invoice');
    expect(keySchema.type.fromBuffer(unframe(key as Buffer).body)).toEqual({ aggregate_id: 'inv_1' });
    expect(registry.calls.at(-1)).toEqual({ operation: 'register', subject: 'billing.invoice-key' });
  });
});

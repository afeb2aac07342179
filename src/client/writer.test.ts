import { describe, expect, it } from 'vitest';
import { loadSchemaText } from '../encode/avro/schema-set.js';
import { deterministicEventId, uuidV5 } from './event-id.js';
import { OutboxClientError } from './errors.js';
import type { SchemaSet } from './schemas.js';
import { traceparentProblem } from './trace-context.js';
import { writeOutboxEvent, writeOutboxEvents, type OutboxEventInput } from './writer.js';

/** A fake at the port: records statements; `autocommit` makes SAVEPOINT fail as Postgres does. */
class FakeTx {
  readonly statements: { text: string; params: unknown[] | undefined }[] = [];
  constructor(private readonly autocommit = false) {}
  async query(text: string, params?: unknown[]): Promise<{ rowCount: number }> {
    this.statements.push({ text, params });
    if (this.autocommit && text.startsWith('SAVEPOINT')) throw Object.assign(new Error('SAVEPOINT can only be used in transaction blocks'), { code: '25P01' });
    return { rowCount: 1 };
  }
}

const SCHEMA = loadSchemaText(
  'schemas/test/thing.happened.avsc',
  JSON.stringify({ type: 'record', name: 'ThingHappened', namespace: 'test', fields: [{ name: 'id', type: 'string' }, { name: 'lines', type: { type: 'array', items: { type: 'record', name: 'Line', fields: [{ name: 'amount_cents', type: 'long' }] } } }, { name: 'at', type: { type: 'long', logicalType: 'timestamp-millis' } }] }),
);
if ('problems' in SCHEMA) throw new Error(JSON.stringify(SCHEMA.problems));
const SCHEMAS: SchemaSet = { dir: 'schemas', byEventType: new Map([['thing.happened', SCHEMA]]), problems: [] };

function event(overrides: Partial<OutboxEventInput> = {}): OutboxEventInput {
  return { eventId: 'e1', aggregateType: 'thing', aggregateId: 't1', eventType: 'thing.happened', payload: { id: 't1', lines: [{ amount_cents: 5 }], at: new Date(0) }, ...overrides };
}

async function failure(promise: Promise<unknown>): Promise<OutboxClientError> {
  const error = await promise.then(() => undefined, (caught: unknown) => caught);
  expect(error).toBeInstanceOf(OutboxClientError);
  return error as OutboxClientError;
}

describe('writeOutboxEvent', () => {
  it('checks the transaction with a released savepoint, then inserts one row with JSON payload and headers', async () => {
    const tx = new FakeTx();
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    await writeOutboxEvent(tx, event({ traceparent, headers: { tenant: 'acme' } }), { schemas: SCHEMAS, table: 'billing.outbox' });
    expect(tx.statements.map((s) => s.text.split(' (')[0])).toEqual(['SAVEPOINT outbox_relay_transaction_check', 'RELEASE SAVEPOINT outbox_relay_transaction_check', 'INSERT INTO "billing"."outbox"']);
    const params = tx.statements[2]!.params!;
    expect(params.slice(0, 4)).toEqual(['e1', 'thing', 't1', 'thing.happened']);
    expect(JSON.parse(params[4] as string)).toEqual({ id: 't1', lines: [{ amount_cents: 5 }], at: '1970-01-01T00:00:00.000Z' });
    expect(JSON.parse(params[5] as string)).toEqual({ tenant: 'acme', traceparent });
  });

  it('writes a table without an aggregate type (columns.aggregateType null, or OUTBOX_COLUMN_AGGREGATE_TYPE empty), refusing one given', async () => {
    const { aggregateType: _none, ...withoutType } = event();
    const tx = new FakeTx();
    await writeOutboxEvent(tx, withoutType, { columns: { aggregateType: null } });
    const insert = tx.statements[2]!;
    expect(insert.text).toBe('INSERT INTO "event_outbox" ("event_id", "aggregate_id", "event_type", "payload", "headers") VALUES ($1, $2, $3, $4, $5)');
    expect(insert.params!.slice(0, 3)).toEqual(['e1', 't1', 'thing.happened']);
    const given = await failure(writeOutboxEvent(new FakeTx(), event(), { columns: { aggregateType: null } }));
    expect(given.message).toMatch(/aggregateType is given, but the table has no aggregate type column/);

    process.env.OUTBOX_COLUMN_AGGREGATE_TYPE = '';
    try {
      const fromEnv = new FakeTx();
      await writeOutboxEvent(fromEnv, withoutType);
      expect(fromEnv.statements[2]!.text).toMatch(/^INSERT INTO "event_outbox" \("event_id", "aggregate_id",/);
    } finally {
      delete process.env.OUTBOX_COLUMN_AGGREGATE_TYPE;
    }
    // With the column (the default), it is required.
    expect((await failure(writeOutboxEvent(new FakeTx(), withoutType))).message).toMatch(/aggregateType is required/);
  });

  it('writes header names that are Object.prototype members as headers, __proto__ included', async () => {
    const tx = new FakeTx();
    const headers = JSON.parse('{"__proto__":"p","constructor":"c","toString":"t"}') as Record<string, string>;
    await writeOutboxEvent(tx, event({ headers }));
    expect(tx.statements[2]!.params![5]).toBe('{"__proto__":"p","constructor":"c","toString":"t"}');
  });

  it('refuses autocommit with OUTBOX_NOT_IN_TRANSACTION and inserts nothing', async () => {
    const tx = new FakeTx(true);
    const error = await failure(writeOutboxEvent(tx, event()));
    expect(error.code).toBe('OUTBOX_NOT_IN_TRANSACTION');
    expect(tx.statements.some((s) => s.text.startsWith('INSERT'))).toBe(false);
  });

  it('validates before any statement: payload misfits name their path', async () => {
    const tx = new FakeTx();
    const error = await failure(writeOutboxEvent(tx, event({ payload: { id: 't1', lines: [{ amount_cents: '12.5' }], at: 'yesterday' } }), { schemas: SCHEMAS }));
    expect(error.code).toBe('OUTBOX_PAYLOAD_MISMATCH');
    expect(error.message).toContain('lines[0].amount_cents: expected long, got "12.5"');
    expect(error.message).toContain('at: expected timestamp-millis');
    expect(error.details.path).toBe('lines[0].amount_cents');
    expect(tx.statements).toEqual([]);
  });

  it('refuses an event type without a schema, when schemas are configured', async () => {
    const error = await failure(writeOutboxEvent(new FakeTx(), event({ eventType: 'thing.unknown' }), { schemas: SCHEMAS }));
    expect(error.code).toBe('OUTBOX_NO_SCHEMA');
  });

  it.each([
    ['eventId', event({ eventId: '' })],
    ['aggregateId', event({ aggregateId: undefined as unknown as string })],
    ['payload', event({ payload: [] as unknown as Record<string, unknown> })],
    ['headers.event_id', event({ headers: { event_id: 'x' } })],
    ['headers.n', event({ headers: { n: 1 as unknown as string } })],
    ['traceparent', event({ traceparent: '00-abc-01' })],
  ])('refuses an invalid %s', async (field, bad) => {
    const tx = new FakeTx();
    const error = await failure(writeOutboxEvent(tx, bad));
    expect(error.code).toBe('OUTBOX_INVALID_EVENT');
    expect(error.details.field).toBe(field);
    expect(tx.statements).toEqual([]);
  });

  it('batches: one transaction check, validates all first, refuses an id twice in the batch', async () => {
    const tx = new FakeTx();
    await writeOutboxEvents(tx, [event({ eventId: 'a' }), event({ eventId: 'b' })]);
    expect(tx.statements.filter((s) => s.text.startsWith('SAVEPOINT'))).toHaveLength(1);
    expect(tx.statements.at(-1)!.params).toHaveLength(12);
    const again = new FakeTx();
    expect((await failure(writeOutboxEvents(again, [event({ eventId: 'a' }), event({ eventId: 'a' })]))).code).toBe('OUTBOX_DUPLICATE_EVENT');
    expect((await failure(writeOutboxEvents(again, [event({ eventId: 'c' }), event({ eventId: '' })]))).code).toBe('OUTBOX_INVALID_EVENT');
    expect(again.statements).toEqual([]);
  });

  it('maps a primary-key violation to OUTBOX_DUPLICATE_EVENT', async () => {
    const tx = { query: async (text: string) => { if (text.startsWith('INSERT')) throw Object.assign(new Error('duplicate key'), { code: '23505', detail: 'Key (event_id)=(e1) already exists.' }); return {}; } };
    const error = await failure(writeOutboxEvent(tx, event()));
    expect(error.code).toBe('OUTBOX_DUPLICATE_EVENT');
    expect(error.details.eventId).toBe('e1');
  });

  it('refuses a table name that is not an identifier', async () => {
    expect((await failure(writeOutboxEvent(new FakeTx(), event(), { table: 'outbox; DROP TABLE x' }))).code).toBe('CLIENT_CONFIG_INVALID');
  });
});

describe('deterministicEventId', () => {
  it('is RFC 9562 UUIDv5 (the DNS namespace test vector)', () => {
    expect(uuidV5('www.example.com', '6ba7b810-9dad-11d1-80b4-00c04fd430c8')).toBe('2ed6657d-e927-568b-95e1-2665a8aea6a2');
  });

  it('gives the same id for the same parts, different ids for different parts and namespaces', () => {
    const id = deterministicEventId(['invoice.paid', 'inv_42']);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(deterministicEventId(['invoice.paid', 'inv_42'])).toBe(id);
    expect(deterministicEventId(['invoice.paid', 'inv_43'])).not.toBe(id);
    expect(deterministicEventId(['a:b', 'c'])).not.toBe(deterministicEventId(['a', 'b:c']));
    expect(deterministicEventId(['invoice.paid', 'inv_42'], '6ba7b810-9dad-11d1-80b4-00c04fd430c8')).not.toBe(id);
    expect(() => deterministicEventId([])).toThrow(TypeError);
    expect(() => deterministicEventId(['x', ''])).toThrow(TypeError);
  });
});

describe('traceparentProblem', () => {
  it('accepts W3C traceparent and names what is wrong otherwise', () => {
    expect(traceparentProblem('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')).toBeUndefined();
    expect(traceparentProblem('00-00000000000000000000000000000000-00f067aa0ba902b7-01')).toMatch(/trace id/);
    expect(traceparentProblem('00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01')).toMatch(/parent id/);
    expect(traceparentProblem('ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')).toMatch(/ff/);
    expect(traceparentProblem('00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01')).toMatch(/expected/);
  });
});

// vitest: runs alone (it decodes every logical message in the database and expects only its own)
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deterministicEventId, loadOutboxSchemas, OutboxClientError, writeOutboxEvent, writeOutboxEvents, type OutboxEventInput, type SchemaSet } from '../../src/client/index.js';
import { MessageDecoder } from '../../src/decode/message-decoder.js';
import { PgoutputDecoder } from '../../src/source/pgoutput.js';
import { TestOutbox } from '../harness/outbox.js';

// The writer against real Postgres: the outbox row commits and rolls back with the caller's
// transaction, a retried business transaction conflicts, autocommit is refused, a misfit payload
// fails before the insert with its path.

const outbox = new TestOutbox();
let schemas: SchemaSet;

function invoicePaid(invoiceId: string, overrides: Record<string, unknown> = {}): OutboxEventInput {
  return {
    eventId: deterministicEventId(['invoice.paid', invoiceId]),
    aggregateType: 'invoice',
    aggregateId: invoiceId,
    eventType: 'invoice.paid',
    payload: { invoice_id: invoiceId, customer_id: 'cus_1', subscription_id: null, payment_id: 'pay_1', amount_cents: 1_250, currency: 'EUR', lines: [{ description: 'Pro', quantity: 1, amount_cents: 1_250 }], paid_at: new Date(), ...overrides },
  };
}

async function rowCount(eventId: string): Promise<number> {
  const { rows } = await outbox.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${outbox.table} WHERE event_id = $1`, [eventId]);
  return rows[0]!.n;
}

/** BEGIN on one client, `work`, then COMMIT — or ROLLBACK and rethrow. */
async function inTransaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await outbox.pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  } finally {
    client.release();
  }
}

async function caught(promise: Promise<unknown>): Promise<OutboxClientError> {
  const error = await promise.then(() => undefined, (failure: unknown) => failure);
  expect(error).toBeInstanceOf(OutboxClientError);
  return error as OutboxClientError;
}

beforeAll(async () => {
  await outbox.create();
  schemas = await loadOutboxSchemas('schemas');
});

afterAll(async () => {
  await outbox.destroy();
});

describe('writeOutboxEvent against Postgres', () => {
  const options = () => ({ table: `public.${outbox.table}`, schemas });

  it('commits the row with the transaction, with payload as JSON and trace context in headers', async () => {
    const event = { ...invoicePaid('inv_commit'), traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' };
    await inTransaction((tx) => writeOutboxEvent(tx, event, options()));
    const { rows } = await outbox.pool.query(`SELECT * FROM ${outbox.table} WHERE event_id = $1`, [event.eventId]);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ aggregate_type: 'invoice', aggregate_id: 'inv_commit', event_type: 'invoice.paid', headers: { traceparent: event.traceparent } });
    expect(rows[0].payload).toMatchObject({ invoice_id: 'inv_commit', amount_cents: 1_250, paid_at: (event.payload.paid_at as Date).toISOString() });
  });

  it('rollback leaves no outbox row', async () => {
    const event = invoicePaid('inv_rollback');
    await expect(
      inTransaction(async (tx) => {
        await writeOutboxEvent(tx, event, options());
        expect(await tx.query(`SELECT 1 FROM ${outbox.table} WHERE event_id = $1`, [event.eventId])).toHaveProperty('rowCount', 1);
        throw new Error('business rule failed after the event was written');
      }),
    ).rejects.toThrow(/business rule failed/);
    expect(await rowCount(event.eventId)).toBe(0);
  });

  it('a retried business transaction conflicts on the deterministic event_id: one row, the retry fails', async () => {
    const first = invoicePaid('inv_retry');
    const retry = invoicePaid('inv_retry', { payment_id: 'pay_retry' });
    expect(retry.eventId).toBe(first.eventId);
    await inTransaction((tx) => writeOutboxEvent(tx, first, options()));
    const error = await caught(inTransaction((tx) => writeOutboxEvent(tx, retry, options())));
    expect(error.code).toBe('OUTBOX_DUPLICATE_EVENT');
    expect(error.details.eventId).toBe(first.eventId);
    expect(await rowCount(first.eventId)).toBe(1);
    const { rows } = await outbox.pool.query(`SELECT payload->>'payment_id' AS payment FROM ${outbox.table} WHERE event_id = $1`, [first.eventId]);
    expect(rows[0].payment).toBe('pay_1');
  });

  it('outside a transaction it throws OUTBOX_NOT_IN_TRANSACTION and writes nothing: a pool, a client without BEGIN', async () => {
    const viaPool = invoicePaid('inv_pool');
    expect((await caught(writeOutboxEvent(outbox.pool, viaPool, options()))).code).toBe('OUTBOX_NOT_IN_TRANSACTION');
    expect(await rowCount(viaPool.eventId)).toBe(0);

    const client = new pg.Client({ connectionString: outbox.databaseUrl });
    await client.connect();
    try {
      const viaClient = invoicePaid('inv_client');
      const error = await caught(writeOutboxEvent(client, viaClient, options()));
      expect(error.code).toBe('OUTBOX_NOT_IN_TRANSACTION');
      expect(error.message).toMatch(/inside the transaction/);
      expect(await rowCount(viaClient.eventId)).toBe(0);
      // ... and after COMMIT the client is back in autocommit: refused again.
      await client.query('BEGIN');
      await writeOutboxEvent(client, invoicePaid('inv_client_in_tx'), options());
      await client.query('COMMIT');
      expect((await caught(writeOutboxEvent(client, invoicePaid('inv_client_after'), options()))).code).toBe('OUTBOX_NOT_IN_TRANSACTION');
      expect(await rowCount(deterministicEventId(['invoice.paid', 'inv_client_in_tx']))).toBe(1);
      expect(await rowCount(deterministicEventId(['invoice.paid', 'inv_client_after']))).toBe(0);
    } finally {
      await client.end();
    }
  });

  it('accepts the event as the first statement after BEGIN, and inside the caller\'s own savepoint', async () => {
    const first = invoicePaid('inv_first_statement');
    const nested = invoicePaid('inv_nested');
    await inTransaction(async (tx) => {
      await writeOutboxEvent(tx, first, options());
      await tx.query('SAVEPOINT caller_savepoint');
      await writeOutboxEvent(tx, nested, options());
      await tx.query('RELEASE SAVEPOINT caller_savepoint');
    });
    expect(await rowCount(first.eventId)).toBe(1);
    expect(await rowCount(nested.eventId)).toBe(1);
  });

  it('why not compare timestamps: BEGIN and a statement in one message share statement_timestamp()', async () => {
    // The guess `transaction_timestamp() <> statement_timestamp()` says "not in a transaction" here,
    // although one is open; SAVEPOINT (what the writer uses) is decided by Postgres' own state.
    const client = await outbox.pool.connect();
    try {
      const results = (await client.query('BEGIN; SELECT transaction_timestamp() <> statement_timestamp() AS looks_in_tx')) as unknown as pg.QueryResult[];
      expect(results[1]!.rows[0].looks_in_tx).toBe(false);
      await writeOutboxEvent(client, invoicePaid('inv_same_message'), options());
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
  });

  it('an invalid payload throws naming the path, before the insert; the caller\'s transaction rolls back', async () => {
    const bad = invoicePaid('inv_bad', { lines: [{ description: 'Pro', quantity: 1, amount_cents: '12.50' }] });
    const error = await caught(
      inTransaction(async (tx) => {
        await tx.query(`INSERT INTO ${outbox.table} (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES ('domain_change_stand_in', 'x', 'x', 'x', '{}')`);
        await writeOutboxEvent(tx, bad, options());
      }),
    );
    expect(error.code).toBe('OUTBOX_PAYLOAD_MISMATCH');
    expect(error.message).toContain('lines[0].amount_cents: expected long, got "12.50"');
    expect(error.message).toContain('schemas/billing/invoice.paid.avsc');
    expect(error.details.path).toBe('lines[0].amount_cents');
    expect(await rowCount(bad.eventId)).toBe(0);
    expect(await rowCount('domain_change_stand_in')).toBe(0);

    const missing = { ...invoicePaid('inv_missing'), payload: { invoice_id: 'inv_missing' } };
    const missingError = await caught(inTransaction((tx) => writeOutboxEvent(tx, missing, options())));
    expect(missingError.message).toMatch(/customer_id: expected string, got nothing \(field missing\)/);
    const unknown = { ...invoicePaid('inv_unknown'), eventType: 'invoice.lost' };
    expect((await caught(inTransaction((tx) => writeOutboxEvent(tx, unknown, options())))).code).toBe('OUTBOX_NO_SCHEMA');
  });

  it('the batch form writes all rows in one go, or none when one is invalid', async () => {
    const batch = ['inv_b1', 'inv_b2', 'inv_b3'].map((id) => invoicePaid(id));
    await inTransaction((tx) => writeOutboxEvents(tx, batch, options()));
    for (const event of batch) expect(await rowCount(event.eventId)).toBe(1);
    const withBad = [invoicePaid('inv_b4'), invoicePaid('inv_b5', { currency: 42 })];
    const error = await caught(inTransaction((tx) => writeOutboxEvents(tx, withBad, options())));
    expect(error.message).toContain('currency: expected string, got 42');
    expect(await rowCount(withBad[0]!.eventId)).toBe(0);
  });
});

describe('writeOutboxEvents as messages (a message outbox)', () => {
  it('emits each event as a transactional message the relay decodes, in order, only if the transaction commits; refuses autocommit', async () => {
    const slot = `${outbox.slot}_messages`;
    await outbox.pool.query("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", [slot]);
    try {
      const events = [invoicePaid('inv_m1'), { ...invoicePaid('inv_m2'), traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' }];
      await inTransaction((client) => writeOutboxEvents(client, events, { schemas, messagePrefix: 'outbox' }));
      // Rolled back: never decoded.
      await inTransaction(async (client) => {
        await writeOutboxEvents(client, [invoicePaid('inv_rolled_back')], { messagePrefix: 'outbox' });
        throw new Error('roll back');
      }).catch(() => undefined);
      expect((await caught(writeOutboxEvents(outbox.pool, [invoicePaid('inv_auto')], { messagePrefix: 'outbox' }))).code).toBe('OUTBOX_NOT_IN_TRANSACTION');

      const { rows } = await outbox.pool.query<{ data: Buffer }>("SELECT data FROM pg_logical_slot_get_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2, 'messages', 'true')", [slot, outbox.publication]);
      const header = Buffer.alloc(25);
      header[0] = 0x77;
      const decoder = new PgoutputDecoder();
      const messages = rows.map((row) => decoder.decode(Buffer.concat([header, row.data]))).filter((message) => message?.kind === 'message');
      const decoded = messages.map((message) => (message?.kind === 'message' ? { transactional: message.transactional, prefix: message.prefix, event: new MessageDecoder().decode(message.content) } : null));
      expect(decoded.map((each) => [each?.transactional, each?.prefix, each?.event.eventId, each?.event.aggregateId])).toEqual([
        [true, 'outbox', events[0]!.eventId, 'inv_m1'],
        [true, 'outbox', events[1]!.eventId, 'inv_m2'],
      ]);
      expect(decoded[1]!.event.headers).toEqual({ traceparent: events[1]!.traceparent });
      expect(JSON.parse((decoded[0]!.event.payload as { text: string }).text)).toMatchObject({ invoice_id: 'inv_m1', amount_cents: 1_250 });
    } finally {
      await outbox.pool.query('SELECT pg_drop_replication_slot($1)', [slot]);
    }
  });
});

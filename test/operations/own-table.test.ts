import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOutboxWriter } from '../../src/client/index.js';
import { cli } from '../harness/cli.js';
import { createTopics, TopicReader } from '../harness/kafka.js';
import { TestOutbox } from '../harness/outbox.js';
import { RelayProcess } from '../harness/relay-process.js';

/**
 * A team's own outbox table: other column names (OUTBOX_COLUMN_*), a text payload column, a
 * bigint aggregate id. The writer reads the same variables as the relay, so one environment
 * configures both; the event arrives as written.
 */
describe('an outbox table of the user\'s own, mapped with OUTBOX_COLUMN_*', () => {
  const outbox = new TestOutbox();
  const columns = {
    OUTBOX_COLUMN_EVENT_ID: 'id',
    OUTBOX_COLUMN_AGGREGATE_TYPE: 'entity_kind',
    OUTBOX_COLUMN_AGGREGATE_ID: 'entity_id',
    OUTBOX_COLUMN_EVENT_TYPE: 'kind',
    OUTBOX_COLUMN_PAYLOAD: 'body',
    OUTBOX_COLUMN_HEADERS: 'meta',
    OUTBOX_COLUMN_CREATED_AT: 'occurred_at',
  };
  const saved: Record<string, string | undefined> = {};

  beforeAll(async () => {
    await outbox.pool.query(`
      CREATE TABLE ${outbox.table} (
        id uuid PRIMARY KEY, entity_kind text NOT NULL, entity_id bigint NOT NULL, kind text NOT NULL,
        body text NOT NULL, meta jsonb, occurred_at timestamptz NOT NULL DEFAULT now()
      )`);
    await createTopics([outbox.topic('invoice')]);
    // The application's process has the relay's variables: the writer picks them up.
    for (const [name, value] of Object.entries({ ...columns, OUTBOX_TABLE: `public.${outbox.table}` })) {
      saved[name] = process.env[name];
      process.env[name] = value;
    }
  });
  afterAll(async () => {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
    await outbox.destroy();
  });

  it('the writer fills the mapped columns, and the relay publishes them: key, headers and payload bytes as written', async () => {
    const env = outbox.relayEnv(columns);
    const setup = await cli(['setup'], env);
    expect(setup.code, setup.stderr).toBe(0);

    const reader = await new TopicReader().start([outbox.topic('invoice')]);
    const relay = new RelayProcess(env).start();
    try {
      await relay.waitActive();
      const eventId = randomUUID();
      const client = await outbox.pool.connect();
      try {
        await client.query('BEGIN');
        await createOutboxWriter().write(client, {
          eventId,
          aggregateType: 'invoice',
          aggregateId: '4200000001',
          eventType: 'invoice.paid',
          payload: { invoice_id: 'inv_own', amount_cents: 1250 },
          headers: { tenant: 'acme' },
        });
        await client.query('COMMIT');
      } finally {
        client.release();
      }
      const { rows } = await outbox.pool.query<{ body: string; occurred_at: Date }>(`SELECT body, occurred_at FROM ${outbox.table} WHERE id = $1`, [eventId]);
      expect(rows).toHaveLength(1);

      await reader.until('the event', (records) => records.some((r) => r.headers.event_id === eventId), 30_000, () => relay.tail());
      const record = reader.records.find((r) => r.headers.event_id === eventId);
      expect(record!.key).toBe('4200000001');
      expect(record!.value?.toString('utf8')).toBe(rows[0]!.body);
      expect(record!.headers).toMatchObject({ event_id: eventId, event_type: 'invoice.paid', aggregate_type: 'invoice', tenant: 'acme', created_at: rows[0]!.occurred_at.toISOString() });
    } finally {
      await relay.stop();
      await reader.stop();
    }
  });

  it('a column name that is not an identifier is refused by the writer before any statement', () => {
    expect(() => createOutboxWriter({ columns: { payload: 'body; DROP TABLE x' } })).toThrow(/column for payload "body; DROP TABLE x": expected a column name/);
  });
});

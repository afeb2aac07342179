import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { describe, expect, inject, it } from 'vitest';
import { createTopics, kafkaClient, TopicReader } from './harness/kafka.js';

/**
 * The services are real and usable: each test talks to one the way the relay will. They fail,
 * naming the service, when it is down.
 */
describe('services', () => {
  it('Postgres: a logical slot on a pgoutput publication receives an insert', async () => {
    const client = new pg.Client({ connectionString: inject('services').databaseUrl });
    await client.connect();
    const name = `smoke_${randomUUID().replaceAll('-', '').slice(0, 8)}`;
    try {
      expect((await client.query<{ wal_level: string }>('SHOW wal_level')).rows[0]!.wal_level).toBe('logical');
      await client.query(`CREATE TABLE ${name} (id int primary key, note text)`);
      await client.query(`CREATE PUBLICATION ${name} FOR TABLE ${name} WITH (publish = 'insert')`);
      await client.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [name]);
      await client.query(`INSERT INTO ${name} VALUES (1, 'hello')`);
      const { rows } = await client.query<{ data: Buffer }>(
        `SELECT data FROM pg_logical_slot_get_binary_changes($1::name, NULL, NULL, 'proto_version', '1', 'publication_names', $1::text)`,
        [name],
      );
      const tags = rows.map((row) => String.fromCharCode(row.data[0]!));
      expect(tags).toEqual(['B', 'R', 'I', 'C']);
      expect(rows[2]!.data.includes(Buffer.from('hello'))).toBe(true);
    } finally {
      await client.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1', [name]).catch(() => undefined);
      await client.query(`DROP PUBLICATION IF EXISTS ${name}`).catch(() => undefined);
      await client.query(`DROP TABLE IF EXISTS ${name}`).catch(() => undefined);
      await client.end();
    }
  });

  it('Kafka: a message produced with acks=-1 is consumed back', async () => {
    const topic = `smoke-${randomUUID()}`;
    await createTopics([topic], 1);
    const producer = kafkaClient().producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    const reader = await new TopicReader().start([topic]);
    try {
      await producer.send({ topic, acks: -1, messages: [{ key: 'k', value: 'hello', headers: { event_id: 'e1' } }] });
      await reader.until('the message', (records) => records.length >= 1, 30_000);
      expect(reader.records[0]).toMatchObject({ topic, key: 'k', headers: { event_id: 'e1' } });
      expect(reader.records[0]!.value?.toString('utf8')).toBe('hello');
    } finally {
      await producer.disconnect();
      await reader.stop();
    }
  });

  it('schema registry: an Avro schema registered comes back by id', async () => {
    const registry = inject('services').schemaRegistryUrl;
    const subject = `smoke-${randomUUID()}-value`;
    const schema = JSON.stringify({ type: 'record', name: 'Smoke', namespace: 'com.example.smoke', fields: [{ name: 'amount_cents', type: 'long' }] });
    const headers = { 'content-type': 'application/vnd.schemaregistry.v1+json' };
    const registered = await fetch(`${registry}/subjects/${subject}/versions`, { method: 'POST', headers, body: JSON.stringify({ schema }) });
    expect(registered.status, await registered.clone().text()).toBe(200);
    const { id } = (await registered.json()) as { id: number };
    const fetched = (await (await fetch(`${registry}/schemas/ids/${id}`)).json()) as { schema: string };
    expect(JSON.parse(fetched.schema)).toEqual(JSON.parse(schema));
  });
});

import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { useTestOutbox } from './harness/fixture.js';
import { testKafkaClients } from './harness/kafka-clients.js';
import { RelayProcess } from './harness/relay-process.js';

/**
 * Nothing arrives changed: a payload goes to Kafka as the bytes it was stored as, whatever the
 * column's type, also when the type changes while the relay streams; header names arrive
 * whatever they are.
 */
describe('payloads and headers arrive as stored', () => {
  const { outbox, reader } = useTestOutbox({ read: true });

  async function insert(payload: string | Buffer, cast: string, headers: string | null = null): Promise<string> {
    const eventId = randomUUID();
    await outbox.pool.query(
      `INSERT INTO ${outbox.table} (event_id, aggregate_type, aggregate_id, event_type, payload, headers) VALUES ($1, 'invoice', 'inv_types', 'invoice.paid', $2::${cast}, $3::jsonb)`,
      [eventId, payload, headers],
    );
    return eventId;
  }

  async function published(eventId: string): Promise<{ value: Buffer; headers: Record<string, string> }> {
    await reader.until(`event ${eventId}`, (records) => records.some((record) => record.headers.event_id === eventId));
    const record = reader.records.find((candidate) => candidate.headers.event_id === eventId)!;
    return { value: record.value!, headers: record.headers };
  }

  it('publishes json, text, varchar and bytea payloads byte for byte, across column type changes mid-stream', async () => {
    const relay = new RelayProcess(outbox.relayEnv()).start();
    try {
      await relay.waitActive();
      const json = '{"invoice_id": "inv_1", "amount_minor": 1250}';
      const first = await insert(json, 'jsonb');
      expect((await published(first)).value.toString('utf8')).toBe(json);

      await outbox.pool.query(`ALTER TABLE ${outbox.table} ALTER COLUMN payload TYPE text`);
      const text = '{"invoice_id":"inv_1"}';
      const asText = await insert(text, 'text');
      expect((await published(asText)).value.toString('utf8')).toBe(text);

      await outbox.pool.query(`ALTER TABLE ${outbox.table} ALTER COLUMN payload TYPE varchar(200)`);
      const asVarchar = await insert('plain text, not JSON: ünïcödé €', 'varchar');
      expect((await published(asVarchar)).value.toString('utf8')).toBe('plain text, not JSON: ünïcödé €');

      await outbox.pool.query(`ALTER TABLE ${outbox.table} ALTER COLUMN payload TYPE bytea USING convert_to(payload, 'UTF8')`);
      const bytes = Buffer.from([0x00, 0xff, 0x7b, 0x22, 0x80, 0x0a, 0xc3]);
      const asBytea = await insert(bytes, 'bytea');
      expect((await published(asBytea)).value.equals(bytes)).toBe(true);
    } finally {
      await relay.stop();
    }
  });

  it('sends created_at as ISO 8601 UTC whatever DateStyle and TimeZone the database sets', async () => {
    const setDatabase = (setting: string, value: string | null) =>
      outbox.pool.query(value === null ? `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I RESET ${setting}', current_database()); END $$` : `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET ${setting} = %L', current_database(), '${value}'); END $$`);
    await setDatabase('DateStyle', 'SQL, DMY');
    await setDatabase('TimeZone', 'Asia/Kolkata');
    await setDatabase('IntervalStyle', 'sql_standard');
    const relay = new RelayProcess(outbox.relayEnv()).start();
    try {
      await relay.waitActive();
      const eventId = randomUUID();
      await outbox.pool.query(
        `INSERT INTO ${outbox.table} (event_id, aggregate_type, aggregate_id, event_type, payload, created_at) VALUES ($1, 'invoice', 'inv_dates', 'invoice.paid', '{}', '2026-11-30 10:00:00.123456+00')`,
        [eventId],
      );
      expect((await published(eventId)).headers.created_at).toBe('2026-11-30T10:00:00.123Z');
    } finally {
      await relay.stop();
      for (const setting of ['DateStyle', 'TimeZone', 'IntervalStyle']) await setDatabase(setting, null);
    }
  });

  // On each client: librdkafka's headers go through the patched binding's header list (scripts/kafka-javascript.patch).
  it.each(testKafkaClients())('round-trips generated rows: random header names and values, Unicode payloads, created_at at any offset (%s)', async (client) => {
    // Deterministic "random" rows: a failure names the seed and the row, and repeats.
    let seed = 20261130;
    const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
    const text = () => Array.from({ length: Math.floor(random() * 12) }, () => pick(['a', 'Z', '0', ' ', '"', '\\', 'é', 'ß', '€', '😀', '\u0001', '\t', 'ü', '{', '}', ':'])).join('');
    const names = ['constructor', 'toString', '__proto__', 'valueOf', 'hasOwnProperty', 'traceparent', 'x-ü', '', 'a b', 'event_id_x'];
    const rows = Array.from({ length: 40 }, (_, i) => {
      const headers = Object.fromEntries(Array.from({ length: Math.floor(random() * 4) }, () => [pick(names) + (random() < 0.5 ? '' : text()), text()]));
      const payload = JSON.stringify({ i, note: text(), amount: Math.floor(random() * 1e9), nested: { k: text() } });
      const offsetHours = pick([0, 5.5, -3.5, 14, -12]);
      const sign = offsetHours < 0 ? '-' : '+';
      const offset = `${sign}${String(Math.floor(Math.abs(offsetHours))).padStart(2, '0')}:${Math.abs(offsetHours) % 1 ? '30' : '00'}`;
      return { eventId: `gen_${client}_${seed}_${i}`, headers, payload, createdAt: `2026-${String(1 + (i % 12)).padStart(2, '0')}-15 08:30:${String(i % 60).padStart(2, '0')}.${String(i * 7).padStart(3, '0')}${offset}` };
    });
    await outbox.pool.query(`ALTER TABLE ${outbox.table} ALTER COLUMN payload TYPE jsonb USING '{}'::jsonb`);
    const relay = new RelayProcess(outbox.relayEnv({ OUTBOX_KAFKA_CLIENT: client })).start();
    try {
      await relay.waitActive();
      for (const row of rows) {
        await outbox.pool.query(
          `INSERT INTO ${outbox.table} (event_id, aggregate_type, aggregate_id, event_type, payload, headers, created_at) VALUES ($1, 'invoice', 'inv_gen', 'invoice.paid', $2::jsonb, $3::jsonb, $4::timestamptz)`,
          [row.eventId, row.payload, JSON.stringify(row.headers), row.createdAt],
        );
      }
      for (const row of rows) {
        const { value, headers } = await published(row.eventId);
        const stored = (await outbox.pool.query<{ payload: string }>(`SELECT payload::text AS payload FROM ${outbox.table} WHERE event_id = $1`, [row.eventId])).rows[0]!.payload;
        expect(value.toString('utf8'), `row ${row.eventId}`).toBe(stored);
        expect(headers.created_at, `row ${row.eventId}`).toBe(new Date(row.createdAt.replace(' ', 'T')).toISOString());
        for (const [name, headerValue] of Object.entries(row.headers)) {
          // The relay's own header names win over a row's; every other name arrives as stored.
          if (['event_id', 'event_type', 'aggregate_type', 'created_at', 'outbox_commit_lsn', 'outbox_source'].includes(name)) continue;
          expect(headers[name], `row ${row.eventId}, header ${JSON.stringify(name)}`).toBe(headerValue);
        }
      }
    } finally {
      await relay.stop();
    }
  });

  it.each(testKafkaClients())("keeps header names that are Object.prototype's properties, __proto__ included, and a long value (%s)", async (client) => {
    const relay = new RelayProcess(outbox.relayEnv({ OUTBOX_KAFKA_CLIENT: client })).start();
    try {
      await relay.waitActive();
      // Longer than the 1 KiB a header value is converted in on the stack (Nan::Utf8String).
      const long = 'ü€😀-'.repeat(300);
      const headers = JSON.stringify({ constructor: 'c', toString: 't', valueOf: 'v', hasOwnProperty: 'h', ['__proto__']: 'p', __proto__x: 'x', long });
      const eventId = await insert('{}', 'jsonb', headers);
      const received = (await published(eventId)).headers;
      expect(received).toMatchObject({ constructor: 'c', toString: 't', valueOf: 'v', hasOwnProperty: 'h', __proto__x: 'x', long });
      expect(Object.hasOwn(received, '__proto__') && received.__proto__).toBe('p');
    } finally {
      await relay.stop();
    }
  });
});

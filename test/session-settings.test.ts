import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { cli } from './harness/cli.js';
import { useTestOutbox } from './harness/fixture.js';
import { RelayProcess } from './harness/relay-process.js';

/**
 * Nothing arrives changed whatever DATABASE_URL asks of the session: `options=-c ...` setting
 * DateStyle, TimeZone, IntervalStyle, extra_float_digits or bytea_output changes the text
 * Postgres sends for each column (client_encoding is pg's own, always UTF8). The relay's own values win on every
 * connection it makes (the stream and `replay` alike), and it says so at start.
 */
describe('session settings in DATABASE_URL options', () => {
  const { outbox, reader } = useTestOutbox({ read: true });
  const operatorOptions = '-c DateStyle=German -c TimeZone=Asia/Kolkata -c IntervalStyle=sql_standard -c extra_float_digits=-15 -c bytea_output=escape -c client_encoding=LATIN1 -c search_path=pg_catalog,public';

  function env(): Record<string, string> {
    const base = outbox.relayEnv();
    const url = new URL(base.DATABASE_URL!);
    url.searchParams.set('options', operatorOptions);
    return { ...base, DATABASE_URL: url.toString() };
  }

  async function published(eventId: string, count = 1): Promise<{ value: Buffer; headers: Record<string, string> }[]> {
    await reader.until(`event ${eventId} x${count}`, (records) => records.filter((record) => record.headers.event_id === eventId).length >= count);
    return reader.records.filter((record) => record.headers.event_id === eventId).map((record) => ({ value: record.value!, headers: record.headers }));
  }

  it('streams and replays created_at, json and bytea payloads exactly as stored; the relay says which settings it fixed', async () => {
    const relay = new RelayProcess(env()).start();
    const json = '{"customer": "Jürgen Müller", "amount_minor": 1250.5}';
    const jsonId = randomUUID();
    const bytesId = randomUUID();
    const bytes = Buffer.from([0x00, 0xff, 0x5c, 0x27, 0xfc, 0x0a]);
    let stored = '';
    try {
      await relay.waitActive();
      await outbox.pool.query(
        `INSERT INTO ${outbox.table} (event_id, aggregate_type, aggregate_id, event_type, payload, created_at) VALUES ($1, 'invoice', 'inv_s', 'invoice.paid', $2::jsonb, '2026-11-30 10:00:00.123456+00')`,
        [jsonId, json],
      );
      const [streamed] = await published(jsonId);
      expect(streamed!.headers.created_at).toBe('2026-11-30T10:00:00.123Z');
      stored = (await outbox.pool.query<{ payload: string }>(`SELECT payload::text AS payload FROM ${outbox.table} WHERE event_id = $1`, [jsonId])).rows[0]!.payload;
      expect(streamed!.value.toString('utf8')).toBe(stored);
      expect(stored).toContain('Jürgen Müller');

      await outbox.pool.query(`ALTER TABLE ${outbox.table} ALTER COLUMN payload TYPE bytea USING convert_to(payload::text, 'UTF8')`);
      await outbox.pool.query(`INSERT INTO ${outbox.table} (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'invoice', 'inv_s', 'invoice.paid', $2)`, [bytesId, bytes]);
      expect((await published(bytesId))[0]!.value.equals(bytes)).toBe(true);
    } finally {
      await relay.stop();
    }
    expect(relay.logs.find((line) => /DATABASE_URL/.test(line.msg))?.msg).toMatch(/DATABASE_URL's options set DateStyle, TimeZone, IntervalStyle, extra_float_digits, bytea_output: the relay's connections use its own \(DateStyle=ISO, MDY, TimeZone=UTC, IntervalStyle=postgres, extra_float_digits=3, bytea_output=hex\)/);

    const replayed = await cli(['replay', '--event-id', `${jsonId},${bytesId}`], env());
    expect(replayed.code, replayed.stderr).toBe(0);
    const [, again] = await published(jsonId, 2);
    expect(again!.headers.created_at).toBe('2026-11-30T10:00:00.123Z');
    // The json row's payload is bytea by now: the jsonb text it was converted from.
    expect(again!.value.toString('utf8')).toBe(stored);
    expect((await published(bytesId, 2))[1]!.value.equals(bytes)).toBe(true);
  });
});

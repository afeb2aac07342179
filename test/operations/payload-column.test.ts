import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { cli } from '../harness/cli.js';
import { useTestOutbox } from '../harness/fixture.js';
import { TestOutbox } from '../harness/outbox.js';
import { RelayProcess } from '../harness/relay-process.js';

/**
 * The payload column's type is checked at start: `setup` and `run` say what they found and how
 * it is published, and refuse, naming the column, its type and the accepted types, a type the
 * relay could only publish re-encoded. A type changed while the relay streams is still a dead
 * letter per row.
 */
describe('payload column type at start', () => {
  const { outbox, reader } = useTestOutbox({ read: true, deadLetters: true });
  const ACCEPTED = /the relay publishes json, jsonb, text, varchar or bytea payloads as stored and would have to re-encode this one/;

  async function slotExists(slot: string): Promise<boolean> {
    return (await outbox.pool.query('SELECT 1 FROM pg_replication_slots WHERE slot_name = $1', [slot])).rows.length > 0;
  }

  it('`setup` says what type it found and how it is published', async () => {
    const result = await cli(['setup'], outbox.relayEnv());
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain(`payload column "payload" is jsonb: published as Postgres's JSON text (with OUTBOX_FORMAT=avro: its JSON encoded with the event type's Avro schema)\n`);
  });

  it('`run` logs the type at info, for the format it runs with', async () => {
    await outbox.pool.query(`ALTER TABLE ${outbox.table} ALTER COLUMN payload TYPE varchar(200)`);
    try {
      const relay = new RelayProcess(outbox.relayEnv()).start();
      try {
        await relay.waitActive();
        const line = relay.logs.find((each) => each.msg.startsWith('payload column'));
        expect(line).toMatchObject({ level: 30, msg: 'payload column "payload" is character varying(200): published as its UTF-8 text' });
      } finally {
        await relay.stop();
      }
    } finally {
      await outbox.pool.query(`ALTER TABLE ${outbox.table} ALTER COLUMN payload TYPE jsonb USING payload::jsonb`);
    }
  });

  it('`run` and `setup` refuse another type (a domain too) or a missing column, naming it, before streaming or creating a slot', async () => {
    const other = new TestOutbox();
    const domain = `payload_${other.id}`;
    try {
      await other.create();
      await other.pool.query(`ALTER TABLE ${other.table} ALTER COLUMN payload TYPE integer USING 0`);
      const run = await cli(['run'], other.relayEnv());
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(new RegExp(`\\[SETUP_TABLE\\]: payload column "payload" of public\\.${other.table} is integer: ${ACCEPTED.source}`));
      expect(run.stdout).not.toMatch(/"msg":"active:/);

      await other.pool.query(`CREATE DOMAIN ${domain} AS jsonb`);
      await other.pool.query(`ALTER TABLE ${other.table} ALTER COLUMN payload TYPE ${domain} USING '{}'`);
      const freshSlot = `${other.slot}_new`;
      const setup = await cli(['setup'], other.relayEnv({ OUTBOX_SLOT: freshSlot }));
      expect(setup.code).toBe(1);
      expect(setup.stderr).toMatch(new RegExp(`\\[SETUP_TABLE\\]: payload column "payload" of public\\.${other.table} is ${domain} \\(a domain over jsonb\\): ${ACCEPTED.source}`));
      expect(await slotExists(freshSlot)).toBe(false);

      const missing = await cli(['run'], other.relayEnv({ OUTBOX_COLUMN_PAYLOAD: 'body' }));
      expect(missing.code).toBe(1);
      expect(missing.stderr).toMatch(new RegExp(`\\[SETUP_TABLE\\]: outbox table public\\.${other.table} has no payload column "body" \\(OUTBOX_COLUMN_PAYLOAD\\)`));
    } finally {
      await other.destroy();
      await outbox.pool.query(`DROP DOMAIN IF EXISTS ${domain}`);
    }
  });

  it('a type changed while the relay streams still makes each row a dead letter naming it, and the stream goes on', async () => {
    const relay = new RelayProcess(outbox.relayEnv()).start();
    try {
      await relay.waitActive();
      await outbox.pool.query(`ALTER TABLE ${outbox.table} ALTER COLUMN payload TYPE integer USING 0`);
      const poison = randomUUID();
      await outbox.pool.query(`INSERT INTO ${outbox.table} (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'invoice', 'inv_t', 'invoice.paid', 7)`, [poison]);
      await outbox.pool.query(`ALTER TABLE ${outbox.table} ALTER COLUMN payload TYPE jsonb USING to_jsonb(payload)`);
      const after = randomUUID();
      await outbox.pool.query(`INSERT INTO ${outbox.table} (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'invoice', 'inv_t', 'invoice.paid', '{}')`, [after]);
      await reader.until('the dead letter and the event after it', (records) => [poison, after].every((id) => records.some((record) => record.headers.event_id === id)), 60_000, () => relay.tail());
      const deadLetter = reader.records.find((record) => record.headers.event_id === poison)!;
      expect(deadLetter.topic).toBe(outbox.deadLetterTopic);
      expect(deadLetter.headers.dead_letter_code).toBe('DECODE_BAD_VALUE');
      expect(deadLetter.headers.dead_letter_reason).toMatch(/the payload column holds a number/);
      expect(reader.records.find((record) => record.headers.event_id === after)!.topic).toBe(outbox.topic('invoice'));
    } finally {
      await relay.stop();
    }
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli } from '../harness/cli.js';
import { useTestOutbox } from '../harness/fixture.js';
import { billingEvent } from '../harness/outbox.js';
import { eventually, RelayProcess } from '../harness/relay-process.js';

/**
 * A slot invalidated by max_slot_wal_keep_size cannot be streamed again. The relay must stop and
 * say so, with Postgres's reason and how to recover, instead of retrying forever at warn level.
 */
describe('a lost replication slot', () => {
  const { outbox } = useTestOutbox();
  const filler = `wal_filler_${outbox.id}`;

  beforeAll(async () => {
    await outbox.pool.query(`ALTER SYSTEM SET max_slot_wal_keep_size = '32MB'`);
    await outbox.pool.query('SELECT pg_reload_conf()');
  });
  afterAll(async () => {
    await outbox.pool.query('ALTER SYSTEM RESET max_slot_wal_keep_size');
    await outbox.pool.query('SELECT pg_reload_conf()');
    await outbox.pool.query(`DROP TABLE IF EXISTS ${filler}`);
  });

  it('stops the relay with SOURCE_SLOT_LOST, the reason and the way to recover', { timeout: 120_000 }, async () => {
    await outbox.insert([billingEvent('inv_lost', 1)]);
    // WAL well past max_slot_wal_keep_size while no relay reads: the checkpoint invalidates the slot.
    await outbox.pool.query(`CREATE TABLE ${filler} (x text)`);
    for (let round = 0; round < 3; round += 1) {
      await outbox.pool.query(`INSERT INTO ${filler} SELECT repeat('x', 1000) FROM generate_series(1, 60000)`);
      await outbox.pool.query('SELECT pg_switch_wal()');
      await outbox.pool.query('CHECKPOINT');
    }
    await eventually('the slot to be lost', async () => {
      const { rows } = await outbox.pool.query<{ wal_status: string }>('SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1', [outbox.slot]);
      return rows[0]?.wal_status === 'lost' ? true : undefined;
    }, 30_000);

    const status = await cli(['status'], outbox.relayEnv());
    expect(status.stdout).toMatch(/safe wal size +none: the slot is lost/);

    const relay = new RelayProcess(outbox.relayEnv()).start();
    expect(await relay.waitExit(30_000)).toBe(1);
    const fatal = relay.logs.find((line) => line.level === 60);
    expect(fatal, relay.tail()).toMatchObject({ code: 'SOURCE_SLOT_LOST' });
    expect(String(fatal!.err)).toMatch(/replication slot ".*" is lost: .*max_slot_wal_keep_size.*outbox-relay drop-slot --yes.*outbox-relay replay --since/);
    expect(relay.logs.filter((line) => /stream interrupted/.test(line.msg))).toEqual([]);
  });
});

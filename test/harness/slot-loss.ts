import { afterAll, beforeAll } from 'vitest';
import type { TestOutbox } from './outbox.js';

/** What these helpers use of an outbox under test: its pool, and the id its own tables are named by. */
type OutboxDatabase = Pick<TestOutbox, 'pool' | 'id'>;
import { eventually } from './relay-process.js';

/**
 * max_slot_wal_keep_size small (32 MB) for the file's tests, reset after: a slot nobody reads
 * can then be invalidated in seconds by `invalidateSlot`.
 */
export function useSmallWalKeepSize(outbox: OutboxDatabase): void {
  beforeAll(async () => {
    await outbox.pool.query(`ALTER SYSTEM SET max_slot_wal_keep_size = '32MB'`);
    await outbox.pool.query('SELECT pg_reload_conf()');
  });
  afterAll(async () => {
    await outbox.pool.query('ALTER SYSTEM RESET max_slot_wal_keep_size');
    await outbox.pool.query('SELECT pg_reload_conf()');
    await outbox.pool.query(`DROP TABLE IF EXISTS ${filler(outbox)}`);
  });
}

/** WAL well past max_slot_wal_keep_size while no relay reads: the checkpoint invalidates the slot (wal_status lost). */
export async function invalidateSlot(outbox: OutboxDatabase & { readonly slot: string }): Promise<void> {
  await outbox.pool.query(`CREATE TABLE IF NOT EXISTS ${filler(outbox)} (x text)`);
  for (let round = 0; round < 3; round += 1) {
    await outbox.pool.query(`INSERT INTO ${filler(outbox)} SELECT repeat('x', 1000) FROM generate_series(1, 60000)`);
    await outbox.pool.query('SELECT pg_switch_wal()');
    await outbox.pool.query('CHECKPOINT');
  }
  await eventually('the slot to be lost', async () => {
    const { rows } = await outbox.pool.query<{ wal_status: string }>('SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1', [outbox.slot]);
    return rows[0]?.wal_status === 'lost' ? true : undefined;
  }, 30_000);
}

function filler(outbox: OutboxDatabase): string {
  return `wal_filler_${outbox.id}`;
}

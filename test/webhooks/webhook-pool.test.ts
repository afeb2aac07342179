import { afterEach, describe, expect, inject, it } from 'vitest';
import type pg from 'pg';
import { databaseAccess } from '../../src/pg-connection.js';
import { webhookPool } from '../../src/webhooks/webhook-tables.js';
import { delay } from '../harness/relay-process.js';

/** node-postgres closes a pool's idle sessions after this long unless told otherwise. */
const NODE_POSTGRES_IDLE_DEFAULT_MS = 10_000;

/**
 * The webhooks process's pool keeps its Postgres sessions through a quiet spell: the first
 * events of a burst after it are sent without waiting for new sessions (their backends started,
 * their statements prepared again).
 */
describe('the webhooks pool through a quiet spell', () => {
  let pool: pg.Pool | null = null;

  afterEach(async () => {
    await pool?.end();
    pool = null;
  });

  it('serves the next burst from the same sessions after longer quiet than node-postgres keeps idle ones', async () => {
    pool = webhookPool(databaseAccess(inject('services').databaseUrl), 'webhook-pool-test', 3);
    const sessions = async (): Promise<number[]> => {
      const clients = await Promise.all([pool!.connect(), pool!.connect(), pool!.connect()]);
      try {
        const pids = await Promise.all(clients.map(async (client) => (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid));
        return pids.sort((a, b) => a - b);
      } finally {
        for (const client of clients) client.release();
      }
    };
    const before = await sessions();
    await delay(NODE_POSTGRES_IDLE_DEFAULT_MS + 1_500);
    expect(pool.idleCount).toBe(3);
    expect(await sessions()).toEqual(before);
  }, 30_000);
});

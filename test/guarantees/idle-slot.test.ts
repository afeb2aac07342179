import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestOutbox } from '../harness/fixture.js';
import { eventually, RelayProcess } from '../harness/relay-process.js';

describe('idle outbox while other tables write', () => {
  const { outbox } = useTestOutbox({ aggregateTypes: [] });
  const filler = `filler_${outbox.id}`;

  beforeAll(async () => {
    await outbox.pool.query(`CREATE TABLE ${filler} (id bigserial PRIMARY KEY, data text)`);
  });

  afterAll(async () => {
    await outbox.pool.query(`DROP TABLE IF EXISTS ${filler}`);
  });

  it("keeps the slot's confirmed_flush_lsn up with the WAL, so the slot holds no WAL without need", async () => {
    const relay = new RelayProcess(outbox.relayEnv()).start();
    try {
      await relay.waitActive();
      const before = await outbox.currentWalLsn();
      for (let i = 0; i < 40; i += 1) {
        await outbox.pool.query(`INSERT INTO ${filler} (data) SELECT repeat(md5(g::text), 32) FROM generate_series(1, 1000) g`);
      }
      const after = await outbox.currentWalLsn();
      expect(Number(after - before)).toBeGreaterThan(40 * 1024 * 1024);
      const confirmed = await eventually(
        'the confirmed position to pass the WAL written by the other table',
        async () => {
          const state = await outbox.slotState();
          return state.confirmed >= after ? state.confirmed : undefined;
        },
        30_000,
      );
      expect(confirmed).toBeGreaterThanOrEqual(after);
    } finally {
      await relay.stop();
    }
  });
});

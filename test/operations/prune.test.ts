// vitest: runs alone (it holds a write transaction open, which would hold back a neighbour's pruning and slot creation)
import { describe, expect, it } from 'vitest';
import { cli } from '../harness/cli.js';
import { useTestOutbox } from '../harness/fixture.js';
import { billingEvent } from '../harness/outbox.js';
import { eventually, RelayProcess } from '../harness/relay-process.js';

describe('prune sidecar', () => {
  const { outbox, reader } = useTestOutbox({ read: true });

  const prune = () => cli(['prune', '--retention', '0s'], outbox.relayEnv());
  const remaining = async (ids: readonly string[]) => {
    const { rows } = await outbox.pool.query<{ event_id: string }>(`SELECT event_id FROM ${outbox.table} WHERE event_id = ANY($1)`, [ids]);
    return rows.map((row) => row.event_id);
  };

  it('never deletes a row the relay has not confirmed, even with retention 0, and deletes make no events', async () => {
    // The relay is not running: nothing beyond the slot's creation point is confirmed.
    const early = Array.from({ length: 20 }, (_, i) => billingEvent('inv_prune', i));
    await outbox.insert(early);
    const open = await outbox.pool.connect();
    const late = billingEvent('inv_prune', 99);
    try {
      await open.query('BEGIN');
      await outbox.insert([late], open);

      const first = await prune();
      expect(first.code, first.stderr).toBe(0);
      expect(await remaining(early.map((row) => row.eventId))).toHaveLength(20);

      const relay = new RelayProcess(outbox.relayEnv()).start();
      try {
        await reader.until('the 20 early events', (records) => records.length >= 20);
        await eventually('the pruner to delete the confirmed rows', async () => {
          const pass = await prune();
          if (pass.code !== 0) throw new Error(pass.stderr);
          return (await remaining(early.map((row) => row.eventId))).length === 0 ? true : undefined;
        }, 60_000, 500);
      } finally {
        expect(await relay.stop()).toBe(0);
      }

      // The transaction that was open at every mark so far commits while the relay is down:
      // its row is old enough for retention 0 but not confirmed, so it must survive every pass.
      await open.query('COMMIT');
      for (let pass = 0; pass < 3; pass += 1) {
        const result = await prune();
        expect(result.code, result.stderr).toBe(0);
      }
      expect(await remaining([late.eventId])).toEqual([late.eventId]);

      const restarted = new RelayProcess(outbox.relayEnv()).start();
      try {
        await reader.until('the late event', (records) => records.some((record) => record.headers.event_id === late.eventId));
        await eventually('the late row to be pruned after it was confirmed', async () => {
          await prune();
          return (await remaining([late.eventId])).length === 0 ? true : undefined;
        }, 60_000, 500);
      } finally {
        await restarted.stop();
      }
      for (const instance of [relay, restarted]) expect(instance.logs.some((line) => /ignoring a change/.test(line.msg))).toBe(false);
    } finally {
      open.release();
    }
    // 21 inserts, and the 21 deletes produced nothing on the topic.
    expect(reader.records).toHaveLength(21);
  });

  it('loops with --every, logging each pass', async () => {
    const loop = new RelayProcess(outbox.relayEnv(), ['--every', '200ms'], 'prune').start();
    try {
      await loop.waitForLog(/^prune: pass/);
    } finally {
      expect(await loop.stop()).toBe(0);
    }
  });
});

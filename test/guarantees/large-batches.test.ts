import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { useTestOutbox } from '../harness/fixture.js';
import { billingEvent } from '../harness/outbox.js';
import { RelayProcess } from '../harness/relay-process.js';

describe('a backlog larger than one produce request', () => {
  const { outbox, reader } = useTestOutbox({ read: true });

  it("splits requests under the broker's max.message.bytes instead of retrying a refused batch forever", async () => {
    // 2,500 events of ~2 KB in one transaction: ~5 MB, five times the broker's default limit for a
    // partition's record batch, all of it ready to send at once.
    const notes = randomUUID().repeat(56);
    const rows = Array.from({ length: 2_500 }, (_, i) => ({ ...billingEvent(`inv_big_${i % 7}`, i), payload: { sequence: i, notes } }));
    const client = await outbox.pool.connect();
    try {
      await client.query('BEGIN');
      for (let i = 0; i < rows.length; i += 500) await outbox.insert(rows.slice(i, i + 500), client);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    const relay = new RelayProcess(outbox.relayEnv()).start();
    try {
      await reader.until('2,500 large events', (records) => records.length >= rows.length, 90_000, () => relay.tail());
    } finally {
      expect(await relay.stop()).toBe(0);
    }
    expect(new Set(reader.records.map((record) => record.headers.event_id)).size).toBe(rows.length);
    expect(relay.logs.some((line) => /stream interrupted|larger than the max message size/.test(`${line.msg} ${String(line.error ?? '')}`))).toBe(false);
  });
});

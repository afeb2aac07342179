import { describe, expect, it } from 'vitest';
import { parseLsn } from '../../src/lsn.js';
import { useTestOutbox } from '../harness/fixture.js';
import { billingEvent } from '../harness/outbox.js';
import { delay, RelayProcess } from '../harness/relay-process.js';

describe('graceful shutdown', () => {
  const { outbox, reader } = useTestOutbox({ read: true });

  it('confirms everything Kafka acknowledged before exiting 0, so a restart sends nothing twice', async () => {
    // A status interval longer than the test: only the shutdown itself can confirm the batch.
    const env = outbox.relayEnv({ OUTBOX_STATUS_INTERVAL: '10m' });
    const relay = new RelayProcess(env).start();
    await relay.waitActive();
    const confirmedAtStart = (await outbox.slotState()).confirmed;
    for (let i = 0; i < 50; i += 1) await outbox.insert(Array.from({ length: 10 }, (_, j) => billingEvent(`inv_${j}`, i * 10 + j)));
    await reader.until('500 events', (records) => records.length >= 500);
    expect((await outbox.slotState()).confirmed).toBe(confirmedAtStart);

    expect(await relay.stop()).toBe(0);
    await relay.waitForLog(/^drained/);
    // Every delivered transaction is confirmed: the slot is past the last one's commit.
    const lastCommit = reader.records.map((record) => parseLsn(record.headers.outbox_commit_lsn!)).reduce((a, b) => (a > b ? a : b));
    expect((await outbox.slotState()).confirmed).toBeGreaterThan(lastCommit);

    const marker = billingEvent('inv_marker', 0);
    const restarted = new RelayProcess(env).start();
    try {
      await restarted.waitActive();
      await outbox.insert([marker]);
      await reader.until('the marker', (records) => records.some((record) => record.headers.event_id === marker.eventId));
      await delay(500);
    } finally {
      await restarted.stop();
    }
    expect(reader.records).toHaveLength(501);
  });
});

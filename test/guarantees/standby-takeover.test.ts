import { describe, expect, it } from 'vitest';
import { useTestOutbox } from '../harness/fixture.js';
import { billingEvent } from '../harness/outbox.js';
import { RelayProcess } from '../harness/relay-process.js';

describe('two instances on one slot', () => {
  const { outbox, reader } = useTestOutbox({ read: true });

  it('runs one active reader and one standby that takes over when the active one dies', async () => {
    const active = new RelayProcess(outbox.relayEnv()).start();
    await active.waitActive();
    const standby = new RelayProcess(outbox.relayEnv()).start();
    try {
      await standby.waitForLog(/^standby/);
      const before = billingEvent('inv_ha', 1);
      await outbox.insert([before]);
      await reader.until('the first event', (records) => records.length >= 1);

      await active.kill9();
      await standby.waitActive(30_000);
      const after = billingEvent('inv_ha', 2);
      await outbox.insert([after]);
      await reader.until('the event after the takeover', (records) => records.some((record) => record.headers.event_id === after.eventId), 30_000, () => standby.tail());
      expect(reader.records.map((record) => record.headers.event_id)).toContain(before.eventId);
    } finally {
      await standby.stop();
    }
  });
});

import { afterAll, describe, expect, it } from 'vitest';
import { serviceAction } from '../harness/control.js';
import { expectEveryCommittedEventDelivered, useTestOutbox } from '../harness/fixture.js';
import { OutboxLoad } from '../harness/load.js';
import { delay, RelayProcess } from '../harness/relay-process.js';

describe('Postgres restarted under load', () => {
  const { outbox } = useTestOutbox();

  afterAll(async () => {
    await serviceAction('start', 'pg');
  });

  it('reconnects by itself after a clean restart and after kill -9, and nothing is lost', async () => {
    const relay = new RelayProcess(outbox.relayEnv()).start();
    const load = new OutboxLoad(outbox, { writers: 2, rowsPerTransaction: 2, aggregates: 10, pauseMs: 5 }).start();
    try {
      await relay.waitActive();
      for (const action of ['stop', 'kill'] as const) {
        await delay(1_500);
        await serviceAction(action, 'pg');
        await delay(1_000);
        await serviceAction('start', 'pg');
      }
      await delay(2_000);
    } finally {
      await load.stop();
    }
    // The table is the truth: a transaction whose COMMIT was cut off by the restart either
    // committed (and must be delivered) or did not (and must not be).
    expect(load.committedTransactions).toBeGreaterThan(50);
    await expectEveryCommittedEventDelivered(outbox, () => relay.tail());
    expect(relay.logs.filter((line) => /stream interrupted/.test(line.msg)).length).toBeGreaterThanOrEqual(2);
    expect(await relay.stop()).toBe(0);
  });
});

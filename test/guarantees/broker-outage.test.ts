import { afterAll, describe, expect, it } from 'vitest';
import { serviceAction } from '../harness/control.js';
import { expectEveryCommittedEventDelivered, useTestOutbox } from '../harness/fixture.js';
import { OutboxLoad } from '../harness/load.js';
import { delay, eventually, RelayProcess } from '../harness/relay-process.js';

describe('Kafka stopped under load', () => {
  const { outbox } = useTestOutbox();

  afterAll(async () => {
    await serviceAction('start', 'kafka');
  });

  it('holds the slot while Kafka is down, recovers by itself, and loses nothing', async () => {
    const relay = new RelayProcess(outbox.relayEnv()).start();
    const load = new OutboxLoad(outbox, { writers: 2, rowsPerTransaction: 2, aggregates: 10, pauseMs: 5 }).start();
    const confirmedDuringOutage: bigint[] = [];
    try {
      await relay.waitActive();
      await delay(1_500);
      await serviceAction('stop', 'kafka');
      const committedAtStop = (await outbox.committedIds()).length;
      await delay(1_500);
      for (let sample = 0; sample < 5; sample += 1) {
        confirmedDuringOutage.push((await outbox.slotState()).confirmed);
        await delay(1_000);
      }
      // Writes went on while the broker was away; the slot must not have moved past them.
      expect((await outbox.committedIds()).length).toBeGreaterThan(committedAtStop);
      await serviceAction('start', 'kafka');
      await delay(2_000);
    } finally {
      await load.stop();
    }
    expect(new Set(confirmedDuringOutage).size, `confirmed positions during the outage: ${confirmedDuringOutage.join(', ')}`).toBe(1);

    await expectEveryCommittedEventDelivered(outbox, () => relay.tail());
    // Whether the producer's retries outlasted the outage or the stream restarted, the relay
    // recovered without help: it is still running and stops cleanly.
    await eventually('the slot to catch up', async () => ((await outbox.slotState()).confirmed >= confirmedDuringOutage[0]! ? true : undefined));
    expect(await relay.stop()).toBe(0);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serviceAction } from '../harness/control.js';
import { createTopics, TopicReader } from '../harness/kafka.js';
import { OutboxLoad } from '../harness/load.js';
import { TestOutbox } from '../harness/outbox.js';
import { delay, eventually, RelayProcess } from '../harness/relay-process.js';

describe('Kafka stopped under load', () => {
  const outbox = new TestOutbox();

  beforeAll(async () => {
    await outbox.create();
    await createTopics([outbox.topic('invoice')]);
  });

  afterAll(async () => {
    await serviceAction('start', 'kafka');
    await outbox.destroy();
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

    const committed = await outbox.committedIds();
    const reader = await new TopicReader().start([outbox.topic('invoice')]);
    try {
      await reader.until(`all ${committed.length} committed events`, (records) => new Set(records.map((r) => r.headers.event_id)).size >= committed.length, 120_000, () => relay.tail());
      const delivered = new Set(reader.records.map((record) => record.headers.event_id));
      expect([...delivered].sort()).toEqual([...committed].sort());
    } finally {
      await reader.stop();
    }
    // Whether the producer's retries outlasted the outage or the stream restarted, the relay
    // recovered without help: it is still running and stops cleanly.
    await eventually('the slot to catch up', async () => ((await outbox.slotState()).confirmed >= confirmedDuringOutage[0]! ? true : undefined));
    expect(await relay.stop()).toBe(0);
  });
});

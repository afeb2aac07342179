import { afterAll, describe, expect, it } from 'vitest';
import { serviceAction } from '../harness/control.js';
import { expectEveryCommittedEventDelivered, useTestOutbox } from '../harness/fixture.js';
import { testKafkaClients } from '../harness/kafka-clients.js';
import { TopicReader } from '../harness/kafka.js';
import { OutboxLoad } from '../harness/load.js';
import { billingEvent } from '../harness/outbox.js';
import { delay, eventually, RelayProcess } from '../harness/relay-process.js';

describe.each(testKafkaClients())('Kafka stopped under load (%s)', (kafkaClient) => {
  const { outbox } = useTestOutbox({ kafkaClient });

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
    // recovered without help: it confirms everything written, is still running, stops cleanly.
    const end = await outbox.currentWalLsn();
    await eventually('the slot to catch up with everything written', async () => ((await outbox.slotState()).confirmed >= end ? true : undefined));
    expect(await relay.stop()).toBe(0);
  });

  it('resends an event whose batch the producer gave up on, with no new event to wake it', async () => {
    const relay = new RelayProcess(outbox.relayEnv()).start();
    const reader = await new TopicReader().start([outbox.topic('invoice')]);
    try {
      await relay.waitActive();
      const first = billingEvent('inv_quiet', 1);
      await outbox.insert([first]);
      await reader.until('the first event', (records) => records.some((record) => record.headers.event_id === first.eventId));
      await reader.stop();

      await serviceAction('stop', 'kafka');
      const stranded = billingEvent('inv_quiet', 2);
      await outbox.insert([stranded]);
      // The producer retries for ~20 s, then the session must end by itself and reconnect.
      await relay.waitForLog(/stream interrupted/, 90_000);
      await serviceAction('start', 'kafka');

      const after = await new TopicReader().start([outbox.topic('invoice')]);
      try {
        await after.until('the stranded event', (records) => records.some((record) => record.headers.event_id === stranded.eventId), 90_000, () => relay.tail());
      } finally {
        await after.stop();
      }
    } finally {
      expect(await relay.stop()).toBe(0);
    }
  });
});

import { describe, expect, it } from 'vitest';
import { parseLsn } from '../../src/lsn.js';
import { expectEveryCommittedEventDelivered, useTestOutbox } from '../harness/fixture.js';
import { testKafkaClients } from '../harness/kafka-clients.js';
import { OutboxLoad } from '../harness/load.js';
import { delay, eventually, RelayProcess } from '../harness/relay-process.js';

describe.each(testKafkaClients())('crash safety: kill -9 of the relay under load (%s)', (kafkaClient) => {
  const { outbox } = useTestOutbox({ kafkaClient });

  it('delivers every committed event; duplicates only of events after the confirmed position at a crash', async () => {
    const load = new OutboxLoad(outbox, { writers: 4, rowsPerTransaction: 3, aggregates: 20, pauseMs: 2 }).start();
    const confirmedAtCrash: bigint[] = [];
    let relay = new RelayProcess(outbox.relayEnv()).start();
    try {
      await relay.waitActive();
      for (let crash = 0; crash < 4; crash += 1) {
        await delay(700 + Math.floor(Math.random() * 1_500));
        await relay.kill9();
        const slot = await eventually('the slot to be released', async () => {
          const state = await outbox.slotState();
          return state.active ? undefined : state;
        });
        confirmedAtCrash.push(slot.confirmed);
        relay = new RelayProcess(outbox.relayEnv()).start();
        await relay.waitActive();
      }
    } finally {
      await load.stop();
    }
    const committed = await outbox.committedIds();
    expect(committed.length).toBeGreaterThan(500);
    const records = await expectEveryCommittedEventDelivered(outbox, () => relay.tail());
    await relay.stop();

    // An event is sent again after crash k only if its transaction committed at or after the
    // position confirmed at that crash; anything more is a duplicate the relay must not make.
    const occurrences = new Map<string, { count: number; commitLsn: bigint }>();
    for (const record of records) {
      const entry = occurrences.get(record.headers.event_id!) ?? { count: 0, commitLsn: parseLsn(record.headers.outbox_commit_lsn!) };
      entry.count += 1;
      occurrences.set(record.headers.event_id!, entry);
    }
    let duplicated = 0;
    for (const [eventId, { count, commitLsn }] of occurrences) {
      const allowed = 1 + confirmedAtCrash.filter((confirmed) => commitLsn >= confirmed).length;
      expect(count, `event ${eventId} at ${commitLsn}`).toBeLessThanOrEqual(allowed);
      if (count > 1) duplicated += 1;
    }
    process.stdout.write(`crash safety (${kafkaClient}): ${committed.length} committed, ${records.length} delivered, ${duplicated} duplicated after ${confirmedAtCrash.length} kills\n`);
  });
});

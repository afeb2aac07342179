import { describe, expect, it } from 'vitest';
import { expectExactlyOnce, useExactlyOnceOutbox } from '../harness/exactly-once.js';
import { testKafkaClients } from '../harness/kafka-clients.js';
import { OutboxLoad } from '../harness/load.js';
import { delay, eventually, RelayProcess } from '../harness/relay-process.js';

/**
 * OUTBOX_DELIVERY=exactly-once where Postgres is in the fault: the relay killed -9 under load,
 * and a standby instance taking over from a killed active one. A read_committed consumer sees
 * every committed event once, in order per aggregate, and no rolled-back one. What only Kafka's
 * side decides (a broker restart, transactions left open on the progress topic) is in
 * exactly-once-kafka.test.ts: this file is the one the Postgres version matrix runs
 * (scripts/test-postgres-versions.sh).
 */
describe.each(testKafkaClients())('exactly-once delivery on %s', (client) => {
  describe('kill -9 under load', () => {
    const { outbox, env } = useExactlyOnceOutbox(client);

    it('kill -9 ten times under load: a read_committed consumer sees every committed event exactly once', async () => {
      const load = new OutboxLoad(outbox, { writers: 4, rowsPerTransaction: 3, aggregates: 20, pauseMs: 2, rollbackEvery: 7 }).start();
      const kills = 10;
      let relay = new RelayProcess(env()).start();
      try {
        await relay.waitActive();
        for (let kill = 0; kill < kills; kill += 1) {
          await delay(600 + Math.floor(Math.random() * 1_200));
          await relay.kill9();
          await eventually('the slot to be released', async () => ((await outbox.slotState()).active ? undefined : true));
          relay = new RelayProcess(env()).start();
          await relay.waitActive();
        }
      } finally {
        await load.stop();
      }
      const { records, uncommittedDuplicates } = await expectExactlyOnce(outbox, load.rolledBackIds, () => relay.tail());
      expect(relay.logs.some((line) => /exactly-once: events up to this point are in Kafka/.test(line.msg))).toBe(true);
      await relay.stop();
      process.stdout.write(`exactly-once (${client}): ${records.length} committed events after ${kills} kills, 0 duplicates read_committed, ${uncommittedDuplicates} duplicates read_uncommitted, ${load.rolledBackIds.length} rolled back\n`);
    });
  });

  describe('standby takeover', () => {
    const { outbox, env } = useExactlyOnceOutbox(client);

    it('a standby taking over from a killed active instance sends nothing twice', async () => {
      const load = new OutboxLoad(outbox, { writers: 2, rowsPerTransaction: 2, aggregates: 10, pauseMs: 3 }).start();
      const active = new RelayProcess(env()).start();
      let standby: RelayProcess | null = null;
      try {
        await active.waitActive();
        standby = new RelayProcess(env()).start();
        await standby.waitForLog(/^standby/);
        await delay(1_500);
        await active.kill9();
        await standby.waitActive(30_000);
        await delay(1_500);
      } finally {
        await load.stop();
      }
      await expectExactlyOnce(outbox, load.rolledBackIds, () => standby?.tail() ?? '');
      await standby.stop();
    });
  });
});

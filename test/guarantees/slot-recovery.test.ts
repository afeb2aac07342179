import { describe, expect, it } from 'vitest';
import { cli } from '../harness/cli.js';
import { expectEveryCommittedEventDelivered, expectOrderPerAggregate, useTestOutbox } from '../harness/fixture.js';
import type { ConsumedRecord } from '../harness/kafka.js';
import { OutboxLoad } from '../harness/load.js';
import { billingEvent, type OutboxRow, type TestOutbox } from '../harness/outbox.js';
import { eventually, RelayProcess } from '../harness/relay-process.js';
import { invalidateSlot, useSmallWalKeepSize } from '../harness/slot-loss.js';

/**
 * A slot that is gone — dropped, or invalidated by max_slot_wal_keep_size — must never cost an
 * event: `run` and `setup` refuse to make a fresh one (it would start past the missed events),
 * `recover` re-creates it with an exported snapshot and publishes again every retained row it
 * cannot prove delivered, and the stream goes on from the new slot. Each case ends with every
 * committed event in Kafka, first deliveries in commit order per aggregate.
 */

/** `count` events over three aggregates, each its own transaction, sequences continuing per aggregate. */
async function commit(outbox: TestOutbox, sequences: Map<string, number>, count: number): Promise<OutboxRow[]> {
  const rows: OutboxRow[] = [];
  for (let n = 0; n < count; n += 1) {
    const aggregate = `inv_${n % 3}`;
    const sequence = (sequences.get(aggregate) ?? 0) + 1;
    sequences.set(aggregate, sequence);
    const row = billingEvent(aggregate, sequence);
    await outbox.insert([row]);
    rows.push(row);
  }
  return rows;
}

async function runUntilDelivered(outbox: TestOutbox, rows: readonly OutboxRow[], reader: { until: (what: string, check: (records: readonly ConsumedRecord[]) => boolean, timeoutMs?: number, context?: () => string) => Promise<void> }): Promise<void> {
  const relay = new RelayProcess(outbox.relayEnv()).start();
  try {
    await relay.waitActive();
    await reader.until(`${rows.length} events`, (records) => rows.every((row) => records.some((record) => record.headers.event_id === row.eventId)), 60_000, () => relay.tail());
  } finally {
    expect(await relay.stop()).toBe(0);
  }
}

/** The relay refuses to stream, and setup refuses to make a slot, naming `recover`. */
async function expectRefusals(outbox: TestOutbox, code: 'SOURCE_SLOT_MISSING' | 'SOURCE_SLOT_LOST'): Promise<void> {
  const relay = new RelayProcess(outbox.relayEnv()).start();
  expect(await relay.waitExit(30_000), relay.tail()).toBe(1);
  const fatal = relay.logs.find((line) => line.level === 60);
  expect(fatal, relay.tail()).toMatchObject({ code });
  expect(String(fatal!.err)).toMatch(/outbox-relay recover --dry-run.*outbox-relay recover/);
  const setup = await cli(['setup'], outbox.relayEnv());
  expect(setup.code).toBe(1);
  expect(setup.stderr).toMatch(new RegExp(`\\[${code}\\].*outbox-relay recover`));
}

/** After recover, the relay streams on: every committed event arrives, in commit order per aggregate; returns the duplicates. */
async function expectEverythingAfterRecovery(outbox: TestOutbox, sequences: Map<string, number>): Promise<number> {
  const relay = new RelayProcess(outbox.relayEnv()).start();
  try {
    await relay.waitActive();
    await commit(outbox, sequences, 9);
    const records = await expectEveryCommittedEventDelivered(outbox, () => relay.tail());
    expectOrderPerAggregate(records);
    return records.length - new Set(records.map((record) => record.headers.event_id)).size;
  } finally {
    expect(await relay.stop()).toBe(0);
  }
}

describe('a dropped slot', () => {
  const { outbox, reader } = useTestOutbox({ read: true });
  const sequences = new Map<string, number>();

  it('run and setup refuse; recover publishes every retained row again, nothing is lost, order kept', async () => {
    await runUntilDelivered(outbox, await commit(outbox, sequences, 12), reader);
    await commit(outbox, sequences, 6);
    await outbox.pool.query('SELECT pg_drop_replication_slot($1)', [outbox.slot]);
    await commit(outbox, sequences, 6);

    await expectRefusals(outbox, 'SOURCE_SLOT_MISSING');
    const dryRun = await cli(['recover', '--dry-run'], outbox.relayEnv());
    expect(dryRun.code, dryRun.stderr).toBe(0);
    expect(dryRun.stdout).toMatch(/slot missing; the slot is gone with its position: no retained row can be proved delivered\nwould publish again: 24 rows \(created .* to .*\), in transaction id order/);
    expect((await outbox.pool.query('SELECT 1 FROM pg_replication_slots WHERE slot_name = $1', [outbox.slot])).rows).toEqual([]);

    const recovered = await cli(['recover'], outbox.relayEnv());
    expect(recovered.code, recovered.stderr).toBe(0);
    expect(recovered.stdout).toMatch(/published again: 24 rows .*\nnew slot at \d+\/[0-9A-F]+/);

    const duplicates = await expectEverythingAfterRecovery(outbox, sequences);
    // The 12 delivered before the slot was dropped went out again: nothing proved them delivered.
    expect(duplicates).toBe(12);
  });
});

describe('a slot lost to max_slot_wal_keep_size, with the pruner running', () => {
  const { outbox, reader } = useTestOutbox({ read: true });
  const sequences = new Map<string, number>();
  useSmallWalKeepSize(outbox);

  it("recover skips what the lost slot's position and the pruner's marks prove delivered, and publishes the rest", { timeout: 180_000 }, async () => {
    const delivered = await commit(outbox, sequences, 12);
    const relay = new RelayProcess(outbox.relayEnv()).start();
    try {
      await relay.waitActive();
      await reader.until('the first events', (records) => delivered.every((row) => records.some((record) => record.headers.event_id === row.eventId)), 60_000, () => relay.tail());
      // A pruner pass records a mark (retention keeps every row); the relay's idle keepalives take
      // the slot past it, and the next pass finds it confirmed.
      const pass = await cli(['prune'], outbox.relayEnv());
      expect(pass.code, pass.stderr).toBe(0);
      await eventually('the slot to confirm past the mark', async () => {
        const { rows } = await outbox.pool.query<{ passed: boolean }>(
          `SELECT s.confirmed_flush_lsn >= m.wal_lsn AS passed FROM pg_replication_slots s, ${outbox.table}_prune_marks m WHERE s.slot_name = $1 ORDER BY m.wal_lsn DESC LIMIT 1`,
          [outbox.slot],
        );
        return rows[0]?.passed ? true : undefined;
      }, 30_000);
    } finally {
      expect(await relay.stop()).toBe(0);
    }
    await commit(outbox, sequences, 9);

    await invalidateSlot(outbox);

    await expectRefusals(outbox, 'SOURCE_SLOT_LOST');
    const dryRun = await cli(['recover', '--dry-run'], outbox.relayEnv());
    expect(dryRun.code, dryRun.stderr).toBe(0);
    expect(dryRun.stdout).toMatch(/slot lost; 12 retained rows are proved delivered .*\nwould publish again: 9 rows/);

    const recovered = await cli(['recover'], outbox.relayEnv());
    expect(recovered.code, recovered.stderr).toBe(0);
    expect(recovered.stdout).toMatch(/published again: 9 rows/);
    expect(await expectEverythingAfterRecovery(outbox, sequences)).toBe(0);
  });
});

describe('recover while applications keep writing', () => {
  const { outbox } = useTestOutbox();

  it('meets the stream exactly at the new slot: nothing committed during recovery is missed', async () => {
    await outbox.insert(Array.from({ length: 50 }, (_, n) => billingEvent(`inv_${n % 5}`, n + 1)));
    await outbox.pool.query('SELECT pg_drop_replication_slot($1)', [outbox.slot]);
    const load = new OutboxLoad(outbox, { writers: 3, rowsPerTransaction: 2, aggregates: 4, pauseMs: 2 }).start();
    try {
      await eventually('writers under way', async () => (load.committedTransactions > 20 ? true : undefined), 10_000, 20);
      const recovered = await cli(['recover'], outbox.relayEnv());
      expect(recovered.code, recovered.stderr).toBe(0);
      // Still writing after the new slot exists: those go by the stream.
      const atRecovery = load.committedTransactions;
      await eventually('more commits after recovery', async () => (load.committedTransactions > atRecovery + 20 ? true : undefined), 10_000, 20);
    } finally {
      await load.stop();
    }
    const relay = new RelayProcess(outbox.relayEnv()).start();
    try {
      await relay.waitActive();
      const records = await expectEveryCommittedEventDelivered(outbox, () => relay.tail());
      expectOrderPerAggregate(records);
    } finally {
      expect(await relay.stop()).toBe(0);
    }
  });
});

describe('a recover that dies half way', () => {
  const { outbox } = useTestOutbox();

  it('leaves run, setup and the pruner refusing until recover runs again and finishes; nothing is lost', { timeout: 180_000 }, async () => {
    for (let batch = 0; batch < 20; batch += 1) await outbox.insert(Array.from({ length: 1_000 }, (_, n) => billingEvent(`inv_${n % 7}`, batch * 1_000 + n + 1)));
    await outbox.pool.query('SELECT pg_drop_replication_slot($1)', [outbox.slot]);

    const first = new RelayProcess(outbox.relayEnv(), [], 'recover').start();
    await first.waitForLog(/^recover: progress/, 60_000);
    await first.kill9();

    const relay = new RelayProcess(outbox.relayEnv()).start();
    expect(await relay.waitExit(30_000), relay.tail()).toBe(1);
    expect(relay.tail()).toMatch(/\[SOURCE_RECOVERY_UNFINISHED\]: cannot stream: `outbox-relay recover` began at .* and did not finish/);
    for (const command of [['setup'], ['prune', '--retention', '0s']]) {
      const refused = await cli(command, outbox.relayEnv());
      expect(refused.code, `${command[0]}: ${refused.stdout}`).toBe(1);
      expect(refused.stderr).toMatch(/\[SOURCE_RECOVERY_UNFINISHED\].*run `outbox-relay recover` again/);
    }

    const again = await cli(['recover'], outbox.relayEnv());
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/published again: 20000 rows/);
    const streaming = new RelayProcess(outbox.relayEnv()).start();
    try {
      await streaming.waitActive();
      await outbox.insert([billingEvent('inv_after', 1)]);
      await expectEveryCommittedEventDelivered(outbox, () => streaming.tail());
    } finally {
      expect(await streaming.stop()).toBe(0);
    }
  });
});

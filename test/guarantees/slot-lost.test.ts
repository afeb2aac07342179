import { describe, expect, it } from 'vitest';
import { cli } from '../harness/cli.js';
import { useTestOutbox } from '../harness/fixture.js';
import { billingEvent } from '../harness/outbox.js';
import { RelayProcess } from '../harness/relay-process.js';
import { invalidateSlot, useSmallWalKeepSize } from '../harness/slot-loss.js';

/**
 * A slot invalidated by max_slot_wal_keep_size cannot be streamed again. The relay must stop and
 * say so, with Postgres's reason and how to recover, instead of retrying forever at warn level.
 */
describe('a lost replication slot', () => {
  const { outbox } = useTestOutbox();
  useSmallWalKeepSize(outbox);

  it('stops the relay with SOURCE_SLOT_LOST, the reason and the way to recover', { timeout: 120_000 }, async () => {
    await outbox.insert([billingEvent('inv_lost', 1)]);
    await invalidateSlot(outbox);

    const status = await cli(['status'], outbox.relayEnv());
    expect(status.stdout).toMatch(/safe wal size +none: the slot is lost/);

    const relay = new RelayProcess(outbox.relayEnv()).start();
    expect(await relay.waitExit(30_000)).toBe(1);
    const fatal = relay.logs.find((line) => line.level === 60);
    expect(fatal, relay.tail()).toMatchObject({ code: 'SOURCE_SLOT_LOST' });
    expect(String(fatal!.err)).toMatch(/replication slot ".*" is lost: .*max_slot_wal_keep_size.*`outbox-relay recover --dry-run`.*`outbox-relay recover`/);
    expect(relay.logs.filter((line) => /stream interrupted/.test(line.msg))).toEqual([]);
  });
});

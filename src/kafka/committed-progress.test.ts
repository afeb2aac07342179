import { describe, expect, it } from 'vitest';
import { RelayError } from '../errors.js';
import { lastCommittedValue, type CommittedPartition, type ProgressSettle } from './committed-progress.js';

const KEY = '7313/outbox_relay';

/**
 * A progress partition at the port: `records` at offsets 0.., those from `openFrom` on in
 * transactions still open (a read_committed reader stops there).
 */
class HeldPartition implements CommittedPartition {
  readonly topic = 'outbox.progress';
  readonly partition = 0;
  constructor(
    private readonly records: readonly { key: string; value: string }[],
    public openFrom: number,
  ) {}
  async latest(isolation: 'committed' | 'uncommitted'): Promise<bigint> {
    return BigInt(isolation === 'committed' ? this.openFrom : this.records.length);
  }
  async earliest(): Promise<bigint> {
    return 0n;
  }
  async lastValueIn(key: string, from: bigint, to: bigint): Promise<Buffer | null | undefined> {
    const value = this.records.slice(Number(from), Number(to)).findLast((record) => record.key === key)?.value;
    return value === undefined ? undefined : Buffer.from(value);
  }
}

const settle = (closeOwnHangingTransaction: ProgressSettle['closeOwnHangingTransaction']): ProgressSettle => ({ timeoutMs: 5_000, stallMs: 60, closeOwnHangingTransaction });

describe('reading the committed progress back', () => {
  it('reads the last committed value of its key at once when no transaction is open', async () => {
    const log = new HeldPartition([{ key: KEY, value: 'a' }, { key: 'other', value: 'x' }, { key: KEY, value: 'b' }], 3);
    let closed = 0;
    expect((await lastCommittedValue(log, KEY, settle(async () => void (closed += 1))))?.toString()).toBe('b');
    expect(closed).toBe(0);
  });

  it('a transaction held open past the stall: commits one of the slot own once, whose marker ends it, then reads', async () => {
    const log = new HeldPartition([{ key: KEY, value: 'a' }, { key: KEY, value: 'held' }], 1);
    const closedAt: number[] = [];
    const started = Date.now();
    const value = await lastCommittedValue(
      log,
      KEY,
      settle(async (partition) => {
        expect(partition).toBe(0);
        closedAt.push(Date.now() - started);
        log.openFrom = 2; // the marker commits it
      }),
    );
    expect(value?.toString()).toBe('held');
    expect(closedAt).toHaveLength(1);
    expect(closedAt[0]).toBeGreaterThanOrEqual(60);
  });

  it('still held after that commit (another producer transaction): gives up naming the partition and both offsets, having committed once', async () => {
    const log = new HeldPartition([{ key: KEY, value: 'a' }, { key: 'another-system/another-slot', value: '{}' }], 1);
    let closed = 0;
    const failure = await lastCommittedValue(log, KEY, settle(async () => void (closed += 1))).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(RelayError);
    expect((failure as RelayError).code).toBe('SINK_PUBLISH');
    expect((failure as RelayError).message).toMatch(/outbox\.progress-0: its last stable offset stays at 1, below its end 2, and has not moved for 60ms, not even after this slot's producer committed a transaction on it/);
    expect(closed).toBe(1);
  });

  it('a stable offset that keeps moving (transactions ending) is waited for without committing anything', async () => {
    const log = new HeldPartition([{ key: KEY, value: 'a' }, { key: 'b', value: '1' }, { key: 'c', value: '2' }, { key: KEY, value: 'd' }], 1);
    const timer = setInterval(() => (log.openFrom = Math.min(4, log.openFrom + 1)), 40);
    let closed = 0;
    try {
      expect((await lastCommittedValue(log, KEY, settle(async () => void (closed += 1))))?.toString()).toBe('d');
    } finally {
      clearInterval(timer);
    }
    expect(closed).toBe(0);
  });
});

import { describe, expect, it } from 'vitest';
import { NO_HEADER_BLOCK } from './record-format.js';
import type { OutgoingMessage } from './record.js';
import type { TrackedTransaction } from '../checkpoint/commit-tracker.js';
import { Transactions, type TransactionCalls } from './transactions.js';

const message = (i: number): OutgoingMessage => ({
  topic: 'billing.invoice',
  key: `inv_${i}`,
  value: `{"i":${i}}`,
  headers: {},
  headerBlock: NO_HEADER_BLOCK,
  size: 100,
  transaction: { commitLsnText: '0/1' } as TrackedTransaction,
  position: i,
  label: 'invoice.paid',
  outbox: 'public.event_outbox',
  deadLetter: false,
  batchLimit: 1_000_000,
});

/** The calls a client would make, recorded; `failing` names the one that throws. */
function recordingCalls(failing?: keyof TransactionCalls): { calls: TransactionCalls; log: string[] } {
  const log: string[] = [];
  const call = (name: keyof TransactionCalls, detail = '') => async () => {
    log.push(`${name}${detail}`);
    if (name === failing) throw new Error(`${name} failed`);
  };
  return {
    log,
    calls: {
      begin: call('begin'),
      send: async (messages) => call('send', ` ${messages.map((m) => `${m.topic}:${String(m.key)}`).join(',')}`)(),
      sendTombstone: async (record) => call('sendTombstone', ` ${record.topic}-${record.partition}:${record.key}`)(),
      commit: call('commit'),
      abort: call('abort'),
    },
  };
}

const progress = { topic: 'outbox-relay.progress', key: 'slot@server', value: (batch: readonly OutgoingMessage[]) => `up to ${String(batch.at(-1)!.key)}` };

describe('exactly-once transactions (both clients)', () => {
  it('begins a transaction at the first request, adds each request with the progress record of its last event, and begins the next after a commit', async () => {
    const { calls, log } = recordingCalls();
    const transactions = new Transactions(calls, { progress, transactionTimeoutMs: 60_000, transactionalId: 'outbox-relay-slot' });
    await transactions.add([message(1), message(2)]);
    await transactions.add([message(3)]);
    await transactions.commit();
    await transactions.commit();
    await transactions.add([message(4)]);
    expect(log).toEqual([
      'begin',
      'send billing.invoice:inv_1,billing.invoice:inv_2,outbox-relay.progress:slot@server',
      'send billing.invoice:inv_3,outbox-relay.progress:slot@server',
      'commit',
      'begin',
      'send billing.invoice:inv_4,outbox-relay.progress:slot@server',
    ]);
  });

  it('without a progress record (replay, recover), sends the messages alone', async () => {
    const { calls, log } = recordingCalls();
    await new Transactions(calls, { progress: null, transactionTimeoutMs: 60_000, transactionalId: 'outbox-relay-slot' }).add([message(1)]);
    expect(log).toEqual(['begin', 'send billing.invoice:inv_1']);
  });

  it('aborts a transaction whose request or commit failed, once; says when the broker had aborted it for time', async () => {
    const sending = recordingCalls('send');
    const failed = new Transactions(sending.calls, { progress: null, transactionTimeoutMs: 60_000, transactionalId: 'outbox-relay-slot' });
    await expect(failed.add([message(1)])).rejects.toThrow('send failed');
    expect(await failed.abortFailed()).toBe('');
    expect(await failed.abortFailed()).toBe('');
    expect(sending.log).toEqual(['begin', 'send billing.invoice:inv_1', 'abort']);

    const committing = recordingCalls('commit');
    const late = new Transactions(committing.calls, { progress: null, transactionTimeoutMs: 0, transactionalId: 'outbox-relay-slot' });
    await late.add([message(1)]);
    // A failed commit is aborted at once, and says so when the broker had aborted it for time.
    await expect(late.commit()).rejects.toThrow(expect.objectContaining({ code: 'SINK_PUBLISH', message: expect.stringMatching(/^Kafka did not commit a transaction; it was open \d+ms, over OUTBOX_TRANSACTION_TIMEOUT \(0ms\), so the broker aborted it: .*commit failed/) }));
    expect(await late.abortFailed()).toBe('');
    expect(committing.log).toEqual(['begin', 'send billing.invoice:inv_1', 'commit', 'abort']);
  });

  it('commits a tombstone in a transaction of its own, and aborts it if it fails', async () => {
    const { calls, log } = recordingCalls();
    await new Transactions(calls, { progress, transactionTimeoutMs: 60_000, transactionalId: 'outbox-relay-slot' }).commitTombstone({ topic: 'outbox-relay.progress', partition: 3, key: 'slot@server#hanging' });
    expect(log).toEqual(['begin', 'sendTombstone outbox-relay.progress-3:slot@server#hanging', 'commit']);

    const failing = recordingCalls('sendTombstone');
    await expect(new Transactions(failing.calls, { progress, transactionTimeoutMs: 60_000, transactionalId: 'outbox-relay-slot' }).commitTombstone({ topic: 'outbox-relay.progress', partition: 0, key: 'k' })).rejects.toThrow('sendTombstone failed');
    expect(failing.log).toEqual(['begin', 'sendTombstone outbox-relay.progress-0:k', 'abort']);
  });
});

import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { TrackedTransaction } from '../checkpoint/commit-tracker.js';
import { RelayError } from '../errors.js';
import type { OutgoingMessage } from '../kafka/record.js';
import { KafkaSink, type KafkaSinkOptions } from './kafka-sink.js';
import { NO_HEADER_BLOCK } from '../kafka/record-format.js';
import type { RecordProducer, TopicDescription } from '../kafka/ports.js';
import { RECORD_BATCH_OVERHEAD } from '../kafka/record-size.js';

/** A producer at the sink's port: records each request and settles it when the test says. */
class FakeProducer implements RecordProducer {
  readonly requests: { readonly messages: readonly OutgoingMessage[]; settled: boolean; resolve: () => void; reject: (error: Error) => void }[] = [];
  mostInFlight = 0;

  async connect(): Promise<void> {}
  async disconnect(): Promise<void> {}
  async describeTopic(): Promise<TopicDescription> {
    return { replicationFactor: 3, minInsyncReplicas: 2, uncleanLeaderElection: false, maxMessageBytes: 1_048_588, cleanupPolicy: 'delete' };
  }
  async brokersCreateTopics(): Promise<boolean> {
    return true;
  }

  produce(messages: readonly OutgoingMessage[]): Promise<void> {
    return new Promise((resolve, reject) => {
      this.requests.push({ messages, settled: false, resolve, reject });
      this.mostInFlight = Math.max(this.mostInFlight, this.requests.filter((request) => !request.settled).length);
    });
  }

  /** Acknowledges the oldest open request. */
  acknowledgeNext(): void {
    const request = this.requests.find((candidate) => !candidate.settled)!;
    request.settled = true;
    request.resolve();
  }
}

/** Exactly-once at the port: `produce` adds to the open transaction; `commit` is a request of its own, named 'commit'. */
class FakeTransactionalProducer extends FakeProducer {
  commit(): Promise<void> {
    return this.produce([]).then(() => undefined);
  }

  /** 'send N' or 'commit' per request, in order. */
  get story(): string[] {
    return this.requests.map((request) => (request.messages.length === 0 ? 'commit' : `send ${request.messages.length}`));
  }
}

const transaction = {} as TrackedTransaction;
const message = (i: number, size = 100, topic = 'billing.invoice', batchLimit = 1_000_000): OutgoingMessage => ({ topic, key: `inv_${i}`, value: `{"i":${i}}`, headers: {}, headerBlock: NO_HEADER_BLOCK, size, transaction, position: i, label: 'invoice.paid', outbox: 'public.event_outbox', deadLetter: false, batchLimit });

function sinkWith(overrides: Partial<KafkaSinkOptions> = {}, producer: FakeProducer = new FakeProducer()) {
  const acknowledged: (readonly OutgoingMessage[])[] = [];
  const failures: RelayError[] = [];
  const sink = new KafkaSink({
    producer,
    batchMaxEvents: 100,
    batchMaxBytes: 1_000_000,
    lingerMs: 5,
    logger: pino({ level: 'silent' }),
    onAcknowledged: (batch) => acknowledged.push(batch),
    onFailure: (error) => failures.push(error),
    ...overrides,
  });
  return { sink, producer, acknowledged, failures };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('KafkaSink', () => {
  afterEach(() => vi.useRealTimers());

  it('waits the linger for more events before sending, then sends them in one request', async () => {
    vi.useFakeTimers();
    const { sink, producer } = sinkWith({ lingerMs: 5 });
    sink.send(message(1));
    sink.send(message(2));
    await vi.advanceTimersByTimeAsync(4);
    expect(producer.requests).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(producer.requests.map((request) => request.messages.length)).toEqual([2]);
  });

  it('while a request is in flight, the next one still waits until its oldest event has lingered', async () => {
    vi.useFakeTimers();
    const { sink, producer } = sinkWith({ lingerMs: 5 });
    sink.send(message(1));
    await vi.advanceTimersByTimeAsync(5);
    expect(producer.requests).toHaveLength(1);
    sink.send(message(2));
    await vi.advanceTimersByTimeAsync(1);
    sink.send(message(3));
    producer.acknowledgeNext();
    await vi.advanceTimersByTimeAsync(3);
    // Message 2 has waited 4 ms of its 5: the acknowledgement does not send it yet.
    expect(producer.requests).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(producer.requests.map((request) => request.messages.length)).toEqual([1, 2]);
  });

  it('sends the next request as soon as the one in flight is acknowledged when its events have lingered already', async () => {
    vi.useFakeTimers();
    const { sink, producer } = sinkWith({ lingerMs: 5 });
    sink.send(message(1));
    await vi.advanceTimersByTimeAsync(5);
    sink.send(message(2));
    await vi.advanceTimersByTimeAsync(20);
    expect(producer.requests).toHaveLength(1);
    producer.acknowledgeNext();
    await vi.advanceTimersByTimeAsync(0);
    expect(producer.requests.map((request) => request.messages.length)).toEqual([1, 1]);
  });

  it('sends a full batch as soon as the request in flight is acknowledged, whatever the linger', async () => {
    const { sink, producer } = sinkWith({ batchMaxEvents: 2, lingerMs: 60_000 });
    for (let i = 0; i < 4; i++) sink.send(message(i));
    expect(producer.requests).toHaveLength(1);
    producer.acknowledgeNext();
    await settle();
    expect(producer.requests.map((request) => request.messages.length)).toEqual([2, 2]);
  });

  it('sends a full batch at once, without waiting for the linger', () => {
    const { sink, producer } = sinkWith({ batchMaxEvents: 3, lingerMs: 60_000 });
    for (let i = 0; i < 3; i++) sink.send(message(i));
    expect(producer.requests.map((request) => request.messages.length)).toEqual([3]);
  });

  it('keeps one request in flight; the next batch gathers meanwhile and goes when the first is acknowledged', async () => {
    const { sink, producer, acknowledged } = sinkWith({ batchMaxEvents: 2, lingerMs: 0 });
    for (let i = 0; i < 7; i++) sink.send(message(i));
    await settle();
    expect(producer.requests).toHaveLength(1);
    for (let round = 0; round < 3; round++) {
      producer.acknowledgeNext();
      await settle();
    }
    producer.acknowledgeNext();
    await settle();
    expect(producer.mostInFlight).toBe(1);
    expect(producer.requests.map((request) => request.messages.length)).toEqual([2, 2, 2, 1]);
    expect(acknowledged.flat().map((m) => m.key)).toEqual(['inv_0', 'inv_1', 'inv_2', 'inv_3', 'inv_4', 'inv_5', 'inv_6']);
    expect(sink.buffered).toBe(0);
  });

  it('bounds a request by bytes, batch header included, and sends an oversized message alone', async () => {
    const { sink, producer } = sinkWith({ batchMaxBytes: RECORD_BATCH_OVERHEAD + 250, lingerMs: 0 });
    sink.send(message(1, 100));
    sink.send(message(2, 100));
    sink.send(message(3, 100));
    sink.send(message(4, 5_000));
    sink.send(message(5, 10));
    await settle();
    for (let i = 0; i < 3; i++) {
      producer.acknowledgeNext();
      await settle();
    }
    expect(producer.requests.map((request) => request.messages.map((m) => m.key))).toEqual([['inv_1', 'inv_2'], ['inv_3'], ['inv_4'], ['inv_5']]);
  });

  it("bounds a request by the smallest max.message.bytes among its topics: one partition may take it all", async () => {
    const { sink, producer } = sinkWith({ lingerMs: 0 });
    const small = RECORD_BATCH_OVERHEAD + 250;
    sink.send(message(1, 100));
    sink.send(message(2, 100, 'billing.receipt', small));
    sink.send(message(3, 100, 'billing.receipt', small));
    sink.send(message(4, 100));
    await settle();
    for (let i = 0; i < 2; i++) {
      producer.acknowledgeNext();
      await settle();
    }
    expect(producer.requests.map((request) => request.messages.map((m) => m.key))).toEqual([['inv_1', 'inv_2'], ['inv_3', 'inv_4']]);
  });

  it('drain resolves once everything sent is acknowledged', async () => {
    const { sink, producer } = sinkWith({ lingerMs: 60_000 });
    sink.send(message(1));
    let drained = false;
    const drain = sink.drain().then(() => (drained = true));
    await settle();
    expect(producer.requests).toHaveLength(1);
    expect(drained).toBe(false);
    producer.acknowledgeNext();
    await drain;
    expect(drained).toBe(true);
  });

  it('reports a failed request once, then rejects every send and wait, and sends nothing more', async () => {
    const { sink, producer, failures, acknowledged } = sinkWith({ batchMaxEvents: 1, lingerMs: 0 });
    sink.send(message(1));
    sink.send(message(2));
    const waiting = sink.waitForRoom(1);
    const error = new RelayError('SINK_PUBLISH', 'Kafka did not acknowledge a batch of 1: NOT_ENOUGH_REPLICAS');
    producer.requests[0]!.reject(error);
    await expect(waiting).rejects.toBe(error);
    await expect(sink.drain()).rejects.toBe(error);
    expect(() => sink.send(message(3))).toThrow(error);
    await settle();
    expect(failures).toEqual([error]);
    expect(acknowledged).toEqual([]);
    expect(producer.requests).toHaveLength(1);
  });

  describe('exactly-once (a producer with commit)', () => {
    it('with a backlog, sends several requests in one transaction and acknowledges them only once it committed', async () => {
      const producer = new FakeTransactionalProducer();
      const { sink, acknowledged } = sinkWith({ batchMaxEvents: 4, lingerMs: 0 }, producer);
      for (let i = 0; i < 9; i++) sink.send(message(i));
      for (let step = 0; step < 2; step++) {
        await settle();
        producer.acknowledgeNext();
      }
      await settle();
      // The second request went while a full batch's worth waited; then too little was left: commit.
      expect(producer.story).toEqual(['send 4', 'send 4', 'commit']);
      expect(acknowledged).toEqual([]);
      expect(sink.buffered).toBe(9);
      producer.acknowledgeNext();
      await settle();
      expect(acknowledged.map((batch) => batch.length)).toEqual([4, 4]);
      producer.acknowledgeNext();
      await settle();
      producer.acknowledgeNext();
      await settle();
      expect(producer.story).toEqual(['send 4', 'send 4', 'commit', 'send 1', 'commit']);
      expect(acknowledged.flat().map((m) => m.key)).toEqual(['inv_0', 'inv_1', 'inv_2', 'inv_3', 'inv_4', 'inv_5', 'inv_6', 'inv_7', 'inv_8']);
      expect(sink.buffered).toBe(0);
      expect(producer.mostInFlight).toBe(1);
    });

    it('without a backlog, commits after each request (latency first), and drain commits what is open', async () => {
      const producer = new FakeTransactionalProducer();
      const { sink, acknowledged } = sinkWith({ batchMaxEvents: 100, lingerMs: 0 }, producer);
      sink.send(message(1));
      await settle();
      producer.acknowledgeNext();
      await settle();
      expect(producer.story).toEqual(['send 1', 'commit']);
      const drained = sink.drain();
      producer.acknowledgeNext();
      await drained;
      expect(acknowledged.map((batch) => batch.length)).toEqual([1]);
    });

    it('a failed commit fails the sink: nothing of the transaction is acknowledged', async () => {
      const producer = new FakeTransactionalProducer();
      const { sink, acknowledged, failures } = sinkWith({ lingerMs: 0 }, producer);
      sink.send(message(1));
      await settle();
      producer.acknowledgeNext();
      await settle();
      producer.requests.at(-1)!.reject(new RelayError('SINK_FENCED', 'another instance took over'));
      await settle();
      expect(failures.map((error) => error.code)).toEqual(['SINK_FENCED']);
      expect(acknowledged).toEqual([]);
      await expect(sink.drain()).rejects.toThrow(/another instance/);
    });
  });
});

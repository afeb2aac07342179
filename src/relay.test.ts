import pino from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { COMMANDS } from './config/commands.js';
import { compileRun } from './config/compile.js';
import { load } from './config/load.js';
import { JsonEncoder } from './encode/json-encoder.js';
import { RelayError } from './errors.js';
import type { OutgoingMessage } from './kafka/record.js';
import type { Lsn } from './lsn.js';
import { createRelayMetrics } from './observe/metrics.js';
import { Relay } from './relay.js';
import type { RecordProducer, TopicDescription } from './kafka/ports.js';
import type { SourceMessage } from './source/messages.js';
import type { SourceStream, StreamStart } from './source/source.js';

const at = (n: number) => BigInt(n) as Lsn;
const TABLE = { schema: 'public', name: 'event_outbox' };

/** A replication session at the relay's port: messages pushed by the test, status updates recorded. */
class FakeSource implements SourceStream {
  readonly statuses: Lsn[] = [];
  stopped = false;
  silentForMs = 0;
  closed = false;
  private readonly queue: SourceMessage[] = [];
  private failure: Error | null = null;
  private wake: (() => void) | null = null;

  constructor(private readonly startWith: () => Promise<Lsn>) {}

  async start(): Promise<StreamStart> {
    return { confirmed: await this.startWith(), origin: { systemId: '7000000000000000001', timeline: 1, timelineEnds: new Map() }, onStandby: false };
  }

  push(...messages: SourceMessage[]): void {
    this.queue.push(...messages);
    this.signal();
  }

  take(): SourceMessage | undefined {
    if (this.stopped) return undefined;
    const message = this.queue.shift();
    if (message === undefined && this.failure) throw this.failure;
    return message;
  }

  wait(): Promise<void> {
    if (this.stopped || this.failure || this.queue.length > 0) return Promise.resolve();
    return new Promise((resolve) => (this.wake = resolve));
  }

  stopReading(): void {
    this.stopped = true;
    this.signal();
  }

  abort(error: Error): void {
    this.failure = error;
    this.signal();
  }

  sendStatus(lsn: Lsn): void {
    this.statuses.push(lsn);
  }

  async close(): Promise<boolean> {
    this.closed = true;
    return this.failure === null;
  }

  private signal(): void {
    this.wake?.();
    this.wake = null;
  }
}

/** A producer that acknowledges at once (or fails when told to). */
class FakeProducer implements RecordProducer {
  readonly produced: OutgoingMessage[] = [];
  failWith: RelayError | null = null;
  async connect(): Promise<void> {}
  async disconnect(): Promise<void> {}
  async describeTopic(): Promise<TopicDescription> {
    return { replicationFactor: 3, minInsyncReplicas: 2, uncleanLeaderElection: false, maxMessageBytes: 1_048_588, cleanupPolicy: 'delete' };
  }
  async brokersCreateTopics(): Promise<boolean> {
    return true;
  }
  async produce(messages: readonly OutgoingMessage[]): Promise<void> {
    if (this.failWith) throw this.failWith;
    this.produced.push(...messages);
  }
}

function relayWith(sources: FakeSource[], producer = new FakeProducer()) {
  const env = { DATABASE_URL: 'postgres://relay@db/billing', KAFKA_BROKERS: 'k:9092', OUTBOX_RECONNECT_MIN: '10ms', OUTBOX_RECONNECT_MAX: '20ms', OUTBOX_STANDBY_POLL: '10ms', OUTBOX_STATUS_INTERVAL: '10ms', OUTBOX_LINGER: '0' };
  const options = compileRun(load(COMMANDS.run, { env })).relay;
  const metrics = createRelayMetrics(new Registry());
  const opened: FakeSource[] = [];
  const relay = new Relay({
    options,
    logger: pino({ level: 'silent' }),
    metrics,
    encoders: { formats: ['json'], of: () => new JsonEncoder() },
    openSource: () => {
      const source = sources.shift();
      if (!source) throw new Error('the test opened more sessions than it prepared');
      opened.push(source);
      return source;
    },
    openProducer: () => producer,
  });
  const stateMetric = async () => (await metrics.state.get()).values.find((value) => value.value === 1)?.labels.state;
  return { relay, producer, opened, stateMetric, metrics };
}

const streaming = () => new FakeSource(async () => at(100));
const busy = () => new FakeSource(async () => { throw new RelayError('SOURCE_SLOT_BUSY', 'in use'); });

function oneEventTransaction(commit: number, end: number, eventId: string): SourceMessage[] {
  const commitTime = new Date();
  return [
    { kind: 'begin', commitLsn: at(commit), commitTime },
    { kind: 'insert', relation: TABLE, row: { event_id: eventId, aggregate_type: 'invoice', aggregate_id: 'inv_1', event_type: 'invoice.paid', payload: '{}', headers: null, created_at: null } },
    { kind: 'commit', commitLsn: at(commit), endLsn: at(end), commitTime },
  ];
}

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  expect(condition()).toBe(true);
}

describe('Relay metrics', () => {
  it('counts what Kafka acknowledged by topic, event type and outbox, however the series interleave, and never a dead letter', async () => {
    const source = streaming();
    const { relay, producer, metrics } = relayWith([source]);
    const stop = new AbortController();
    const running = relay.run(stop.signal);
    await until(() => relay.state === 'active');
    const row = (n: number, aggregateType: string, eventType: string) => ({
      kind: 'insert' as const,
      relation: TABLE,
      row: { event_id: `evt_${n}`, aggregate_type: aggregateType, aggregate_id: 'inv_1', event_type: eventType, payload: '{}', headers: null, created_at: null },
    });
    const kinds: [string, string][] = [['invoice', 'invoice.paid'], ['invoice', 'invoice.paid'], ['invoice', 'invoice.voided'], ['payment', 'invoice.paid'], ['invoice', 'invoice.paid'], ['invoice', ''], ['invoice', 'invoice.voided']];
    const commitTime = new Date();
    source.push({ kind: 'begin', commitLsn: at(110), commitTime }, ...kinds.map(([type, event], n) => row(n, type, event)), { kind: 'commit', commitLsn: at(110), endLsn: at(150), commitTime });
    await until(() => producer.produced.length === kinds.length);
    stop.abort();
    expect(await running).toBe(true);
    const counted = (await metrics.published.get()).values.map(({ labels, value }) => `${labels.topic} ${labels.event_type} ${labels.outbox} ${value}`).sort();
    // The row without an event type is a dead letter: produced, but not counted as published.
    expect(counted).toEqual(['outbox.invoice invoice.paid public.event_outbox 3', 'outbox.invoice invoice.voided public.event_outbox 2', 'outbox.payment invoice.paid public.event_outbox 1']);
  });
});

describe('Relay lifecycle', () => {
  it('streams, and on stop drains, confirms the last end LSN, closes the session and ends "stopped"', async () => {
    const source = streaming();
    const { relay, producer, stateMetric } = relayWith([source]);
    const stop = new AbortController();
    const running = relay.run(stop.signal);
    await until(() => relay.state === 'active');
    source.push(...oneEventTransaction(110, 150, 'evt_1'));
    await until(() => producer.produced.length === 1);
    stop.abort();
    expect(await running).toBe(true);
    expect(source.statuses.at(-1)).toBe(at(150));
    expect(source.closed).toBe(true);
    expect(relay.state).toBe('stopped');
    expect(await stateMetric()).toBe('stopped');
  });

  it('waits as a standby while the slot is busy, then takes over', async () => {
    const source = streaming();
    const { relay, stateMetric } = relayWith([busy(), busy(), source]);
    const stop = new AbortController();
    const running = relay.run(stop.signal);
    await until(() => relay.state === 'active');
    expect(await stateMetric()).toBe('active');
    stop.abort();
    expect(await running).toBe(true);
  });

  it('stopped while it cannot connect, it says nothing was in flight and reports a clean stop', async () => {
    const stop = new AbortController();
    const unreachable = new FakeSource(async () => {
      stop.abort();
      throw new RelayError('SOURCE_DISCONNECTED', 'connection refused');
    });
    const { relay } = relayWith([unreachable]);
    expect(await relay.run(stop.signal)).toBe(true);
    expect(relay.state).toBe('stopped');
  });

  it('stops with the error on a failure reconnecting cannot cure (a bug, exit 1), instead of looping', async () => {
    const source = streaming();
    const { relay } = relayWith([source]);
    const running = relay.run(new AbortController().signal);
    await until(() => relay.state === 'active');
    source.abort(new RelayError('INTERNAL', 'broken invariant'));
    await expect(running).rejects.toMatchObject({ code: 'INTERNAL' });
    expect(relay.state).toBe('stopped');
  });

  it('stops as INTERNAL, naming it, on an error nobody classified (a bug in a stage), instead of reconnecting into it', async () => {
    const source = streaming();
    const { relay } = relayWith([source]);
    const running = relay.run(new AbortController().signal);
    await until(() => relay.state === 'active');
    source.abort(new TypeError("Cannot read properties of undefined (reading 'eventId')"));
    await expect(running).rejects.toMatchObject({ code: 'INTERNAL', retriable: false, message: expect.stringMatching(/^an error the relay does not classify \(TypeError: Cannot read properties of undefined \(reading 'eventId'\)\) ended the session: a bug/) });
    expect(relay.state).toBe('stopped');
  });

  it.each([
    ['a retriable failure of its own (a silent connection)', new RelayError('SOURCE_TIMEOUT', 'silent')],
    ['a socket reset', Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', syscall: 'read' })],
    ["pg's closed connection", new Error('Connection terminated unexpectedly')],
    ['a name that does not resolve for now', Object.assign(new Error('getaddrinfo EAI_AGAIN db.internal'), { code: 'EAI_AGAIN', syscall: 'getaddrinfo' })],
    ["pg's failed TLS set-up", new Error('There was an error establishing an SSL connection')],
    ['a server shutting down', Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01', severity: 'FATAL' })],
  ])('resumes in a new session, from the position the slot confirmed, after %s', async (_what, failure) => {
    const first = streaming();
    const second = streaming();
    const { relay, opened } = relayWith([first, second]);
    const stop = new AbortController();
    const running = relay.run(stop.signal);
    await until(() => relay.state === 'active');
    first.abort(failure);
    await until(() => opened.length === 2 && relay.state === 'active');
    expect(first.closed).toBe(true);
    stop.abort();
    expect(await running).toBe(true);
  });

  it('never confirms past an event Kafka did not acknowledge: a failed batch restarts the session', async () => {
    const first = streaming();
    const second = streaming();
    const producer = new FakeProducer();
    producer.failWith = new RelayError('SINK_PUBLISH', 'NOT_ENOUGH_REPLICAS');
    const { relay, opened } = relayWith([first, second], producer);
    const stop = new AbortController();
    const running = relay.run(stop.signal);
    await until(() => relay.state === 'active');
    first.push(...oneEventTransaction(110, 150, 'evt_1'));
    await until(() => opened.length === 2);
    expect(first.statuses.every((lsn) => lsn === at(100))).toBe(true);
    stop.abort();
    await running;
  });
});

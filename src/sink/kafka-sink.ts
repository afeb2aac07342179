import type { Logger } from 'pino';
import { RelayError } from '../errors.js';
import type { OutgoingMessage } from '../kafka/record.js';
import { Fifo } from '../fifo.js';
import type { RecordProducer } from '../kafka/ports.js';
import { finishesWithin } from '../time.js';
import { RECORD_BATCH_OVERHEAD } from '../kafka/record-size.js';

/** How long `stop()` waits for the request in flight before disconnecting anyway. */
const STOP_WAIT_MS = 5_000;
/**
 * Exactly-once: a transaction goes on to the next request while a backlog waits, up to these
 * bounds; its per-transaction cost (adding partitions, the commit and its markers) is then
 * shared by several requests. With no backlog it commits after each request (latency first).
 */
const TRANSACTION_MAX_REQUESTS = 8;
const TRANSACTION_MAX_MS = 200;

/** Where the pipeline hands records: what Pipeline and replay depend on. */
export interface EventSink {
  /** Messages accepted and not yet acknowledged. */
  readonly buffered: number;
  /** Accepts a message; throws the sink's failure if it failed. */
  send(message: OutgoingMessage): void;
  /** Resolves once fewer than `limit` messages are buffered; rejects if the sink failed. */
  waitForRoom(limit: number): Promise<void>;
  /** Resolves when everything sent so far is acknowledged; rejects if the sink failed. */
  drain(): Promise<void>;
}

export interface KafkaSinkOptions {
  readonly producer: RecordProducer;
  readonly batchMaxEvents: number;
  /**
   * How long (ms) an event waits for others before the request that carries it is sent, unless
   * a batch fills first. A request costs the relay and the broker about the same CPU for 1 event
   * as for 100: without a wait, a steady 1,000 events/s is 1,000 requests/s. It applies while a
   * request is in flight too: sending the moment an acknowledgement arrives would make requests
   * as small as the round trip is short (draining single-row transactions on loopback: about 30
   * events per request, against about 500 with the 5 ms default), and their cost is taken from
   * the cores that decode the WAL.
   */
  readonly lingerMs: number;
  /**
   * Most record bytes in one produce request. The broker refuses a partition's record batch
   * over its max.message.bytes, and a refused batch would be retried forever; a request no
   * larger than that keeps every partition's batch under it.
   */
  readonly batchMaxBytes: number;
  readonly logger: Logger;
  /** Called with each batch once Kafka acknowledged all of it (acks=all), in send order. */
  readonly onAcknowledged: (batch: readonly OutgoingMessage[]) => void;
  /**
   * Called once when a batch failed after the producer's retries. The sink also rejects its
   * next send or wait, but with no new events there is none: this ends the session at once.
   */
  readonly onFailure?: (error: RelayError) => void;
}

/**
 * Batches records for the producer. One produce request in flight at a time: a request's
 * retries finish before the next request starts, so retries can never reorder a partition;
 * the next batch accumulates meanwhile, which is where throughput comes from.
 * A request that fails after the producer's own retries fails the sink: the relay restarts the
 * stream from the confirmed position rather than skip anything.
 */
export class KafkaSink implements EventSink {
  private readonly queue = new Fifo<OutgoingMessage>();
  private inFlight: readonly OutgoingMessage[] = [];
  /** Exactly-once: requests Kafka acknowledged in the open transaction, not yet committed. */
  private uncommitted: (readonly OutgoingMessage[])[] = [];
  private uncommittedEvents = 0;
  private transactionStartedAt = 0;
  /** A request or a commit is in flight. */
  private busy = false;
  private failure: RelayError | null = null;
  /** Cancels the scheduled pump; null when none is scheduled. */
  private cancelPump: (() => void) | null = null;
  private waiters: (() => void)[] = [];
  /** Settles (never rejects) when the request in flight does. */
  private inFlightRequest: Promise<void> | null = null;
  /** When the oldest queued event was queued (Date.now()), or earlier: it bounds its linger. */
  private queuedSince = 0;

  constructor(private readonly options: KafkaSinkOptions) {}

  async start(): Promise<void> {
    await this.options.producer.connect();
  }

  get buffered(): number {
    return this.queue.length + this.inFlight.length + this.uncommittedEvents;
  }

  send(message: OutgoingMessage): void {
    if (this.failure) throw this.failure;
    if (this.queue.length === 0 && this.options.lingerMs > 0) this.queuedSince = Date.now();
    this.queue.push(message);
    if (this.queue.length >= this.options.batchMaxEvents) this.pump();
    else this.schedulePump();
  }

  async waitForRoom(limit: number): Promise<void> {
    while (this.buffered >= limit) await this.nextChange();
  }

  async drain(): Promise<void> {
    this.pump();
    while (this.buffered > 0) await this.nextChange();
  }

  /**
   * Disconnects once the request in flight settled (bounded): disconnecting under it would let
   * the client reconnect to finish it, after the next session already sent those events again.
   */
  async stop(): Promise<void> {
    this.cancelScheduledPump();
    if (this.inFlightRequest) await finishesWithin(this.inFlightRequest, STOP_WAIT_MS);
    await this.options.producer.disconnect();
  }

  /** With none in flight, the next request goes after `delayMs` (the linger); with one in flight, once it is acknowledged. */
  private schedulePump(delayMs = this.options.lingerMs): void {
    if (this.cancelPump || this.busy) return;
    const run = () => {
      this.cancelPump = null;
      this.pump();
    };
    if (delayMs > 0) {
      const timer = setTimeout(run, delayMs);
      this.cancelPump = () => clearTimeout(timer);
    } else {
      const immediate = setImmediate(run);
      this.cancelPump = () => clearImmediate(immediate);
    }
  }

  private cancelScheduledPump(): void {
    this.cancelPump?.();
    this.cancelPump = null;
  }

  private pump(): void {
    if (this.busy || this.failure) return;
    if (this.uncommitted.length > 0 && !this.transactionGoesOn()) {
      this.commit();
      return;
    }
    if (this.queue.length === 0) return;
    this.cancelScheduledPump();
    const batch = this.takeBatch();
    this.inFlight = batch;
    this.request(this.options.producer.produce(batch), () => {
      this.inFlight = [];
      if (this.options.producer.commit) {
        if (this.uncommitted.length === 0) this.transactionStartedAt = Date.now();
        this.uncommitted.push(batch);
        this.uncommittedEvents += batch.length;
        return [];
      }
      return [batch];
    });
  }

  /**
   * A full batch, a transaction to go on with or commit, or events that have lingered go now;
   * younger events wait out the rest of their linger.
   */
  private pumpAfterAcknowledgement(): void {
    const { lingerMs, batchMaxEvents } = this.options;
    const waited = lingerMs > 0 && this.queue.length > 0 ? Date.now() - this.queuedSince : lingerMs;
    if (waited >= lingerMs || this.queue.length >= batchMaxEvents || this.uncommitted.length > 0) this.pump();
    else this.schedulePump(lingerMs - waited);
  }

  /** Exactly-once: another request in the open transaction, rather than committing it now. */
  private transactionGoesOn(): boolean {
    return this.queue.length >= this.options.batchMaxEvents / 2 && this.uncommitted.length < TRANSACTION_MAX_REQUESTS && Date.now() - this.transactionStartedAt < TRANSACTION_MAX_MS;
  }

  private commit(): void {
    this.request(this.options.producer.commit!(), () => {
      const committed = this.uncommitted;
      this.uncommitted = [];
      this.uncommittedEvents = 0;
      return committed;
    });
  }

  /** One request (or commit) in flight; `done` says which batches it made delivered. */
  private request(request: Promise<void>, done: () => (readonly OutgoingMessage[])[]): void {
    this.busy = true;
    this.inFlightRequest = request.then(() => undefined, () => undefined);
    request.then(
      () => {
        this.busy = false;
        try {
          for (const batch of done()) this.options.onAcknowledged(batch);
        } catch (error) {
          // A broken invariant downstream (the checkpoint): the session ends with it, loudly.
          this.fail(error instanceof RelayError ? error : new RelayError('INTERNAL', `acknowledging a batch failed: ${(error as Error).message}`, { cause: error }));
          return;
        }
        this.pumpAfterAcknowledgement();
        this.notify();
      },
      (error: RelayError) => this.fail(error),
    );
  }

  /**
   * The oldest messages, up to the count and byte limits; always at least one. The byte limit is
   * the smallest max.message.bytes among the batch's topics: one partition may hold all of it.
   */
  private takeBatch(): OutgoingMessage[] {
    const batch: OutgoingMessage[] = [];
    let bytes = RECORD_BATCH_OVERHEAD;
    let limit = this.options.batchMaxBytes;
    for (let next = this.queue.peek(); next !== undefined; next = this.queue.peek()) {
      const withNext = Math.min(limit, next.batchLimit);
      if (batch.length > 0 && (batch.length >= this.options.batchMaxEvents || bytes + next.size > withNext)) break;
      batch.push(next);
      bytes += next.size;
      limit = withNext;
      this.queue.shift();
    }
    return batch;
  }

  private fail(error: RelayError): void {
    this.failure = error;
    this.options.onFailure?.(error);
    this.notify();
  }

  private async nextChange(): Promise<void> {
    if (this.failure) throw this.failure;
    await new Promise<void>((resolve) => this.waiters.push(resolve));
    if (this.failure) throw this.failure;
  }

  private notify(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }
}

import { KAFKAJS_VERSION, verifyKafkajsPatches, type KafkajsPatch } from './kafkajs-patches.js';
import { kafkaErrorName, PRODUCE_REQUEST_FAILED } from './kafkajs-send-messages.js';
import { Kafka, logLevel as kafkaLogLevel, type Message, type Producer, type TopicMessages } from 'kafkajs';
import type { Logger } from 'pino';
import type { RelayConfig } from '../config/options.js';
import { RelayError } from '../errors.js';
import type { OutgoingMessage } from '../event.js';
import { Fifo } from '../fifo.js';
import { keyHashPartitioner } from './partitioner.js';
import { TopicDurabilityCheck } from './topic-durability.js';
import { RECORD_BATCH_OVERHEAD } from './record-size.js';

/** The sink options that come from the relay's configuration. */
export function sinkOptions(config: RelayConfig): Pick<KafkaSinkOptions, 'brokers' | 'batchMaxEvents' | 'batchMaxBytes' | 'lingerMs' | 'fastEncoder'> {
  return { brokers: config.kafkaBrokers, batchMaxEvents: config.batchMaxEvents, batchMaxBytes: config.maxMessageBytes, lingerMs: config.linger, fastEncoder: config.kafkaFastEncoder };
}

export interface KafkaSinkOptions {
  readonly brokers: readonly string[];
  readonly clientId: string;
  readonly batchMaxEvents: number;
  /**
   * With no request in flight, how long (ms) to wait for more events before sending one. A
   * request costs the same CPU for 1 event as for 100: without a wait, a steady 1,000 events/s
   * is 1,000 requests/s. Under load a request is always in flight and this never applies.
   */
  readonly lingerMs: number;
  /**
   * Most record bytes in one produce request. The broker refuses a partition's record batch
   * over its max.message.bytes, and a refused batch would be retried forever; a request no
   * larger than that keeps every partition's batch under it.
   */
  readonly batchMaxBytes: number;
  /** The relay's Produce request encoder (true) or kafkajs's own. */
  readonly fastEncoder: boolean;
  readonly logger: Logger;
  /** Called with each batch once Kafka acknowledged all of it (acks=all), in send order. */
  readonly onAcknowledged: (batch: readonly OutgoingMessage[]) => void;
  /**
   * Called once when a batch failed after the producer's retries. The sink also rejects its
   * next send or wait, but with no new events there is none: this ends the session at once.
   */
  readonly onFailure?: (error: RelayError) => void;
  /** Called for each produce request Kafka refused or did not answer (its partitions are retried), with Kafka's error name. */
  readonly onProduceError?: (error: string) => void;
}

/**
 * The Kafka side of the pipeline. One produce request in flight at a time: a request's
 * retries finish before the next request starts, so retries can never reorder a partition;
 * the next batch accumulates meanwhile, which is where throughput comes from.
 * A request that fails after the producer's own retries fails the sink: the relay restarts the
 * stream from the confirmed position rather than skip anything.
 */
export class KafkaSink {
  private readonly producer: Producer;
  private readonly kafkajsPatches: readonly KafkajsPatch[];
  private readonly durability: TopicDurabilityCheck;
  private readonly queue = new Fifo<OutgoingMessage>();
  private inFlight: readonly OutgoingMessage[] = [];
  private failure: RelayError | null = null;
  /** Cancels the scheduled pump; null when none is scheduled. */
  private cancelPump: (() => void) | null = null;
  private waiters: (() => void)[] = [];

  constructor(private readonly options: KafkaSinkOptions) {
    const logger = options.logger;
    this.kafkajsPatches = verifyKafkajsPatches({ fastEncoder: options.fastEncoder });
    const kafka = new Kafka({
      clientId: options.clientId,
      brokers: [...options.brokers],
      logLevel: kafkaLogLevel.WARN,
      logCreator: () => ({ namespace, level, log }) => {
        const { message, ...extra } = log;
        if (message === PRODUCE_REQUEST_FAILED) options.onProduceError?.(String(extra.error));
        // Retries are limited on purpose: a batch that fails them restarts the stream from the
        // confirmed position, which is what keeps nothing lost. Not worth a warning per session.
        const expected = message.startsWith('Limiting retries for the idempotent producer');
        const method = expected ? 'debug' : level <= kafkaLogLevel.ERROR ? 'error' : 'warn';
        logger[method]({ kafkajs: namespace, ...extra }, message);
      },
      // ~23 s of retries for one batch, at most 2 s apart: a partition whose leader died is
      // sent to the new one within 2 s of the metadata naming it.
      retry: { initialRetryTime: 200, retries: 14, maxRetryTime: 2_000 },
    });
    // Idempotent with one request in flight: the broker drops duplicates of a retried request
    // and a partition's order is the send order. kafkajs requires acks=-1 for idempotence.
    this.durability = new TopicDurabilityCheck(kafka.admin(), logger);
    this.producer = kafka.producer({ createPartitioner: keyHashPartitioner, idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: true });
  }

  async start(): Promise<void> {
    this.options.logger.info({ kafkajs: KAFKAJS_VERSION, replacements: this.kafkajsPatches }, 'producer: kafkajs with the relay\'s replacements');
    try {
      await this.producer.connect();
    } catch (error) {
      throw new RelayError('SINK_PUBLISH', `cannot connect to Kafka at ${this.options.brokers.join(',')}: ${(error as Error).message}`, { retriable: true, cause: error });
    }
  }

  /** Messages accepted and not yet acknowledged. */
  get buffered(): number {
    return this.queue.length + this.inFlight.length;
  }

  send(message: OutgoingMessage): void {
    if (this.failure) throw this.failure;
    this.queue.push(message);
    if (this.queue.length >= this.options.batchMaxEvents) this.pump();
    else this.schedulePump();
  }

  /** Resolves once fewer than `limit` messages are buffered; rejects if the sink failed. */
  async waitForRoom(limit: number): Promise<void> {
    while (this.buffered >= limit) await this.nextChange();
  }

  /** Resolves when everything sent so far is acknowledged; rejects if the sink failed. */
  async drain(): Promise<void> {
    this.pump();
    while (this.buffered > 0) await this.nextChange();
  }

  async stop(): Promise<void> {
    this.cancelScheduledPump();
    await this.producer.disconnect().catch(() => undefined);
    await this.durability.stop();
  }

  /** The next request goes when the current one is acknowledged, or after the linger if none is in flight. */
  private schedulePump(): void {
    if (this.cancelPump || this.inFlight.length > 0) return;
    const run = () => {
      this.cancelPump = null;
      this.pump();
    };
    if (this.options.lingerMs > 0) {
      const timer = setTimeout(run, this.options.lingerMs);
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
    if (this.inFlight.length > 0 || this.queue.length === 0 || this.failure) return;
    this.cancelScheduledPump();
    const batch = this.takeBatch();
    this.inFlight = batch;
    const topicMessages = groupByTopic(batch);
    this.producer.sendBatch({ acks: -1, timeout: 30_000, topicMessages }).then(
      () => {
        this.inFlight = [];
        // Checked once each topic exists (a first batch may have created it).
        this.durability.checkNew(topicMessages.map(({ topic }) => topic));
        this.options.onAcknowledged(batch);
        this.pump();
        this.notify();
      },
      (error: unknown) => {
        this.failure = new RelayError('SINK_PUBLISH', `Kafka did not acknowledge a batch of ${batch.length}: ${kafkaErrorName(error)}: ${(error as Error).message}`, { retriable: true, cause: error });
        this.options.onFailure?.(this.failure);
        this.notify();
      },
    );
  }

  /** The oldest messages, up to the count and byte limits; always at least one. */
  private takeBatch(): OutgoingMessage[] {
    const batch: OutgoingMessage[] = [];
    let bytes = RECORD_BATCH_OVERHEAD;
    for (let next = this.queue.peek(); next !== undefined; next = this.queue.peek()) {
      if (batch.length > 0 && (batch.length >= this.options.batchMaxEvents || bytes + next.size > this.options.batchMaxBytes)) break;
      batch.push(next);
      bytes += next.size;
      this.queue.shift();
    }
    return batch;
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

function groupByTopic(batch: readonly OutgoingMessage[]): TopicMessages[] {
  const byTopic = new Map<string, Message[]>();
  for (const message of batch) {
    let messages = byTopic.get(message.topic);
    if (!messages) byTopic.set(message.topic, (messages = []));
    // The message itself: kafkajs reads key, value and headers (and partition, timestamp: unset).
    messages.push(message);
  }
  return [...byTopic].map(([topic, messages]) => ({ topic, messages }));
}

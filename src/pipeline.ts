import type { Logger } from 'pino';
import type { Checkpointer } from './checkpoint/checkpointer.js';
import type { CommitTracker, TrackedTransaction } from './checkpoint/commit-tracker.js';
import type { RelayConfig } from './config/options.js';
import type { RowDecoder } from './decode/row-decoder.js';
import type { PayloadEncoder } from './encode/encoder.js';
import { PoisonEventError, RelayError } from './errors.js';
import type { OutboxEvent, OutgoingMessage } from './event.js';
import type { RelayMetrics } from './observe/metrics.js';
import type { RelationRef, SourceMessage } from './source/messages.js';
import { deadLetterMessage } from './sink/dead-letter.js';
import { eventHeaders } from './sink/headers.js';
import { RECORD_BATCH_OVERHEAD, recordSize } from './sink/record-size.js';
import type { EventSink } from './sink/kafka-sink.js';
import type { TopicRouter } from './sink/topic-router.js';

export function pipelineOptions(config: RelayConfig): PipelineOptions {
  return {
    table: config.table,
    deadLetterTopic: config.deadLetterTopic,
    onPoison: config.onPoison,
    onUnexpectedChange: config.onUnexpectedChange,
    maxBufferedEvents: config.maxBufferedEvents,
    maxMessageBytes: config.maxMessageBytes,
    columns: { eventId: config.columnEventId, aggregateId: config.columnAggregateId },
  };
}

export interface PipelineOptions {
  readonly table: RelationRef;
  readonly deadLetterTopic: string;
  readonly onPoison: 'dead-letter' | 'fail';
  readonly onUnexpectedChange: 'warn' | 'fail';
  readonly maxBufferedEvents: number;
  readonly maxMessageBytes: number;
  readonly columns: { readonly eventId: string; readonly aggregateId: string };
}

export interface PipelineStages {
  /** Keepalives go here: the position they carry, and a reply when the server asks. */
  readonly checkpointer: Checkpointer;
  /** Transactions and their events are registered here before they reach the sink. */
  readonly tracker: CommitTracker;
  readonly decoder: RowDecoder;
  readonly router: TopicRouter;
  /** The largest record each topic takes (and whether it exists). */
  readonly topics: { recordLimit(topic: string): number | Promise<number> };
  readonly encoder: PayloadEncoder;
  readonly sink: EventSink;
  readonly metrics: RelayMetrics;
  readonly logger: Logger;
}

/**
 * Source message -> Kafka record, in commit order. Every event is registered with the commit
 * tracker before it reaches the sink, so no position is confirmed ahead of its events.
 */
export class Pipeline {
  private transaction: TrackedTransaction | null = null;
  private readonly tableName: string;

  constructor(
    private readonly options: PipelineOptions,
    private readonly stages: PipelineStages,
  ) {
    this.tableName = `${options.table.schema}.${options.table.name}`;
  }

  /**
   * Handles one message in commit order. Returns a promise only when the caller must wait
   * before the next one (a registry lookup, a full buffer, a poison event that stops the
   * relay): the common path allocates no promise per event.
   */
  handle(message: SourceMessage): Promise<void> | undefined {
    const { tracker, checkpointer } = this.stages;
    switch (message.kind) {
      case 'begin':
        this.transaction = tracker.begin(message.commitLsn, message.commitTime);
        return;
      case 'insert':
        if (this.isOutbox(message.relation)) return this.publish(message.row, this.requireTransaction());
        this.unexpected('insert', message.relation);
        return;
      case 'change':
        this.unexpected(message.operation, message.relation);
        return;
      case 'commit':
        tracker.commit(this.requireTransaction(), message.endLsn);
        this.transaction = null;
        return;
      case 'position':
        checkpointer.keepalive(message.lsn, message.replyRequested);
        return;
    }
  }

  private publish(row: Readonly<Record<string, unknown>>, transaction: TrackedTransaction): Promise<void> | undefined {
    const built = this.build(row, transaction);
    return built instanceof Promise ? built.then((message) => this.enqueue(message)) : this.enqueue(built);
  }

  private enqueue(message: OutgoingMessage): Promise<void> | undefined {
    const { tracker, sink } = this.stages;
    tracker.addEvent(message.transaction);
    sink.send(message);
    if (sink.buffered >= this.options.maxBufferedEvents) return sink.waitForRoom(this.options.maxBufferedEvents);
    return undefined;
  }

  /** Row -> record, or the dead letter that stands for it. Synchronous unless the encoder waits. */
  private build(row: Readonly<Record<string, unknown>>, transaction: TrackedTransaction): OutgoingMessage | Promise<OutgoingMessage> {
    const { decoder, router, encoder, topics } = this.stages;
    try {
      const event = decoder.decode(row);
      const topic = router(event);
      const limit = topics.recordLimit(topic);
      const value = encoder.encode(event, topic);
      const key = encoder.encodeKey ? encoder.encodeKey(event, topic) : event.aggregateId;
      if (!(value instanceof Promise) && !(key instanceof Promise) && !(limit instanceof Promise)) return this.assemble(event, topic, key, value, limit, transaction);
      return Promise.all([key, value, limit]).then(
        ([readyKey, readyValue, readyLimit]) => this.assemble(event, topic, readyKey, readyValue, readyLimit, transaction),
      ).catch((error: unknown) => this.poisonOrThrow(row, transaction, error));
    } catch (error) {
      return this.poisonOrThrow(row, transaction, error);
    }
  }

  private assemble(event: OutboxEvent, topic: string, key: Buffer | string, value: Buffer | string, limit: number, transaction: TrackedTransaction): OutgoingMessage {
    const headers = eventHeaders(event, transaction.commitLsnText);
    const size = recordSize(key, value, headers);
    this.checkSize(size, limit, topic);
    return { topic, key, value, headers, size, transaction, label: event.eventType, deadLetter: false, batchLimit: limit };
  }

  private poisonOrThrow(row: Readonly<Record<string, unknown>>, transaction: TrackedTransaction, error: unknown): OutgoingMessage | Promise<OutgoingMessage> {
    if (!(error instanceof PoisonEventError)) throw error;
    return this.poison(row, transaction, error);
  }

  private poison(row: Readonly<Record<string, unknown>>, transaction: TrackedTransaction, error: PoisonEventError): OutgoingMessage | Promise<never> {
    const position = { commitLsn: transaction.commitLsnText, table: this.tableName, code: error.code };
    if (this.options.onPoison === 'fail') {
      // Stop exactly at the poison event: everything before it is delivered and confirmed,
      // and the next run starts with the transaction that holds it.
      return this.stages.sink.drain().then(() => {
        this.stages.logger.error({ ...position, eventId: row[this.options.columns.eventId], reason: error.message }, 'poison event; stopping as OUTBOX_ON_POISON=fail');
        throw new RelayError(error.code, `poison event at ${position.commitLsn}: ${error.message}`, { cause: error });
      });
    }
    // A schema mismatch names the offending value, which is billing data: only at debug.
    const reason = error.code === 'ENCODE_SCHEMA_MISMATCH' ? 'the payload does not fit its schema (the path is in the dead-letter headers)' : error.message;
    this.stages.logger.warn({ ...position, eventId: row[this.options.columns.eventId], reason }, 'poison event sent to the dead-letter topic');
    this.stages.logger.debug({ ...position, reason: error.message }, 'poison event reason');
    this.stages.metrics.deadLettered.inc({ reason: error.code });
    return deadLetterMessage({
      maxBytes: this.options.maxMessageBytes,
      topic: this.options.deadLetterTopic,
      row,
      error,
      transaction,
      table: this.tableName,
      eventIdColumn: this.options.columns.eventId,
      aggregateIdColumn: this.options.columns.aggregateId,
    });
  }

  /**
   * A record the broker would refuse would fail its batch on every retry: stop it here instead.
   * `limit` is the smaller of OUTBOX_MAX_MESSAGE_BYTES and the topic's max.message.bytes.
   */
  private checkSize(size: number, limit: number, topic: string): void {
    if (size > limit - RECORD_BATCH_OVERHEAD) {
      const bound = limit < this.options.maxMessageBytes ? `topic ${topic}'s max.message.bytes (${limit})` : `OUTBOX_MAX_MESSAGE_BYTES (${limit})`;
      throw new PoisonEventError('SINK_TOO_LARGE', `record of ${size} bytes for topic ${topic} exceeds ${bound}; raise it (and the other bound if needed), then replay the event`, { details: { topic, size, limit } });
    }
  }

  private unexpected(operation: string, relation: RelationRef): void {
    const what = `${operation} on ${relation.schema}.${relation.name}`;
    if (this.options.onUnexpectedChange === 'fail') {
      throw new RelayError('SOURCE_UNEXPECTED_CHANGE', `unexpected ${what}: the publication should publish only inserts into ${this.tableName}`);
    }
    this.stages.logger.warn({ operation, relation: `${relation.schema}.${relation.name}` }, 'ignoring a change the relay does not publish (check the publication)');
  }

  private isOutbox(relation: RelationRef): boolean {
    return relation.name === this.options.table.name && relation.schema === this.options.table.schema;
  }

  private requireTransaction(): TrackedTransaction {
    if (!this.transaction) throw new RelayError('SOURCE_PROTOCOL', 'row or commit outside a transaction');
    return this.transaction;
  }
}


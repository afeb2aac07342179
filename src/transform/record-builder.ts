import type { Logger } from 'pino';
import type { TrackedTransaction } from '../checkpoint/commit-tracker.js';
import { PoisonEventError, RelayError } from '../errors.js';
import type { OutboxEvent } from '../event.js';
import type { OutgoingMessage } from '../kafka/record.js';
import type { RelayMetrics } from '../observe/metrics.js';
import type { RowValues } from '../source/messages.js';
import { deadLetterMessage } from './dead-letter.js';
import { eventHeaders } from './headers.js';
import { encodeHeaders } from '../kafka/record-format.js';
import { RECORD_BATCH_OVERHEAD, recordSize } from '../kafka/record-size.js';
import type { OutboxRoute } from './outbox-routes.js';

export interface RecordBuilderOptions {
  readonly deadLetterTopic: string;
  readonly onPoison: 'dead-letter' | 'fail';
  readonly maxMessageBytes: number;
}

export interface RecordBuilderStages {
  /** The largest record each topic takes (and whether it exists). */
  readonly topics: { recordLimit(topic: string): number | Promise<number> };
  readonly metrics: RelayMetrics;
  readonly logger: Logger;
}

/**
 * Thrown instead of a dead letter when OUTBOX_ON_POISON=fail: the pipeline delivers everything
 * before the event, then stops with `error` (so the next run starts at its transaction).
 */
export class PoisonStop extends Error {
  constructor(
    readonly error: RelayError,
    /** Where the event is, for the log line: commit LSN, outbox, code, event id. */
    readonly position: Readonly<Record<string, unknown>>,
  ) {
    super(error.message, { cause: error });
  }
}

/**
 * Outbox row or message -> Kafka record: decode, route and encode (by its outbox's route),
 * headers, size check; an event that cannot be a record (PoisonEventError anywhere on the way)
 * becomes the dead letter that stands for it.
 * Other errors (a registry that cannot be reached) are thrown: nothing is dead-lettered for them.
 */
export class RecordBuilder {
  /** The outbox that first wrote each topic: its format is the topic's (see `claim`). */
  private readonly topicWriters = new Map<string, OutboxRoute>();

  constructor(
    private readonly options: RecordBuilderOptions,
    private readonly stages: RecordBuilderStages,
  ) {}

  /**
   * `position`: the row's place among its transaction's outbox rows, from 1. Synchronous unless
   * the encoder or the topic lookup must wait: no promise per event on the common path.
   */
  build(outbox: OutboxRoute, values: RowValues, transaction: TrackedTransaction, position: number): OutgoingMessage | Promise<OutgoingMessage> {
    const { topics } = this.stages;
    const { encoder } = outbox;
    try {
      const event = outbox.decode(values);
      const topic = outbox.route(event);
      this.claim(topic, outbox);
      const limit = topics.recordLimit(topic);
      const value = encoder.encode(event, topic);
      const key = encoder.encodeKey ? encoder.encodeKey(event, topic) : event.aggregateId;
      if (!(value instanceof Promise) && !(key instanceof Promise) && !(limit instanceof Promise)) return this.assemble(outbox, event, topic, key, value, limit, transaction, position);
      return Promise.all([key, value, limit]).then(
        ([readyKey, readyValue, readyLimit]) => this.assemble(outbox, event, topic, readyKey, readyValue, readyLimit, transaction, position),
      ).catch((error: unknown) => this.poisonOrThrow(outbox, values, transaction, position, error));
    } catch (error) {
      return this.poisonOrThrow(outbox, values, transaction, position, error);
    }
  }

  private assemble(outbox: OutboxRoute, event: OutboxEvent, topic: string, key: Buffer | string, value: Buffer | string, limit: number, transaction: TrackedTransaction, position: number): OutgoingMessage {
    const headers = eventHeaders(event, transaction.commitLsnText, outbox.name);
    const headerBlock = encodeHeaders(headers);
    const size = recordSize(key, value, headerBlock);
    this.checkSize(size, limit, topic, outbox);
    return { topic, key, value, headers, headerBlock, size, transaction, position, label: event.eventType, outbox: outbox.declared, deadLetter: false, batchLimit: limit };
  }

  /**
   * A record the broker would refuse would fail its batch on every retry: stop it here instead.
   * `limit` is the smaller of OUTBOX_MAX_MESSAGE_BYTES and the topic's max.message.bytes.
   */
  private checkSize(size: number, limit: number, topic: string, outbox: OutboxRoute): void {
    if (size > limit - RECORD_BATCH_OVERHEAD) {
      const bound = limit < this.options.maxMessageBytes ? `topic ${topic}'s max.message.bytes (${limit})` : `OUTBOX_MAX_MESSAGE_BYTES (${limit})`;
      throw new PoisonEventError('SINK_TOO_LARGE', `record of ${size} bytes for topic ${topic} exceeds ${bound}; raise it (and the other bound if needed), then ${outbox.again}`, { details: { topic, size, limit } });
    }
  }

  /**
   * One topic, one format: consumers of a topic read one format, so a topic written as JSON by
   * one outbox is not written as Avro by another. Equal templates with no placeholder are
   * refused at start; templates whose placeholders make them meet (billing's events.{event_type}
   * and payments' events.{aggregate_type}) only meet by the events' values, so the first outbox
   * to write a topic since the relay started sets its format, and an event of another format for
   * it is a dead letter naming both: nothing lost, every other event streams on.
   */
  private claim(topic: string, outbox: OutboxRoute): void {
    const writer = this.topicWriters.get(topic);
    if (writer === undefined) this.topicWriters.set(topic, outbox);
    else if (writer.encoder.format !== outbox.encoder.format) {
      throw new PoisonEventError(
        'ROUTE_FORMAT_CONFLICT',
        `topic ${topic} is written as ${writer.encoder.format} by outbox ${writer.name} (topic template "${writer.topicTemplate}"); outbox ${outbox.name} (topic template "${outbox.topicTemplate}") would write it as ${outbox.encoder.format}: its consumers would read two formats. Give one of them a "topicTemplate" of its own in OUTBOX_SOURCES (or both the same "format"), then ${outbox.again}`,
        { details: { topic, outbox: outbox.name, writer: writer.name } },
      );
    }
  }

  private poisonOrThrow(outbox: OutboxRoute, values: RowValues, transaction: TrackedTransaction, position: number, error: unknown): OutgoingMessage {
    if (!(error instanceof PoisonEventError)) throw error;
    const { options, stages } = this;
    const event = outbox.poisoned(values);
    const where = { commitLsn: transaction.commitLsnText, outbox: outbox.name, code: error.code, eventId: event.eventId };
    if (options.onPoison === 'fail') {
      throw new PoisonStop(new RelayError(error.code, `poison event at ${where.commitLsn}: ${error.message}`, { cause: error }), where);
    }
    // A schema mismatch names the offending value, which is billing data: only at debug.
    const reason = error.code === 'ENCODE_SCHEMA_MISMATCH' ? 'the payload does not fit its schema (the path is in the dead-letter headers)' : error.message;
    stages.logger.warn({ ...where, reason }, 'poison event sent to the dead-letter topic');
    stages.logger.debug({ ...where, reason: error.message }, 'poison event reason');
    stages.metrics.deadLettered.inc({ reason: error.code });
    return deadLetterMessage({
      maxBytes: options.maxMessageBytes,
      topic: options.deadLetterTopic,
      event,
      error,
      transaction,
      position,
      source: outbox.name,
      declared: outbox.declared,
    });
  }
}

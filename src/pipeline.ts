import type { Logger } from 'pino';
import type { Checkpointer } from './checkpoint/checkpointer.js';
import type { CommitTracker, TrackedTransaction } from './checkpoint/commit-tracker.js';
import { RelayError } from './errors.js';
import { formatLsn, type Lsn } from './lsn.js';
import type { OutgoingMessage } from './kafka/record.js';
import type { RelationRef, RowValues, SourceMessage } from './source/messages.js';
import type { OutboxRoute, OutboxRoutes } from './transform/outbox-routes.js';
import type { EventSink } from './sink/kafka-sink.js';
import { covers, type ResumePoint } from './sink/progress.js';
import { PoisonStop, type RecordBuilder } from './transform/record-builder.js';

export interface PipelineOptions {
  readonly onUnexpectedChange: 'warn' | 'fail';
  readonly maxBufferedEvents: number;
}

export interface PipelineStages {
  /** Keepalives go here: the position they carry, and a reply when the server asks. */
  readonly checkpointer: Checkpointer;
  /** Transactions and their events are registered here before they reach the sink. */
  readonly tracker: CommitTracker;
  /** Which outbox a row or message belongs to, and how its events become records. */
  readonly routes: OutboxRoutes;
  /** Row or message -> record or dead letter. */
  readonly builder: RecordBuilder;
  readonly sink: EventSink;
  readonly logger: Logger;
  /**
   * Exactly-once: the last event a committed Kafka transaction holds. Events up to it are not
   * sent again (their transactions still reach the checkpoint); null: nothing to skip.
   */
  readonly resumeAfter?: ResumePoint | null;
}

/**
 * Moves source messages to the sink in commit order; the builder makes the records. Every
 * event is registered with the commit tracker before it reaches the sink, so no position is
 * confirmed ahead of its events.
 */
export class Pipeline {
  private transaction: TrackedTransaction | null = null;
  /** Events (rows of every outbox, messages) seen in the open transaction: the next one's place is this plus one. */
  private eventsInTransaction = 0;
  /** Events skipped as already in Kafka (exactly-once), reported once the stream passes them. */
  private skipped = 0;
  /** Relation descriptions whose ignored changes were already logged: one line each, not one per row. */
  private readonly warnedOf = new WeakSet<RelationRef>();

  constructor(
    private readonly options: PipelineOptions,
    private readonly stages: PipelineStages,
  ) {}

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
        this.eventsInTransaction = 0;
        return;
      case 'insert': {
        const outbox = this.stages.routes.forRelation(message.relation);
        if (outbox) return this.event(outbox, message.row);
        this.unexpected('insert', message.relation);
        return;
      }
      case 'message': {
        const outbox = this.stages.routes.forMessage(message.prefix, message.transactional);
        const values = { prefix: message.prefix, content: message.content } as unknown as RowValues;
        if (this.transaction) return this.event(outbox, values);
        return this.messageOnItsOwn(outbox, values, message.lsn);
      }
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

  private event(outbox: OutboxRoute, values: RowValues): Promise<void> | undefined {
    const transaction = this.requireTransaction();
    const position = ++this.eventsInTransaction;
    if (this.alreadyPublished(transaction, position)) return;
    return this.publish(outbox, values, transaction, position);
  }

  /**
   * A message outside any transaction (non-transactional: its dead letter) is tracked as a
   * transaction of its own at its LSN, ending just past it: once Kafka has its dead letter,
   * that point is confirmed, and a restart decodes from after it (Postgres skips a message
   * whose LSN is before the confirmed position).
   */
  private messageOnItsOwn(outbox: OutboxRoute, values: RowValues, lsn: Lsn): Promise<void> | undefined {
    const { tracker } = this.stages;
    const transaction = tracker.begin(lsn, new Date());
    this.transaction = transaction;
    this.eventsInTransaction = 0;
    const published = this.event(outbox, values);
    tracker.commit(transaction, (lsn + 1n) as Lsn);
    this.transaction = null;
    return published;
  }

  /** Exactly-once: whether a committed Kafka transaction already holds this event. */
  private alreadyPublished(transaction: TrackedTransaction, position: number): boolean {
    const { resumeAfter } = this.stages;
    if (!resumeAfter) return false;
    if (covers(resumeAfter, transaction.commitLsn, position)) {
      this.skipped += 1;
      return true;
    }
    if (this.skipped > 0) {
      this.stages.logger.info({ skipped: this.skipped, upTo: `${formatLsn(resumeAfter.commitLsn)} #${resumeAfter.position}` }, `exactly-once: skipped ${this.skipped} events that committed Kafka transactions already hold`);
      this.skipped = 0;
    }
    return false;
  }

  private publish(outbox: OutboxRoute, values: RowValues, transaction: TrackedTransaction, position: number): Promise<void> | undefined {
    let built;
    try {
      built = this.stages.builder.build(outbox, values, transaction, position);
    } catch (error) {
      return this.stopAtPoison(error);
    }
    return built instanceof Promise ? built.then((message) => this.enqueue(message), (error: unknown) => this.stopAtPoison(error)) : this.enqueue(built);
  }

  private enqueue(message: OutgoingMessage): Promise<void> | undefined {
    const { tracker, sink } = this.stages;
    tracker.addEvent(message.transaction);
    sink.send(message);
    if (sink.buffered >= this.options.maxBufferedEvents) return sink.waitForRoom(this.options.maxBufferedEvents);
    return undefined;
  }

  /**
   * OUTBOX_ON_POISON=fail stops exactly at the poison event: everything before it is delivered
   * and confirmed, and the next run starts with the transaction that holds it.
   */
  private stopAtPoison(error: unknown): Promise<never> {
    if (!(error instanceof PoisonStop)) throw error;
    return this.stages.sink.drain().then(() => {
      this.stages.logger.error({ ...error.position, reason: error.error.message }, 'poison event; stopping as OUTBOX_ON_POISON=fail');
      throw error.error;
    });
  }

  private unexpected(operation: string, relation: RelationRef): void {
    const what = `${operation} on ${relation.schema}.${relation.name}`;
    if (this.options.onUnexpectedChange === 'fail') {
      throw new RelayError('SOURCE_UNEXPECTED_CHANGE', `unexpected ${what}: the publication should publish only inserts into ${this.stages.routes.tableNames.join(', ')}`);
    }
    // A tenant renamed out of the pattern can send many rows before it leaves the publication.
    if (this.warnedOf.has(relation)) return;
    this.warnedOf.add(relation);
    this.stages.logger.warn({ operation, relation: `${relation.schema}.${relation.name}` }, 'ignoring changes of a table the relay does not publish (check the publication; logged once per table description)');
  }

  private requireTransaction(): TrackedTransaction {
    if (!this.transaction) throw new RelayError('SOURCE_PROTOCOL', 'row or commit outside a transaction');
    return this.transaction;
  }
}


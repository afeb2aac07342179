import type { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import type pg from 'pg';
import type { Logger } from 'pino';
import { decodeOutboxRecord, type ConsumedEvent } from '../client/consumer.js';
import { headerText } from '../client/kafkajs-headers.js';
import { MAGIC_BYTE } from '../encode/avro/wire.js';
import { errorMessage } from '../errors.js';
import { inTransaction } from '../pg-transaction.js';
import { HEADER } from '../transform/headers.js';
import { customerOf, type CustomerRule } from './customer-rule.js';
import type { DeliveryStore } from './delivery-store.js';
import { loadSubscribers, subscriptionsVersion, type LoadedEndpoints } from './endpoint-store.js';
import { eventBody } from './event-body.js';
import { SubscriptionIndex } from './event-types.js';
import { GroupedWrites } from './grouped-writes.js';
import type { EventToDeliver, Owed, OwedDeliveries, Reservation, TakenChunk } from './lifecycle.js';
import { storedEvents } from './owed-store.js';
import type { ConsumedBatch, ConsumedMessage, GroupConsumer, GroupConsumerEvents, OpenGroupConsumer, TopicLister } from '../kafka/group-consumer.js';
import { watchTopics } from './topic-watch.js';
import type { WebhookMetrics } from './metrics.js';
import type { WebhookTables } from './webhook-tables.js';

/**
 * How long the consumer waits, with every request slot taken, for an endpoint to answer or a
 * slot to free before recording a chunk without slots (its deliveries then due, for the loop to
 * claim): endpoints that hang holding every slot do not hold up the recording of the stream.
 * A second: far above a healthy endpoint's answer, and above what a busy machine holds answers
 * up for (a quarter of a second was seen with 200 requests in flight on 2 cores, and a chunk
 * recorded due keeps its endpoints' next deliveries due behind it, written twice each).
 */
const SLOT_STALL_MS = 1_000;

/** A consumed event, before the endpoints it is owed are known (they are, in the transaction recording it). */
export type DecodedEvent = Omit<EventToDeliver, 'endpointIds'> & {
  /** Whose event it is, by OUTBOX_WEBHOOK_CUSTOMER_FROM; null: not found (platform-wide endpoints only). */
  readonly customerId: string | null;
};

/** Of an event's endpoints (in id order), the first `limit` after `after` (null: from the first). */
interface FanOutSlice {
  readonly after: string | null;
  readonly limit: number;
}

/** An event to record, whole or a slice of its fan-out. */
interface EventToRecord {
  readonly event: DecodedEvent;
  readonly slice: FanOutSlice | null;
}

/** For each event recorded: for a slice with endpoints after it, the last endpoint it took; null when the event is all recorded. */
type SliceEnds = readonly (string | null)[];

/** Events without a customer are warned of at most this often (each is counted, listed and logged at debug). */
const WITHOUT_CUSTOMER_WARN_EVERY_MS = 10_000;

/** How often a topic pattern is matched again against the cluster's topics. */
const TOPIC_REFRESH_MS = 15_000;

export interface IntakeOptions {
  /** The consumer, on the client OUTBOX_KAFKA_CLIENT names. */
  readonly openConsumer: OpenGroupConsumer;
  /** Lists the cluster's topics, on the same client. */
  readonly openTopicLister: () => TopicLister;
  readonly groupId: string;
  readonly events: GroupConsumerEvents;
  readonly topics: readonly (string | RegExp)[];
  readonly pool: pg.Pool;
  readonly tables: WebhookTables;
  readonly store: DeliveryStore;
  /** Decodes Avro values (Confluent wire format); JSON values need none. */
  readonly registry: SchemaRegistry | null;
  /** How an event's customer is found (OUTBOX_WEBHOOK_CUSTOMER_FROM). */
  readonly customerRule: CustomerRule;
  readonly firstAttemptAt: () => Date;
  readonly logger: Logger;
  readonly metrics: WebhookMetrics;
  /** Called after deliveries were recorded due: the dispatcher looks for them at once. */
  readonly onRecorded: () => void;
  /**
   * The dispatcher, which takes chunks of owed deliveries of events nobody recorded before
   * (their first attempts sent before their rows are written); null when the schedule's first
   * attempt is not immediate: every delivery is then recorded due.
   */
  readonly owner: OwedDeliveries | null;
  /** Bounds one transaction: an event fanned out to thousands of endpoints is recorded in several. */
  readonly maxDeliveriesPerTransaction?: number;
}

/**
 * The consumer side: read the relay's topics (read_committed, so an aborted exactly-once
 * transaction is never an event), and for each event record a delivery per subscribed endpoint
 * — in one Postgres transaction per chunk, committed before the chunk's Kafka offsets. A crash
 * in between re-reads the chunk; the deliveries conflict on (event_id, endpoint_id) and nothing
 * is added twice. At-least-once from Kafka, exactly one delivery row per (event, endpoint).
 */
export class WebhookIntake {
  private consumer: GroupConsumer | null = null;
  /** The topics the consumer reads now, as matched against the cluster's topics. */
  private consuming: readonly string[] = [];
  private subscriptions: { version: string; index: SubscriptionIndex; endpoints: LoadedEndpoints } | null = null;
  private readonly maxDeliveries: number;
  private readonly stopped = new AbortController();
  /** Chunks recorded first (see record): each recording takes every chunk that came meanwhile, up to the bound on deliveries. */
  private readonly recordings = new GroupedWrites<readonly EventToRecord[], SliceEnds>(
    (chunks) => this.recordChunks(chunks),
    (chunks) => this.chunksWithin(chunks),
  );
  /**
   * Per partition, the last offset this process recorded in the current group generation: a
   * batch that starts after it was never recorded by anyone (the partition has been this
   * process's alone since), so its first attempts may go before their deliveries are recorded.
   * A batch that does not — the first after joining, one read again after a failure — is
   * recorded first, and what was recorded already adds nothing and is not sent again.
   */
  private readonly lastRecorded = new Map<string, bigint>();
  /** Bumped when the group rebalances or the consumer fails: lastRecorded starts over. */
  private generation = 0;
  private watching: Promise<void> = Promise.resolve();
  /** When an event without a customer was last warned of, and how many came since (logged at debug). */
  private withoutCustomerWarned = { at: 0, since: 0 };

  constructor(private readonly options: IntakeOptions) {
    this.maxDeliveries = options.maxDeliveriesPerTransaction ?? 20_000;
  }

  /**
   * Consumes the topics that match now, and, when a pattern was given, looks for new ones every
   * TOPIC_REFRESH_MS: a topic the relay creates later (a new aggregate type) is consumed from
   * its beginning without a restart.
   */
  async start(): Promise<void> {
    // Known before the first chunk, which is sized by the fan-out (each transaction checks them again).
    await this.refreshSubscriptions();
    const lister = this.options.openTopicLister();
    try {
      await this.follow(await lister.listTopics());
    } catch (error) {
      await lister.close().catch(() => undefined);
      throw error;
    }
    if (this.options.topics.some((topic) => topic instanceof RegExp)) this.watching = watchTopics(lister, TOPIC_REFRESH_MS, this.stopped.signal, (topics) => this.follow(topics), (error) => this.options.logger.warn({ err: errorMessage(error) }, 'webhooks: looking for new topics failed; trying again'));
    else await lister.close();
  }

  async stop(): Promise<void> {
    this.stopped.abort();
    await this.watching;
    await this.consumer?.stop();
  }

  /** True while some topic matches (else nothing is consumed yet, and the process is not ready). */
  get hasTopics(): boolean {
    return this.consuming.length > 0;
  }

  /** (Re)subscribes when the matching topics changed: a new consumer in the same group, at its committed offsets. */
  private async follow(clusterTopics: readonly string[]): Promise<void> {
    const matching = clusterTopics.filter((topic) => this.options.topics.some((wanted) => (typeof wanted === 'string' ? wanted === topic : wanted.test(topic)))).sort();
    if (matching.join('\n') === this.consuming.join('\n')) return;
    await this.consumer?.stop();
    this.consumer = null;
    this.consuming = matching;
    if (matching.length === 0) {
      this.options.logger.warn({ topics: this.options.topics.map(String) }, 'webhooks: no topic matches yet; looking again every 15s');
      return;
    }
    const { events } = this.options;
    const startOver = () => {
      this.generation += 1;
      this.lastRecorded.clear();
    };
    const consumer = this.options.openConsumer(this.options.groupId, {
      joined: () => {
        startOver();
        events.joined();
      },
      failed: (error) => {
        startOver();
        events.failed(error);
      },
    });
    this.consumer = consumer;
    await consumer.start(matching, (batch) => this.take(batch));
    this.options.logger.info({ topics: matching }, 'webhooks: consuming');
  }

  /**
   * A batch, every delivery of it recorded before its offsets are committed: what the store may
   * have already recorded due (recordDue), the rest handed to the dispatcher in chunks (owe: their
   * first attempts sent in its free slots, then written with their results), or, when the
   * schedule's first attempt is not immediate, all of it recorded due.
   */
  private async take(batch: ConsumedBatch): Promise<void> {
    const key = `${batch.topic}\n${batch.partition}`;
    const generation = this.generation;
    const last = this.lastRecorded.get(key);
    this.lastRecorded.delete(key);
    const first = batch.messages[0];
    if (!first) return;
    let whole: boolean;
    if (!this.options.owner) whole = await this.recordDue(batch);
    else {
      // Read again (the first batch after joining, or after a failure): what the store has already is recorded first.
      const recordedAlready = last !== undefined && BigInt(first.offset) > last ? 0 : await this.recordedPrefix(batch.messages);
      whole = recordedAlready === 0 || (await this.recordDue({ ...batch, messages: batch.messages.slice(0, recordedAlready) }));
      if (whole && recordedAlready < batch.messages.length) {
        // Who is owed what, as of now: an endpoint added before these events were produced is owed them.
        await this.refreshSubscriptions();
        whole = await this.owe(this.options.owner, { ...batch, messages: batch.messages.slice(recordedAlready) });
      }
    }
    if (whole && batch.owned() && generation === this.generation) this.lastRecorded.set(key, BigInt(batch.messages.at(-1)!.offset));
  }

  /**
   * How many of a batch's first messages may have deliveries recorded already: up to the last
   * whose event the store has. Each partition is recorded in offset order, so what was
   * recorded before (by this process or another) is a prefix of what is read again; the rest was
   * never recorded, and its first attempts may go before the recording.
   */
  private async recordedPrefix(messages: readonly ConsumedMessage[]): Promise<number> {
    const ids = messages.map((message) => headerText(message.headers)[HEADER.eventId] ?? null);
    const stored = await storedEvents(this.options.pool, this.options.tables, ids.filter((id): id is string => id !== null));
    for (let i = ids.length - 1; i >= 0; i -= 1) if (ids[i] !== null && stored.has(ids[i]!)) return i + 1;
    return 0;
  }

  /**
   * A batch nobody recorded before, handed to the dispatcher (`owner`) in chunks of owed
   * deliveries sized by its free slots (a chunk, or without any slots the bound on a
   * transaction): it leases, sends and writes each (Dispatcher.take), and once a chunk is written
   * (after every one before it) its offset is committed. The next chunk is made while the one
   * before is written. A crash before a chunk's write sends it again (its offset was not
   * committed), with the same webhook-id. False if the partition went elsewhere meanwhile.
   */
  private async owe(owner: OwedDeliveries, batch: ConsumedBatch): Promise<boolean> {
    // None before the first load: every delivery is then recorded due.
    const endpoints: LoadedEndpoints = this.subscriptions?.endpoints ?? { version: '', get: () => undefined };
    let chunk: Owed[] = [];
    let reserved: Reservation | null = null;
    /** The offset up to which every message's deliveries are in a chunk taken (null: none yet). */
    let upTo: string | null = null;
    let chunkUpTo: string | null = null;
    let last: TakenChunk | null = null;
    /** Every chunk's write, then its offset: settled in order, a failed write stops the offsets after it. */
    let committed: Promise<void> = Promise.resolve();
    const written: Promise<void>[] = [];
    const hand = async () => {
      const owed = chunk;
      const slots = reserved ?? { slots: 0 };
      const offset = upTo;
      chunk = [];
      reserved = null;
      chunkUpTo = upTo;
      if (owed.length === 0 && offset === null) {
        owner.release(slots.slots);
        return;
      }
      const taken: TakenChunk = owner.take({ owed, endpoints }, slots, last);
      last = taken;
      written.push(taken.written);
      committed = Promise.all([taken.written, committed]).then(() => (offset === null ? undefined : batch.recorded(offset)));
      committed.catch(() => undefined);
      await taken.sent;
    };
    let whole = true;
    try {
      for (const [index, message] of batch.messages.entries()) {
        if (!batch.owned()) {
          whole = false;
          break;
        }
        const event = await this.decode(batch.topic, batch.partition, message);
        for (const endpointId of event ? this.owedTo(event) : []) {
          reserved ??= await this.reserve(owner, batch.messages.length - index);
          if (chunk.length >= Math.min(this.maxDeliveries, reserved.slots || this.maxDeliveries)) {
            await hand();
            reserved = await this.reserve(owner, batch.messages.length - index);
          }
          chunk.push({ event: event!, endpointId });
        }
        upTo = message.offset;
      }
      // A partition gone elsewhere: the chunk being made is its next reader's (nothing of it was sent).
      if (whole && (chunk.length > 0 || upTo !== chunkUpTo)) await hand();
    } finally {
      if (reserved) owner.release((reserved as Reservation).slots);
      // What was sent is written (or failed) before the batch ends, whatever happened.
      await Promise.allSettled(written);
    }
    await committed;
    return whole;
  }

  /** The dispatcher's free slots for the next chunk, for at most `messages` more events; waiting a little for an event's fan-out of them. */
  private reserve(owner: OwedDeliveries, messages: number): Promise<Reservation> {
    const fanOut = this.mostFanOut;
    return owner.reserveWhenFree(fanOut, Math.min(this.maxDeliveries, messages * fanOut), SLOT_STALL_MS);
  }

  /**
   * A batch recorded due, for the dispatcher's claims to send: events the store may have
   * already (the first batch after joining, one read again after a failure: what is recorded
   * conflicts, adds nothing, and is not sent again), or every batch when the schedule's first
   * attempt is not immediate. In chunks of whole events up to the bound on a transaction; an
   * event owed to more endpoints than that, a slice of them at a time (recordFanOut). False if
   * the partition went elsewhere meanwhile.
   */
  private async recordDue(batch: ConsumedBatch): Promise<boolean> {
    const { topic, partition } = batch;
    let chunk: { message: ConsumedMessage; event: DecodedEvent | null }[] = [];
    let fannedOut = 0;
    /** False when the partition went elsewhere in the middle of an event's slices: its offset is not committed. */
    const flush = async (): Promise<boolean> => {
      if (chunk.length === 0) return true;
      const events = chunk.flatMap((item) => (item.event ? [item.event] : []));
      if (events.length === 1 && fannedOut > this.maxDeliveries) {
        if (!(await this.recordFanOut(events[0]!, batch.owned))) return false;
      } else await this.record(events.map((event) => ({ event, slice: null })));
      await batch.recorded(chunk[chunk.length - 1]!.message.offset);
      chunk = [];
      fannedOut = 0;
      return true;
    };
    for (const message of batch.messages) {
      if (!batch.owned()) return false;
      const event = await this.decode(topic, partition, message);
      const owed = event ? (this.subscriptions ? this.owedTo(event).length : 1) : 0;
      // A chunk holds whole events, and no more deliveries than one transaction records.
      if (chunk.length > 0 && fannedOut + owed > this.maxDeliveries && !(await flush())) return false;
      chunk.push({ message, event });
      fannedOut += owed;
    }
    return flush();
  }

  /**
   * An event owed to more endpoints than one transaction records: a slice of its endpoints at
   * a time, in id order. Slices are by id, not position: an endpoint removed meanwhile shifts
   * none of the others out of a slice; one added meanwhile is not owed the event anyway unless
   * its --deliver-from is earlier. A crash between slices re-reads the event (its offset was not
   * committed): the recorded slices conflict and add nothing. False if the partition went to
   * another consumer meanwhile (it records the rest).
   */
  private async recordFanOut(event: DecodedEvent, owned: () => boolean): Promise<boolean> {
    let after: string | null = null;
    for (;;) {
      const [end] = await this.record([{ event, slice: { after, limit: this.maxDeliveries } }]);
      if (end === null || end === undefined) return true;
      if (!owned()) return false;
      after = end;
    }
  }

  private async decode(topic: string, partition: number, message: ConsumedMessage): Promise<DecodedEvent | null> {
    const avro = message.value?.[0] === MAGIC_BYTE || message.key?.[0] === MAGIC_BYTE;
    const { metrics, logger } = this.options;
    if (avro && !this.options.registry) {
      metrics.undecodable.inc();
      logger.error({ topic, partition, offset: message.offset, code: 'WEBHOOK_UNDECODABLE' }, 'webhooks: an Avro record and no SCHEMA_REGISTRY_URL; skipped (it stays in Kafka: set the registry and replay it with `outbox-relay replay`)');
      return null;
    }
    let event: ConsumedEvent;
    try {
      event = await decodeOutboxRecord(topic, partition, message, avro ? this.options.registry! : undefined);
    } catch (error) {
      // Not an event (no event_id header, a value that does not decode): no endpoint can be
      // owed it. Counted and named (never its content), and left in Kafka; the stream goes on.
      metrics.undecodable.inc();
      logger.error({ topic, partition, offset: message.offset, code: 'WEBHOOK_UNDECODABLE', err: errorMessage(error) }, 'webhooks: a record that is not an outbox event; skipped (it stays in Kafka)');
      return null;
    }
    const producedAt = new Date(Number(message.timestamp));
    metrics.eventsConsumed.inc();
    const customer = customerOf(this.options.customerRule, event);
    const decoded = { eventId: event.eventId, eventType: event.eventType, aggregateId: event.aggregateId, body: eventBody(event, producedAt), producedAt, customerId: customer.customerId };
    if (customer.customerId === null) await this.recordWithoutCustomer(decoded, event.headers, customer.missing, { topic, partition, offset: message.offset });
    return decoded;
  }

  /** The endpoints an event is owed to, by the subscriptions as last loaded: its customer's and the platform-wide ones. */
  private owedTo(event: DecodedEvent): readonly string[] {
    return this.subscriptions?.index.endpointsFor(event.customerId, event.eventType, event.producedAt.getTime()) ?? [];
  }

  /**
   * An event whose customer the rule could not find goes to no customer's endpoint: it is
   * stored as such before its offset can be committed (it is awaited before the event joins a
   * chunk), counted and logged (never its content), to be listed and replayed once its customer
   * can be found. Read again, it adds nothing.
   */
  private async recordWithoutCustomer(event: DecodedEvent, headers: Readonly<Record<string, string>>, missing: string, where: { readonly topic: string; readonly partition: number; readonly offset: string }): Promise<void> {
    const { metrics, logger, store } = this.options;
    await store.recordWithoutCustomer([{ ...event, headers, reason: missing }]);
    metrics.eventsWithoutCustomer.inc();
    const fields = { ...where, eventId: event.eventId, eventType: event.eventType, reason: missing, code: 'WEBHOOK_EVENT_WITHOUT_CUSTOMER' };
    // A producer that never sets the customer would write a warning per event: one a period, with how many since.
    const now = Date.now();
    if (now - this.withoutCustomerWarned.at < WITHOUT_CUSTOMER_WARN_EVERY_MS) {
      this.withoutCustomerWarned.since += 1;
      logger.debug(fields, 'webhooks: an event whose customer is not found');
      return;
    }
    logger.warn(
      { ...fields, alsoSinceLastWarning: this.withoutCustomerWarned.since },
      "webhooks: an event whose customer is not found goes to no customer's endpoint; `webhooks without-customer` lists it, `webhooks replay --without-customer` delivers it once its customer can be found",
    );
    this.withoutCustomerWarned = { at: now, since: 0 };
  }

  /**
   * Records a chunk's deliveries due; resolves once they are committed. One transaction at a
   * time records every chunk that came meanwhile (the partitions consumed at once, up to the
   * bound on deliveries).
   */
  private record(events: readonly EventToRecord[]): Promise<SliceEnds> {
    return this.recordings.push(events);
  }

  /** How many of the queued chunks one transaction takes: as many as fit the bound on deliveries (at least one). */
  private chunksWithin(chunks: readonly (readonly EventToRecord[])[]): number {
    const fanOut = this.mostFanOut;
    const most = (events: readonly EventToRecord[]) => events.reduce((sum, { slice }) => sum + Math.min(fanOut, slice?.limit ?? fanOut), 0);
    let deliveries = 0;
    let taken = 0;
    while (taken < chunks.length && (taken === 0 || deliveries + most(chunks[taken]!) <= this.maxDeliveries)) {
      deliveries += most(chunks[taken]!);
      taken += 1;
    }
    return taken;
  }

  /** Chunks recorded in one transaction; each gets the slice ends of its own events. */
  private async recordChunks(chunks: readonly (readonly EventToRecord[])[]): Promise<SliceEnds[]> {
    const { options } = this;
    const events = chunks.flat();
    let ends: SliceEnds = [];
    const added = await inTransaction(options.pool, async (client) => {
      const index = await this.currentSubscriptions(client);
      const slices = events.map(({ event, slice }) => owedSlice(index.endpointsFor(event.customerId, event.eventType, event.producedAt.getTime()), slice));
      ends = slices.map(({ sliceEnd }) => sliceEnd);
      return options.store.record(client, events.map(({ event }, i) => ({ ...event, endpointIds: slices[i]!.endpointIds })), options.firstAttemptAt);
    });
    options.metrics.deliveriesRecorded.inc(added);
    // After the commit: a claim before it would not see them.
    if (added > 0) options.onRecorded();
    let from = 0;
    return chunks.map((chunk) => ends.slice(from, (from += chunk.length)));
  }

  /** The most endpoints one event can be owed to: the platform-wide ones and the largest customer's. */
  private get mostFanOut(): number {
    return Math.max(1, this.subscriptions?.index.mostFanOut ?? 1);
  }

  /** The subscriptions as of now, outside any transaction. */
  private async refreshSubscriptions(): Promise<void> {
    const client = await this.options.pool.connect();
    try {
      await this.currentSubscriptions(client);
    } finally {
      client.release();
    }
  }

  /** The subscriptions as of this transaction: reloaded when an endpoint was added, removed, re-subscribed or its settings changed. */
  private async currentSubscriptions(client: pg.ClientBase): Promise<SubscriptionIndex> {
    const version = await subscriptionsVersion(client, this.options.tables);
    if (this.subscriptions?.version !== version) {
      const loaded = await loadSubscribers(client, this.options.tables);
      this.subscriptions = { version: loaded.version, index: new SubscriptionIndex(loaded.subscribers), endpoints: loaded.endpoints };
      this.options.logger.info({ endpoints: loaded.subscribers.length, version: loaded.version }, 'webhooks: subscriptions loaded');
      // Added since the process started, by an earlier version's CLI or by hand: owed nothing until assigned.
      if (loaded.unassigned.length > 0) {
        this.options.logger.error({ endpoints: loaded.unassigned.slice(0, 20), count: loaded.unassigned.length, code: 'WEBHOOK_ENDPOINTS_UNASSIGNED' }, 'webhooks: endpoints that belong to no customer receive nothing: `webhooks endpoint update --id <id> --customer <customer id>` (or --platform-wide)');
      }
    }
    return this.subscriptions.index;
  }
}

/** The endpoints of `slice` (all of them without one), and where the next slice starts, if any. */
function owedSlice(endpointIds: readonly string[], slice: FanOutSlice | null): { readonly endpointIds: readonly string[]; readonly sliceEnd: string | null } {
  if (!slice) return { endpointIds, sliceEnd: null };
  const { after } = slice;
  const remaining = (after === null ? [...endpointIds] : endpointIds.filter((id) => id > after)).sort();
  const taken = remaining.slice(0, slice.limit);
  return { endpointIds: taken, sliceEnd: remaining.length > taken.length ? taken.at(-1)! : null };
}

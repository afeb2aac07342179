import type { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import type { Admin, Kafka } from 'kafkajs';
import type pg from 'pg';
import type { Logger } from 'pino';
import { decodeOutboxRecord } from '../client/consumer.js';
import { headerText } from '../client/kafkajs-headers.js';
import { HEADER } from '../transform/headers.js';
import { MAGIC_BYTE } from '../encode/avro/wire.js';
import { errorMessage } from '../errors.js';
import { inTransaction } from '../pg-transaction.js';
import { sleep } from '../time.js';
import type { ClaimedDelivery, DeliveryStore, EndpointChange, EndpointRules, EventToDeliver, FirstAttemptsToRecord, RecordedDeliveries } from './delivery-store.js';
import type { FirstAttempts, Reservation } from './dispatcher.js';
import type { ConsumedBatch, ConsumedMessage, IntakeConsumer, IntakeConsumerEvents, OpenIntakeConsumer } from './intake-consumer.js';
import { loadSubscribers, subscriptionsVersion } from './endpoint-store.js';
import { storedEvents } from './delivery-store.js';
import { eventBody } from './event-body.js';
import { SubscriptionIndex } from './event-types.js';
import type { WebhookMetrics } from './metrics.js';
import type { WebhookTables } from './webhook-tables.js';

/** Slots of the dispatcher held for deliveries being recorded leased to it. */
export interface SendAtOnce {
  /** Up to `wanted` free slots, held once `atLeast` are free or none freed for `stallMs`. */
  reserveWhenFree(atLeast: number, wanted: number, stallMs: number): Promise<Reservation>;
  /** The owner and lease to record deliveries leased with, from now. */
  lease(): { readonly owner: string; readonly now: Date; readonly leaseMs: number };
  /** The leased deliveries to send; the rest of the slots back. */
  accept(leased: readonly ClaimedDelivery[], unused: number): void;
  release(slots: number): void;
  /** Sends first attempts before their deliveries are recorded (see Dispatcher.sendFirst). */
  sendFirst(deliveries: readonly ClaimedDelivery[], waitMs: number): Promise<FirstAttempts>;
  adopt(delivery: ClaimedDelivery, id: string): void;
  abandon(delivery: ClaimedDelivery): void;
  reportEndpointChanges(changes: readonly EndpointChange[]): void;
}

/**
 * How long a chunk's recording waits for its first attempts (sent before it) to end: those that
 * did are written once, with their results; those still in flight are recorded leased and their
 * results written when they come, as a claimed delivery's are. Far above a healthy endpoint's
 * answer, far below a hanging one's timeout.
 */
const FIRST_ATTEMPT_WAIT_MS = 500;

/**
 * How long the consumer waits for one of the dispatcher's slots to free before recording a
 * chunk without them (its deliveries then due, for the loop to claim): slow endpoints holding
 * every slot do not hold up the recording of the stream.
 */
const SLOT_STALL_MS = 250;

/** A consumed event, before the endpoints it is owed are known (they are, in the transaction recording it). */
type DecodedEvent = Omit<EventToDeliver, 'endpointIds'>;

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

/** How often a topic pattern is matched again against the cluster's topics. */
const TOPIC_REFRESH_MS = 15_000;

export interface IntakeOptions {
  /** The consumer, on the client OUTBOX_KAFKA_CLIENT names. */
  readonly openConsumer: OpenIntakeConsumer;
  /** Lists the cluster's topics (kafkajs's admin, on either client). */
  readonly kafka: Kafka;
  readonly groupId: string;
  readonly events: IntakeConsumerEvents;
  readonly topics: readonly (string | RegExp)[];
  readonly pool: pg.Pool;
  readonly tables: WebhookTables;
  readonly store: DeliveryStore;
  /** Decodes Avro values (Confluent wire format); JSON values need none. */
  readonly registry: SchemaRegistry | null;
  readonly firstAttemptAt: () => Date;
  readonly logger: Logger;
  readonly metrics: WebhookMetrics;
  /** Called after deliveries were recorded: the dispatcher looks for due ones at once. */
  readonly onRecorded: () => void;
  /**
   * The dispatcher, to record deliveries already leased to it and have it send them at once
   * (DeliveryStore.record); null when the schedule's first attempt is not immediate.
   */
  readonly sendAtOnce: SendAtOnce | null;
  /** Bounds one transaction: an event fanned out to thousands of endpoints is recorded in several. */
  readonly maxDeliveriesPerTransaction?: number;
  /** How endpoints react to failures: first attempts recorded by the intake apply them as completions do. */
  readonly rules: EndpointRules;
}

/** A delivery owed, before it is known whether it goes at once or is recorded due. */
interface Owed {
  readonly event: DecodedEvent;
  readonly endpointId: string;
}

/**
 * The consumer side: read the relay's topics (read_committed, so an aborted exactly-once
 * transaction is never an event), and for each event record a delivery per subscribed endpoint
 * — in one Postgres transaction per chunk, committed before the chunk's Kafka offsets. A crash
 * in between re-reads the chunk; the deliveries conflict on (event_id, endpoint_id) and nothing
 * is added twice. At-least-once from Kafka, exactly one delivery row per (event, endpoint).
 */
export class WebhookIntake {
  private consumer: IntakeConsumer | null = null;
  /** The topics the consumer reads now, as matched against the cluster's topics. */
  private consuming: readonly string[] = [];
  private subscriptions: { version: string; index: SubscriptionIndex } | null = null;
  private readonly maxDeliveries: number;
  private readonly stopped = new AbortController();
  /** Chunks waiting for the transaction that records them (see record). */
  private toRecord: { readonly events: readonly EventToRecord[]; readonly slots: number; readonly resolve: (ends: SliceEnds) => void; readonly reject: (error: unknown) => void }[] = [];
  private recording: Promise<void> | null = null;
  /** First attempts' recordings waiting for the one in progress: the next takes all of them (see recordFirstAttempts). */
  private firstAttemptsToRecord: { readonly input: FirstAttemptsToRecord; readonly resolve: (ids: ReadonlyMap<ClaimedDelivery, string>) => void; readonly reject: (error: unknown) => void }[] = [];
  private recordingFirstAttempts: Promise<void> | null = null;
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
    await inTransaction(this.options.pool, (client) => this.currentSubscriptions(client));
    const admin = this.options.kafka.admin();
    await admin.connect();
    await this.follow(await admin.listTopics());
    if (this.options.topics.some((topic) => topic instanceof RegExp)) this.watching = this.watch(admin);
    else await admin.disconnect();
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

  private async watch(admin: Admin): Promise<void> {
    try {
      while (!this.stopped.signal.aborted) {
        await sleep(TOPIC_REFRESH_MS, this.stopped.signal);
        if (this.stopped.signal.aborted) break;
        await this.follow(await admin.listTopics()).catch((error: unknown) => this.options.logger.warn({ err: errorMessage(error) }, 'webhooks: looking for new topics failed; trying again'));
      }
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
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
   * A batch in chunks, each recorded (see record) before its offsets are committed. With the
   * dispatcher's slots (the first attempt is immediate), a chunk is as many deliveries as it has
   * free slots, so they are all recorded leased and sent at once. An event owed to more
   * endpoints than that is a chunk of its own, recorded a slice of its endpoints at a time, as
   * slots free (recordFanOut).
   */
  private async take(batch: ConsumedBatch): Promise<void> {
    const key = `${batch.topic}\n${batch.partition}`;
    const generation = this.generation;
    const last = this.lastRecorded.get(key);
    this.lastRecorded.delete(key);
    const first = batch.messages[0];
    if (!first) return;
    let whole: boolean;
    if (!this.options.sendAtOnce) whole = await this.recordThenSend(batch);
    else {
      // Read again (the first batch after joining, or after a failure): what the store has already is recorded first.
      const recordedAlready = last !== undefined && BigInt(first.offset) > last ? 0 : await this.recordedPrefix(batch.messages);
      whole = recordedAlready === 0 || (await this.recordThenSend({ ...batch, messages: batch.messages.slice(0, recordedAlready) }));
      if (whole && recordedAlready < batch.messages.length) whole = await this.sendFirstThenRecord({ ...batch, messages: batch.messages.slice(recordedAlready) });
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
   * A batch whose first attempts go before their deliveries are recorded: per chunk, the
   * endpoints' slots are taken (DeliveryStore.takeSlots), the first attempts sent, and then each
   * delivery written once, with its attempt's result (or leased, if still in flight after
   * FIRST_ATTEMPT_WAIT_MS), in one transaction with the deliveries that got no slot (recorded
   * due) — committed before the chunk's offset. The next chunk is sent meanwhile; chunks are
   * recorded in order. A crash before a chunk's recording sends it again (its offset was not
   * committed), with the same webhook-id. False if the partition went elsewhere meanwhile.
   */
  private async sendFirstThenRecord(batch: ConsumedBatch): Promise<boolean> {
    const sendAtOnce = this.options.sendAtOnce!;
    // Who is owed what, as of now: an endpoint added before these events were produced is owed them.
    const client = await this.options.pool.connect();
    try {
      await this.currentSubscriptions(client);
    } finally {
      client.release();
    }
    let chunk: Owed[] = [];
    let reserved: Reservation | null = null;
    /** The offset up to which every message's deliveries are in a chunk sent (null: none yet). */
    let upTo: string | null = null;
    let chunkUpTo: string | null = null;
    /** The last chunk's recording (settled, whatever its outcome), and its offset marked after every one before it. */
    let recorded: Promise<void> = Promise.resolve();
    let recording: Promise<void> = Promise.resolve();
    const send = async () => {
      const items = chunk;
      const slots = reserved?.slots ?? 0;
      const offset = upTo;
      chunk = [];
      reserved = null;
      chunkUpTo = upTo;
      if (items.length === 0 && offset === null) {
        sendAtOnce.release(slots);
        return;
      }
      const attempts = await this.sendChunk(items, slots);
      const [previousRecorded, previous] = [recorded, recording];
      let settled: () => void = () => undefined;
      recorded = new Promise((resolve) => (settled = resolve));
      recording = (async () => {
        const sent = await attempts.sent;
        try {
          // Recorded in consumption order (an ordered endpoint's deliveries get their ids in it),
          // and whether the chunk before was recorded or not: what was sent is in the store then,
          // so that a re-read does not send it again.
          await previousRecorded;
          const ids = await this.recordFirstAttempts({ ...attempts.toRecord, ...sent }).finally(settled);
          for (const delivery of sent.inFlight) {
            const id = ids.get(delivery);
            if (id === undefined) sendAtOnce.abandon(delivery);
            else sendAtOnce.adopt(delivery, id);
          }
        } catch (error) {
          for (const delivery of sent.inFlight) sendAtOnce.abandon(delivery);
          await previous.catch(() => undefined);
          throw error;
        } finally {
          sendAtOnce.release(sent.ended.length);
        }
        // Offsets in order: a chunk whose recording failed stops the ones after it.
        await previous;
        if (offset !== null) await batch.recorded(offset);
      })();
      // Awaited by the next chunk's recording, or at the end: never left unhandled.
      recording.catch(() => undefined);
    };
    let whole = true;
    try {
      for (const [index, message] of batch.messages.entries()) {
        if (!batch.owned()) {
          whole = false;
          break;
        }
        const event = await this.decode(batch.topic, batch.partition, message);
        const owed = event ? (this.subscriptions?.index.endpointsFor(event.eventType, event.producedAt.getTime()) ?? []) : [];
        for (const endpointId of owed) {
          reserved ??= await this.reserve(batch.messages.length - index);
          if (chunk.length >= this.chunkBound(reserved)) {
            await send();
            reserved = await this.reserve(batch.messages.length - index);
          }
          chunk.push({ event: event!, endpointId });
        }
        upTo = message.offset;
      }
      // A partition gone elsewhere: the chunk being made is its next reader's (nothing of it was sent).
      if (whole && (chunk.length > 0 || upTo !== chunkUpTo)) await send();
    } finally {
      if (reserved) sendAtOnce.release((reserved as Reservation).slots);
      await recording.catch(() => undefined);
    }
    await recording;
    return whole;
  }

  /**
   * Takes `slots` of the chunk's endpoints' in-flight slots and sends those deliveries' first
   * attempts; the rest of the chunk is recorded due. Resolves once they are sent (their
   * results come with `sent`).
   */
  private async sendChunk(items: readonly Owed[], slots: number): Promise<{ readonly sent: Promise<FirstAttempts>; readonly toRecord: Omit<FirstAttemptsToRecord, keyof FirstAttempts> }> {
    const sendAtOnce = this.options.sendAtOnce!;
    const { store } = this.options;
    const wanted = new Map<string, number>();
    for (const { endpointId } of items) wanted.set(endpointId, (wanted.get(endpointId) ?? 0) + 1);
    const lease = sendAtOnce.lease();
    let granted: Awaited<ReturnType<DeliveryStore['takeSlots']>> = new Map();
    try {
      if (slots > 0) granted = await store.takeSlots(wanted, lease);
    } catch (error) {
      sendAtOnce.release(slots);
      throw error;
    }
    const first: ClaimedDelivery[] = [];
    const due = new Map<DecodedEvent, string[]>();
    for (const { event, endpointId } of items) {
      const endpoint = granted.get(endpointId);
      const left = wanted.get(endpointId)!;
      // Of an endpoint's deliveries, the first in consumption order get its slots.
      if (endpoint && left > 0 && endpoint.slots > 0 && first.length < slots) {
        granted.set(endpointId, { ...endpoint, slots: endpoint.slots - 1 });
        first.push({ id: '', eventId: event.eventId, eventType: event.eventType, endpointId, attempt: 1, failures: 0, body: event.body, producedAt: event.producedAt, url: endpoint.url, secrets: endpoint.secrets, headers: endpoint.headers });
      } else {
        const endpoints = due.get(event);
        if (endpoints) endpoints.push(endpointId);
        else due.set(event, [endpointId]);
      }
    }
    sendAtOnce.release(slots - first.length);
    const events = [...new Set(items.map((item) => item.event))].map((event) => ({ ...event, endpointIds: [] }));
    return {
      sent: sendAtOnce.sendFirst(first, FIRST_ATTEMPT_WAIT_MS),
      toRecord: {
        owner: lease.owner,
        now: lease.now,
        leaseMs: lease.leaseMs,
        events,
        due: [...due].map(([event, endpointIds]) => ({ ...event, endpointIds })),
        firstAttemptAt: this.options.firstAttemptAt,
      },
    };
  }

  /**
   * Records first attempts (recordFirstAttempts), one transaction at a time for every chunk
   * that came meanwhile, as record() does for chunks recorded first. Resolves with the ids of
   * those still in flight.
   */
  private recordFirstAttempts(input: FirstAttemptsToRecord): Promise<ReadonlyMap<ClaimedDelivery, string>> {
    // Messages that owed nothing (no subscriber, not an event): their offsets need no transaction.
    if (input.ended.length === 0 && input.inFlight.length === 0 && input.due.length === 0) return Promise.resolve(new Map());
    return new Promise((resolve, reject) => {
      this.firstAttemptsToRecord.push({ input, resolve, reject });
      this.recordingFirstAttempts ??= this.recordFirstAttemptsQueued();
    });
  }

  private async recordFirstAttemptsQueued(): Promise<void> {
    const { options } = this;
    try {
      while (this.firstAttemptsToRecord.length > 0) {
        const group = this.firstAttemptsToRecord.splice(0);
        const inputs = group.map((item) => item.input);
        try {
          // The recording's own time and lease, for every chunk in it: attempts still in flight are leased from now.
          const result = await options.store.recordFirstAttempts(
            {
              ...options.sendAtOnce!.lease(),
              events: inputs.flatMap((input) => input.events),
              ended: inputs.flatMap((input) => input.ended),
              inFlight: inputs.flatMap((input) => input.inFlight),
              due: inputs.flatMap((input) => input.due),
              firstAttemptAt: options.firstAttemptAt,
            },
            options.rules,
          );
          options.metrics.deliveriesRecorded.inc(result.added);
          options.sendAtOnce!.reportEndpointChanges(result.changes);
          if (inputs.some((input) => input.due.length > 0)) options.onRecorded();
          for (const item of group) item.resolve(result.inFlight);
        } catch (error) {
          for (const item of group) item.reject(error);
        }
      }
    } finally {
      this.recordingFirstAttempts = null;
    }
  }

  /**
   * A batch recorded before anything is sent: the first after joining, or read again after a
   * failure (what is recorded already conflicts, adds nothing, and is not sent again). False if
   * the partition went elsewhere meanwhile.
   */
  private async recordThenSend(batch: ConsumedBatch): Promise<boolean> {
    const { topic, partition } = batch;
    let chunk: { message: ConsumedMessage; event: DecodedEvent | null }[] = [];
    let fannedOut = 0;
    let reserved: Reservation | null = null;
    /** False when the partition went elsewhere in the middle of an event's slices: its offset is not committed. */
    const flush = async (): Promise<boolean> => {
      const slots = reserved;
      reserved = null;
      if (chunk.length === 0) {
        if (slots) this.options.sendAtOnce?.release(slots.slots);
        return true;
      }
      const events = chunk.flatMap((item) => (item.event ? [item.event] : []));
      if (events.length === 1 && fannedOut > this.chunkBound(slots)) {
        if (!(await this.recordFanOut(events[0]!, slots, batch.owned))) return false;
      } else await this.record(events.map((event) => ({ event, slice: null })), slots);
      await batch.recorded(chunk[chunk.length - 1]!.message.offset);
      chunk = [];
      fannedOut = 0;
      return true;
    };
    try {
      for (const [index, message] of batch.messages.entries()) {
        if (!batch.owned()) return false;
        reserved ??= await this.reserve(batch.messages.length - index);
        const event = await this.decode(topic, partition, message);
        const owed = event ? this.subscriptions?.index.endpointsFor(event.eventType, event.producedAt.getTime()).length ?? 1 : 0;
        // A chunk holds whole events, and no more deliveries than its slots (or the bound).
        if (chunk.length > 0 && fannedOut + owed > this.chunkBound(reserved)) {
          if (!(await flush())) return false;
          reserved = await this.reserve(batch.messages.length - index);
        }
        chunk.push({ message, event });
        fannedOut += owed;
      }
      return await flush();
    } finally {
      if (reserved) this.options.sendAtOnce?.release(reserved.slots);
    }
  }

  /** The most deliveries one chunk records: its slots, or without any, the bound on a transaction. */
  private chunkBound(reserved: Reservation | null): number {
    return Math.min(this.maxDeliveries, reserved?.slots || this.maxDeliveries);
  }

  /**
   * An event owed to more endpoints than the chunk has slots for (or than one transaction
   * records): a slice of its endpoints at a time, in id order, each slice as many as the slots
   * reserved for it, so that every delivery is recorded leased and sent at once rather than
   * recorded due, claimed, and written a second time. Waits for slots between slices as any
   * chunk does (slow endpoints holding them: the rest is recorded due). Slices are by id, not
   * position: an endpoint removed meanwhile shifts none of the others out of a slice; one added
   * meanwhile is not owed the event anyway unless its --deliver-from is earlier. A crash between
   * slices re-reads the event (its offset was not committed): the recorded slices conflict and
   * add nothing. False if the partition went to another consumer meanwhile (it records the rest).
   */
  private async recordFanOut(event: DecodedEvent, first: Reservation | null, owned: () => boolean): Promise<boolean> {
    let reserved = first;
    let after: string | null = null;
    for (;;) {
      const [end] = await this.record([{ event, slice: { after, limit: this.chunkBound(reserved) } }], reserved);
      if (end === null || end === undefined) return true;
      if (!owned()) return false;
      after = end;
      reserved = await this.reserve(1);
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
    try {
      const event = await decodeOutboxRecord(topic, partition, message, avro ? this.options.registry! : undefined);
      const producedAt = new Date(Number(message.timestamp));
      metrics.eventsConsumed.inc();
      return { eventId: event.eventId, eventType: event.eventType, aggregateId: event.aggregateId, body: eventBody(event, producedAt), producedAt };
    } catch (error) {
      // Not an event (no event_id header, a value that does not decode): no endpoint can be
      // owed it. Counted and named (never its content), and left in Kafka; the stream goes on.
      metrics.undecodable.inc();
      logger.error({ topic, partition, offset: message.offset, code: 'WEBHOOK_UNDECODABLE', err: errorMessage(error) }, 'webhooks: a record that is not an outbox event; skipped (it stays in Kafka)');
      return null;
    }
  }

  /**
   * The dispatcher's free slots for the next chunk (none without it: the schedule's first attempt
   * is not immediate), for at most `messages` more events; waiting a little for an event's
   * fan-out of them.
   */
  private async reserve(messages: number): Promise<Reservation> {
    const { sendAtOnce } = this.options;
    if (!sendAtOnce) return { slots: 0 };
    const fanOut = this.mostFanOut;
    return sendAtOnce.reserveWhenFree(fanOut, Math.min(this.maxDeliveries, messages * fanOut), SLOT_STALL_MS);
  }

  /**
   * Records a chunk's deliveries; resolves once they are committed. One transaction at a time
   * records every chunk that came meanwhile (the partitions consumed at once, up to the bound
   * on deliveries): the partitions do not queue for the same endpoints' locks, each taking a
   * transaction of its own.
   */
  private record(events: readonly EventToRecord[], reserved: Reservation | null): Promise<SliceEnds> {
    return new Promise((resolve, reject) => {
      this.toRecord.push({ events, slots: reserved?.slots ?? 0, resolve, reject });
      this.recording ??= this.recordQueued();
    });
  }

  private async recordQueued(): Promise<void> {
    try {
      while (this.toRecord.length > 0) {
        let deliveries = 0;
        let taken = 0;
        const fanOut = this.mostFanOut;
        const most = (events: readonly EventToRecord[]) => events.reduce((sum, { slice }) => sum + Math.min(fanOut, slice?.limit ?? fanOut), 0);
        while (taken < this.toRecord.length && (taken === 0 || deliveries + most(this.toRecord[taken]!.events) <= this.maxDeliveries)) {
          deliveries += most(this.toRecord[taken]!.events);
          taken += 1;
        }
        const group = this.toRecord.splice(0, taken);
        try {
          const ends = await this.recordGroup(group.flatMap((chunk) => chunk.events), group.reduce((sum, chunk) => sum + chunk.slots, 0));
          let from = 0;
          for (const chunk of group) {
            chunk.resolve(ends.slice(from, from + chunk.events.length));
            from += chunk.events.length;
          }
        } catch (error) {
          for (const chunk of group) chunk.reject(error);
        }
      }
    } finally {
      this.recording = null;
    }
  }

  private async recordGroup(events: readonly EventToRecord[], slots: number): Promise<SliceEnds> {
    const { options } = this;
    const sendAtOnce = options.sendAtOnce;
    let recorded: RecordedDeliveries = { added: 0, leased: [] };
    let ends: SliceEnds = [];
    try {
      if (events.length > 0) {
        recorded = await inTransaction(options.pool, async (client) => {
          const index = await this.currentSubscriptions(client);
          const slices = events.map(({ event, slice }) => owedSlice(index.endpointsFor(event.eventType, event.producedAt.getTime()), slice));
          ends = slices.map(({ sliceEnd }) => sliceEnd);
          const owed = events.map(({ event }, i) => ({ ...event, endpointIds: slices[i]!.endpointIds }));
          const lease = sendAtOnce && slots > 0 ? { ...sendAtOnce.lease(), free: slots } : null;
          return options.store.record(client, owed, options.firstAttemptAt, lease);
        });
      }
    } catch (error) {
      if (slots > 0) sendAtOnce!.release(slots);
      throw error;
    }
    options.metrics.deliveriesRecorded.inc(recorded.added);
    // After the commit: a claim before it would not see them, and a lease not committed is no lease.
    if (sendAtOnce) sendAtOnce.accept(recorded.leased, slots - recorded.leased.length);
    if (recorded.added > recorded.leased.length) options.onRecorded();
    return ends;
  }

  /** The most endpoints one event can be owed to: every endpoint subscribed to anything. */
  private get mostFanOut(): number {
    return Math.max(1, this.subscriptions?.index.size ?? 1);
  }

  /** The subscriptions as of this transaction: reloaded when an endpoint was added, removed or re-subscribed. */
  private async currentSubscriptions(client: pg.ClientBase): Promise<SubscriptionIndex> {
    const version = await subscriptionsVersion(client, this.options.tables);
    if (this.subscriptions?.version !== version) {
      const loaded = await loadSubscribers(client, this.options.tables);
      this.subscriptions = { version: loaded.version, index: new SubscriptionIndex(loaded.subscribers) };
      this.options.logger.info({ endpoints: loaded.subscribers.length, version: loaded.version }, 'webhooks: subscriptions loaded');
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

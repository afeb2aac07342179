import type { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import type { Consumer, EachBatchPayload, Kafka, KafkaMessage } from 'kafkajs';
import type pg from 'pg';
import type { Logger } from 'pino';
import { decodeOutboxRecord } from '../client/consumer.js';
import { MAGIC_BYTE } from '../encode/avro/wire.js';
import { errorMessage } from '../errors.js';
import type { DeliveryStore, EventToDeliver } from './delivery-store.js';
import { loadSubscribers, subscriptionsVersion } from './endpoint-store.js';
import { eventBody } from './event-body.js';
import { SubscriptionIndex } from './event-types.js';
import type { WebhookMetrics } from './metrics.js';
import type { WebhookTables } from './webhook-tables.js';

export interface IntakeOptions {
  readonly kafka: Kafka;
  readonly groupId: string;
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
  private readonly consumer: Consumer;
  private subscriptions: { version: string; index: SubscriptionIndex } | null = null;
  private readonly maxDeliveries: number;

  constructor(private readonly options: IntakeOptions) {
    this.maxDeliveries = options.maxDeliveriesPerTransaction ?? 20_000;
    this.consumer = options.kafka.consumer({ groupId: options.groupId, readUncommitted: false, allowAutoTopicCreation: false });
  }

  async start(): Promise<void> {
    await this.consumer.connect();
    // A new group starts at the beginning: events produced before the first webhooks process
    // started are owed too (an endpoint receives the events consumed after it was added).
    await this.consumer.subscribe({ topics: [...this.options.topics], fromBeginning: true });
    await this.consumer.run({ autoCommit: false, eachBatchAutoResolve: false, partitionsConsumedConcurrently: 4, eachBatch: (payload) => this.take(payload) });
  }

  async stop(): Promise<void> {
    await this.consumer.disconnect();
  }

  /** Fires when the group rebalances or the consumer crashes (kafkajs restarts it itself). */
  on(event: 'crash' | 'group_join', listener: (detail: unknown) => void): void {
    this.consumer.on(event === 'crash' ? this.consumer.events.CRASH : this.consumer.events.GROUP_JOIN, listener);
  }

  private async take({ batch, resolveOffset, heartbeat, isRunning, isStale }: EachBatchPayload): Promise<void> {
    const { topic, partition } = batch;
    let chunk: { message: KafkaMessage; event: Omit<EventToDeliver, 'endpointIds'> | null }[] = [];
    const flush = async () => {
      if (chunk.length === 0) return;
      await this.record(chunk.flatMap((item) => (item.event ? [item.event] : [])));
      const last = chunk[chunk.length - 1]!.message.offset;
      await this.consumer.commitOffsets([{ topic, partition, offset: (BigInt(last) + 1n).toString() }]);
      resolveOffset(last);
      await heartbeat();
      chunk = [];
    };
    let fannedOut = 0;
    for (const message of batch.messages) {
      if (!isRunning() || isStale()) break;
      const event = await this.decode(topic, partition, message);
      chunk.push({ message, event });
      fannedOut += event ? this.subscriptions?.index.endpointsFor(event.eventType).length ?? 1 : 0;
      if (fannedOut >= this.maxDeliveries) {
        await flush();
        fannedOut = 0;
      }
    }
    await flush();
  }

  private async decode(topic: string, partition: number, message: KafkaMessage): Promise<Omit<EventToDeliver, 'endpointIds'> | null> {
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

  private async record(events: readonly Omit<EventToDeliver, 'endpointIds'>[]): Promise<void> {
    if (events.length === 0) return;
    const client = await this.options.pool.connect();
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      const index = await this.currentSubscriptions(client);
      const owed = events.map((event) => ({ ...event, endpointIds: index.endpointsFor(event.eventType) }));
      const added = await this.options.store.record(client, owed, this.options.firstAttemptAt);
      await client.query('COMMIT');
      this.options.metrics.deliveriesRecorded.inc(added);
      if (added > 0) this.options.onRecorded();
    } catch (error) {
      await client.query('ROLLBACK').catch((rollbackError: unknown) => {
        broken = rollbackError as Error;
      });
      throw error;
    } finally {
      client.release(broken);
    }
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

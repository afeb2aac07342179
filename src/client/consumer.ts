import { SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import type { Consumer, ConsumerConfig, EachMessagePayload, Kafka, KafkaMessage } from '../kafka/kafkajs/kafkajs.js';
import type pg from 'pg';
import { TimestampMillisType } from '../encode/avro/logical-types.js';
import { HEADER_BYTES, MAGIC_BYTE } from '../encode/avro/wire.js';
import { HEADER } from '../transform/headers.js';
import { inTransaction } from '../pg-transaction.js';
import { claimEvent } from './consumed-events.js';
import { OutboxClientError } from './errors.js';
import { headerText } from './kafkajs-headers.js';
import { qualifiedTable } from './writer.js';

/** One outbox event as a consumer sees it: the relay's headers, decoded, and where it came from. */
export interface ConsumedEvent<P = unknown> {
  readonly eventId: string;
  readonly eventType: string;
  readonly aggregateType: string;
  /** The record key: `aggregate_id` as the relay wrote it, UTF-8 text or (OUTBOX_KEY_SCHEMA) Avro, decoded. */
  readonly aggregateId: string | null;
  /** Avro: `timestamp-millis` fields are Dates. JSON: the payload column as written, parsed (each number a double). */
  readonly payload: P;
  /**
   * JSON: the value's text, as the relay published it (as Postgres stored it); null for Avro.
   * Parse it yourself where a number must keep every digit (a 64-bit id, an amount beyond
   * 2^53): JSON.parse's reviver is given each value's source text, e.g.
   * `JSON.parse(event.payloadJson, (key, value, { source }) => (key === 'id' ? BigInt(source) : value))`.
   */
  readonly payloadJson: string | null;
  readonly createdAt: Date | null;
  /**
   * Every header as a string, the relay's and the row's own (e.g. `traceparent`), under its own
   * name: `constructor` or `__proto__` too (the object has no prototype).
   */
  readonly headers: Readonly<Record<string, string>>;
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
}

/** Runs inside the dedup transaction: do the effect with `tx`, throw to roll back and get the event again. */
export type EventHandler<P> = (event: ConsumedEvent<P>, tx: pg.PoolClient) => Promise<void>;

/** `applied`: the handler ran and committed. `duplicate`: the group had applied this event_id; skipped. */
export type ConsumeOutcome = 'applied' | 'duplicate';

export interface IdempotentConsumerOptions<P> {
  readonly kafka: Kafka;
  /** The Kafka consumer group, and the dedup scope in `consumed_events`. */
  readonly groupId: string;
  readonly topics: readonly (string | RegExp)[];
  /** Where the effect and the dedup row commit together. */
  readonly pool: pg.Pool;
  readonly handler: EventHandler<P>;
  /**
   * `avro`: Confluent wire format, decoded through the schema registry (`timestamp-millis` -> Date);
   * so is an Avro key (OUTBOX_KEY_SCHEMA), a UTF-8 key is read as text.
   * `json`: the value is UTF-8 JSON, the key UTF-8 text.
   * @default 'json'
   */
  readonly format?: 'json' | 'avro';
  /** For `avro`: the registry URL, or a registry you built (then mind `timestamp-millis`). */
  readonly schemaRegistryUrl?: string;
  readonly registry?: SchemaRegistry;
  /** Where a new group starts. @default false (kafkajs' default: only new records) */
  readonly fromBeginning?: boolean;
  /** @default 'consumed_events' */
  readonly table?: string;
  /**
   * Partitions processed at once. Order within a partition (one aggregate) is kept at any value:
   * kafkajs never hands out two batches of one partition at the same time.
   * @default 1
   */
  readonly partitionsConsumedConcurrently?: number;
  /** kafkajs consumer settings (session timeout, retry, ...). `groupId` comes from above; it always reads committed records only. */
  readonly consumerConfig?: Omit<ConsumerConfig, 'groupId' | 'readUncommitted'>;
  /**
   * A record that cannot become an event (no `event_id` header, a value that does not decode).
   * Left out: the consumer stops on it (kafkajs retries, then crashes) — nothing is skipped
   * silently. Given: it is called, then the offset is committed and consumption goes on.
   */
  readonly onUndecodable?: (record: { topic: string; partition: number; message: KafkaMessage }, error: OutboxClientError) => Promise<void>;
  /** After each event's transaction committed (and before its offset is committed). */
  readonly onOutcome?: (outcome: ConsumeOutcome, event: ConsumedEvent<P>) => void;
}

export interface IdempotentConsumer {
  /** Connects, subscribes and starts consuming (returns once running). */
  start(): Promise<void>;
  /** Finishes the event in hand, leaves the group, disconnects. */
  stop(): Promise<void>;
  readonly consumer: Consumer;
  readonly stats: Readonly<{ applied: number; duplicates: number; failures: number; undecodable: number }>;
}

/**
 * Effectively-once processing of relayed outbox events. For each record, in partition order:
 *
 * 1. decode it (headers, key, JSON or Avro value);
 * 2. in ONE Postgres transaction: `INSERT INTO consumed_events (consumer_group, event_id) ...
 *    ON CONFLICT DO NOTHING`; when that inserted a row, run the handler with the same client;
 *    COMMIT — so the effect and the dedup row commit together or not at all;
 * 3. only then commit the Kafka offset (autoCommit is off).
 *
 * A crash between 2 and 3, a relay replay, a rebalance: the record comes again, its event_id is
 * already in `consumed_events`, the handler is skipped. A handler that throws rolls back the
 * effect and the dedup row; the offset is not committed, and kafkajs delivers the record again
 * (its retry with backoff, then a consumer restart from the committed offset).
 */
export function createIdempotentConsumer<P = unknown>(options: IdempotentConsumerOptions<P>): IdempotentConsumer {
  const table = options.table ?? 'consumed_events';
  qualifiedTable(table);
  const format = options.format ?? 'json';
  let registry: SchemaRegistry | undefined = options.registry;
  if (format === 'avro' && !registry) {
    if (!options.schemaRegistryUrl) throw new OutboxClientError('CLIENT_CONFIG_INVALID', 'format "avro" needs schemaRegistryUrl or registry');
    registry = avroRegistry(options.schemaRegistryUrl);
  }
  // isolation.level=read_committed, whatever consumerConfig says: records of aborted transactions
  // (OUTBOX_DELIVERY=exactly-once, after a crash) are never events, and must not be handled.
  const consumer = options.kafka.consumer({ ...options.consumerConfig, groupId: options.groupId, readUncommitted: false });
  const stats = { applied: 0, duplicates: 0, failures: 0, undecodable: 0 };

  const commitAfter = ({ topic, partition, message }: Pick<EachMessagePayload, 'topic' | 'partition' | 'message'>) =>
    consumer.commitOffsets([{ topic, partition, offset: (BigInt(message.offset) + 1n).toString() }]);

  const eachMessage = async (payload: EachMessagePayload): Promise<void> => {
    const { topic, partition, message } = payload;
    let event: ConsumedEvent<P>;
    try {
      event = await decodeOutboxRecord<P>(topic, partition, message, registry);
    } catch (error) {
      const undecodable = error instanceof OutboxClientError ? error : new OutboxClientError('CONSUMER_UNDECODABLE', `${topic}[${partition}]@${message.offset}: ${(error as Error).message}`, { cause: error });
      if (!options.onUndecodable) throw undecodable;
      stats.undecodable += 1;
      await options.onUndecodable({ topic, partition, message }, undecodable);
      await commitAfter(payload);
      return;
    }
    const outcome = await applyOnce(options.pool, options.groupId, table, event, options.handler).catch((error: unknown) => {
      stats.failures += 1;
      throw error;
    });
    if (outcome === 'applied') stats.applied += 1;
    else stats.duplicates += 1;
    options.onOutcome?.(outcome, event);
    await commitAfter(payload);
  };

  return {
    consumer,
    stats,
    async start() {
      await consumer.connect();
      await consumer.subscribe({ topics: [...options.topics], fromBeginning: options.fromBeginning ?? false });
      await consumer.run({ autoCommit: false, partitionsConsumedConcurrently: options.partitionsConsumedConcurrently ?? 1, eachMessage });
    },
    async stop() {
      await consumer.disconnect();
    },
  };
}

/** The dedup transaction: claim the event_id, run the handler only for a first claim, commit. */
export async function applyOnce<P>(pool: pg.Pool, consumerGroup: string, table: string, event: ConsumedEvent<P>, handler: EventHandler<P>): Promise<ConsumeOutcome> {
  return inTransaction(pool, async (client) => {
    const first = await claimEvent(client, consumerGroup, event.eventId, table);
    if (first) {
      try {
        await handler(event, client);
      } catch (error) {
        throw new OutboxClientError('CONSUMER_HANDLER_FAILED', `handler failed for event ${event.eventId} (${event.eventType}) at ${event.topic}[${event.partition}]@${event.offset}; rolled back, it will be delivered again: ${(error as Error)?.message ?? String(error)}`, {
          cause: error,
          details: { eventId: event.eventId, eventType: event.eventType, topic: event.topic, partition: event.partition, offset: event.offset },
        });
      }
    }
    return first ? 'applied' : 'duplicate';
  });
}

/**
 * A registry client that reads `timestamp-millis` as Date (the relay's own logical type).
 * `access`: basic auth, and an https.Agent trusting the registry's CA (`avroRegistryFromEnv`
 * builds both from the relay's variables).
 */
export function avroRegistry(url: string, access: { readonly auth?: { username: string; password: string }; readonly agent?: import('node:https').Agent } = {}): SchemaRegistry {
  return new SchemaRegistry({ host: url, ...access }, { [SchemaType.AVRO]: { logicalTypes: { 'timestamp-millis': TimestampMillisType } } });
}

/**
 * One record of the relay as an event: headers, key and value decoded (Avro through `registry`
 * when given, else JSON). OutboxClientError CONSUMER_UNDECODABLE when it is not one.
 */
export async function decodeOutboxRecord<P>(topic: string, partition: number, message: Pick<KafkaMessage, 'key' | 'value' | 'headers' | 'offset'>, registry: SchemaRegistry | undefined): Promise<ConsumedEvent<P>> {
  const where = `${topic}[${partition}]@${message.offset}`;
  const headers = headerText(message.headers);
  const eventId = headers[HEADER.eventId];
  if (!eventId) throw new OutboxClientError('CONSUMER_UNDECODABLE', `${where}: no ${HEADER.eventId} header (not a record of the relay?)`, { details: { topic, partition, offset: message.offset } });
  if (!message.value) throw new OutboxClientError('CONSUMER_UNDECODABLE', `${where}: event ${eventId} has no value`, { details: { topic, partition, offset: message.offset, eventId } });
  const undecodable = (what: string, error: unknown) =>
    new OutboxClientError('CONSUMER_UNDECODABLE', `${where}: event ${eventId}: ${what}: ${(error as Error).message}`, { cause: error, details: { topic, partition, offset: message.offset, eventId } });
  let payload: P;
  let payloadJson: string | null = null;
  try {
    payload = registry ? ((await registry.decode(message.value)) as P) : (JSON.parse((payloadJson = message.value.toString('utf8'))) as P);
  } catch (error) {
    throw undecodable(`value does not decode as ${registry ? 'Avro (registry)' : 'JSON'}`, error);
  }
  let aggregateId: string | null;
  try {
    aggregateId = await aggregateIdOf(message.key, registry);
  } catch (error) {
    throw undecodable('key does not decode', error);
  }
  const createdAtText = headers[HEADER.createdAt];
  const createdAt = createdAtText ? new Date(createdAtText) : null;
  return {
    eventId,
    eventType: headers[HEADER.eventType] ?? '',
    aggregateType: headers[HEADER.aggregateType] ?? '',
    aggregateId,
    payload,
    payloadJson,
    createdAt: createdAt && !Number.isNaN(createdAt.getTime()) ? createdAt : null,
    headers,
    topic,
    partition,
    offset: message.offset,
  };
}

/**
 * The aggregate id from the record key. The relay writes it as UTF-8 text, or with
 * OUTBOX_KEY_SCHEMA as Avro in the Confluent wire format: a string, or a record of one string
 * field. A key starting with the magic byte 0 is never the relay's text (a Postgres text value
 * holds no NUL byte).
 */
async function aggregateIdOf(key: Buffer | null, registry: SchemaRegistry | undefined): Promise<string | null> {
  if (!key) return null;
  if (key.length < HEADER_BYTES || key[0] !== MAGIC_BYTE) return key.toString('utf8');
  if (!registry) throw new Error(`it is Avro (schema id ${key.readUInt32BE(1)}, OUTBOX_KEY_SCHEMA): consume with format 'avro'`);
  const decoded = (await registry.decode(key)) as unknown;
  if (typeof decoded === 'string') return decoded;
  const fields = decoded !== null && typeof decoded === 'object' ? Object.values(decoded) : [];
  if (fields.length === 1 && typeof fields[0] === 'string') return fields[0];
  throw new Error('an Avro key is a string or a record of one string field (the aggregate id)');
}


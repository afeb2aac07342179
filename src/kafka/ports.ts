/** The ports the rest of the relay uses to reach Kafka; each client folder (kafkajs/, librdkafka/, platformatic/) implements them. */
import type { Logger } from 'pino';
import type { KafkaSecurity } from '../security/kafka-security.js';
import type { OutgoingMessage } from './record.js';

/** What decides whether an acknowledged record can still be lost. */
export interface TopicDurability {
  readonly replicationFactor: number;
  readonly minInsyncReplicas: number;
  readonly uncleanLeaderElection: boolean;
}

/** A topic's settings as the broker has them. */
export interface TopicDescription extends TopicDurability {
  /** The largest record batch the topic accepts (max.message.bytes). */
  readonly maxMessageBytes: number;
  /** cleanup.policy: delete, compact, or both. */
  readonly cleanupPolicy: string;
}

/**
 * The Kafka producer as the sink sees it: one request's worth of messages at a time, resolved
 * only when Kafka acknowledged every one of them (acks=all). kafkajs/producer.ts and
 * librdkafka/producer.ts implement it (open.ts opens the one configured); unit tests use a fake.
 */
export interface RecordProducer {
  connect(): Promise<void>;
  /**
   * Resolves once Kafka acknowledged all of `messages`; rejects with a RelayError (SINK_PUBLISH)
   * after the client's own retries. A transactional producer (one with `commit`) adds them to
   * its open transaction, beginning one if none is open: they count as delivered only once
   * `commit` resolved.
   */
  produce(messages: readonly OutgoingMessage[]): Promise<void>;
  /** Exactly-once only: commits the open transaction; read_committed consumers then see its records. */
  commit?(): Promise<void>;
  /** A topic's settings, or null if it does not exist. */
  describeTopic(topic: string): Promise<TopicDescription | null>;
  /** Whether the brokers create a topic at its first record (auto.create.topics.enable); null if that cannot be read. */
  brokersCreateTopics(): Promise<boolean | null>;
  /**
   * Exactly-once only: the value of the last progress record a committed transaction wrote for
   * this relay (null: a tombstone; undefined: none). Call after `connect`, which fenced every
   * earlier producer of the transactional id.
   */
  readProgress?(): Promise<Buffer | null | undefined>;
  disconnect(): Promise<void>;
}

/** What a RecordProducer reports about itself and about Kafka while it works. */
export interface ProducerEvents {
  /** A produce request Kafka refused or did not answer; its partitions are sent again. `error` is Kafka's name for it. */
  readonly onRequestFailed?: (error: string) => void;
}

/** Where a client connects, and as whom: what every consumer and admin is opened with. */
export interface KafkaConnection {
  readonly brokers: readonly string[];
  readonly clientId: string;
  readonly security: KafkaSecurity;
  /** The client's warnings and errors go here. */
  readonly logger: Logger;
}

/** The Kafka clients a RecordProducer can run on (OUTBOX_KAFKA_CLIENT). */
export const KAFKA_CLIENT_NAMES = ['kafkajs', 'librdkafka', 'platformatic'] as const;
export type KafkaClientName = (typeof KAFKA_CLIENT_NAMES)[number];
/**
 * The clients every guarantee suite runs on by default (test/harness/kafka-clients.ts; any of
 * KAFKA_CLIENT_NAMES by OUTBOX_TEST_KAFKA_CLIENTS): all three since platformatic passed them
 * (issue 64; docs/kafka-clients.md gives what it adds to CI's time). A client dropped from the
 * suites is dropped here, and stays selectable.
 */
export const KAFKA_CLIENTS: readonly KafkaClientName[] = ['kafkajs', 'librdkafka', 'platformatic'];

/** Record batch compression codecs (OUTBOX_KAFKA_COMPRESSION), as librdkafka and Kafka name them. */
export const KAFKA_COMPRESSIONS = ['none', 'gzip', 'snappy', 'lz4', 'zstd'] as const;
export type KafkaCompression = (typeof KAFKA_COMPRESSIONS)[number];
/** kafkajs has gzip built in; the others need codec plugins the relay does not carry. */
export const KAFKAJS_COMPRESSIONS: ReadonlySet<KafkaCompression> = new Set(['none', 'gzip']);

export interface KafkaProducerOptions extends ProducerEvents {
  readonly client: KafkaClientName;
  readonly brokers: readonly string[];
  readonly clientId: string;
  /** kafkajs: the relay's Produce request encoder (true) or kafkajs's own. */
  readonly fastEncoder: boolean;
  /** kafkajs: none or gzip (config checks refuse the others); librdkafka: any. */
  readonly compression: KafkaCompression;
  /** OUTBOX_MAX_MESSAGE_BYTES: librdkafka refuses a larger record before sending it. */
  readonly maxMessageBytes: number;
  /** Let the broker create a topic at its first record (if the broker allows it). */
  readonly autoCreateTopics: boolean;
  /** TLS and SASL; files and secrets are read when the producer is made (each session). */
  readonly security?: KafkaSecurity;
  /** OUTBOX_DELIVERY=exactly-once: each produce request is one Kafka transaction; absent: idempotent sends. */
  readonly exactlyOnce?: ExactlyOnceOptions | null;
  readonly logger: Logger;
}

export interface ExactlyOnceOptions {
  /** A second producer with the same id fences this one: derived from the slot, so a standby taking over fences the old active. */
  readonly transactionalId: string;
  readonly transactionTimeoutMs: number;
  /** The progress record written in every transaction; null for `replay` and `recover`, which keep none. */
  readonly progress: ProgressRecordOptions | null;
}

export interface ProgressRecordOptions {
  readonly topic: string;
  readonly key: string;
  /** The record's value for a batch (its last event). */
  readonly value: (batch: readonly OutgoingMessage[]) => string;
}

/**
 * What the topic catalogue and the durability checks read from the brokers: topic configs and
 * the brokers' auto.create.topics.enable. Written once (topic-inspector.ts) over each client's
 * admin requests (kafkajs/admin.ts, librdkafka/admin.ts: the binding's DescribeConfigs is added
 * by scripts/librdkafka.sh).
 */
export interface TopicInspector {
  /** A topic's settings, or null if it does not exist. */
  describeTopic(topic: string): Promise<TopicDescription | null>;
  /** Whether every broker creates a topic at its first record; null if that cannot be read. */
  brokersCreateTopics(): Promise<boolean | null>;
  /** The exactly-once progress topic, created if missing and checked (see prepareProgressTopic). */
  prepareProgressTopic(topic: string): Promise<void>;
  disconnect(): Promise<void>;
}

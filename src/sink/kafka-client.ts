// First: the relay's replacements go into kafkajs's module cache before kafkajs loads.
import { KAFKAJS_VERSION, verifyKafkajsPatches } from './kafkajs-patches.js';
import kafkajs, { Kafka, logLevel as kafkaLogLevel, Partitioners, type ICustomPartitioner, type Message, type PartitionerArgs, type TopicMessages } from 'kafkajs';
import type { Logger } from 'pino';
import { RelayError, type ErrorCode } from '../errors.js';
import { kafkaClientSecurity, PLAINTEXT, type KafkaSecurity } from '../security/kafka-security.js';
import { isTlsTrustError } from '../security/tls-errors.js';
import type { OutgoingMessage } from '../event.js';
import { kafkaErrorName, PRODUCE_REQUEST_FAILED } from './kafkajs-send-messages.js';
import { partitionForKey } from './partitioner.js';
import type { ProducerEvents, RecordProducer, TopicDescription } from './producer.js';
import { finishesWithin } from '../time.js';

/**
 * The relay's only use of kafkajs on the produce side: the RecordProducer the sink runs on,
 * and the dead-letter count `status` reads. (The consumer helper in src/client uses kafkajs
 * for consuming, with kafkajs's own modules.)
 */

export interface KafkaProducerOptions extends ProducerEvents {
  readonly brokers: readonly string[];
  readonly clientId: string;
  /** The relay's Produce request encoder (true) or kafkajs's own. */
  readonly fastEncoder: boolean;
  /** Let the broker create a topic at its first record (if the broker allows it). */
  readonly autoCreateTopics: boolean;
  /** TLS and SASL; files and secrets are read when the producer is made (each session). */
  readonly security?: KafkaSecurity;
  readonly logger: Logger;
}

/** Each send waits this long for acks=all before the request counts as failed and is retried. */
const PRODUCE_TIMEOUT_MS = 30_000;
const DISCONNECT_TIMEOUT_MS = 5_000;
const KAFKA_DEFAULT_MAX_MESSAGE_BYTES = 1_048_588;

/**
 * A kafkajs producer with the relay's replacements (checked here: SINK_CLIENT if not in place),
 * idempotent with one request in flight: the broker drops duplicates of a retried request, and
 * a partition's order is the send order.
 */
export function createKafkaProducer(options: KafkaProducerOptions): RecordProducer {
  const { logger } = options;
  const replacements = verifyKafkajsPatches({ fastEncoder: options.fastEncoder });
  const outage = new OutageLog(logger);
  const kafka = new Kafka({
    clientId: options.clientId,
    brokers: [...options.brokers],
    ...kafkaClientSecurity(options.security ?? PLAINTEXT),
    logLevel: kafkaLogLevel.WARN,
    logCreator: () => ({ namespace, level, log }) => {
      const { message, ...extra } = log;
      if (message === PRODUCE_REQUEST_FAILED) {
        options.onRequestFailed?.(String(extra.error));
        outage.failed(extra);
        return;
      }
      logger[kafkajsLogLevel(namespace, level, message)]({ kafkajs: namespace, ...extra }, message);
    },
    // ~23 s of retries for one batch, at most 2 s apart: a partition whose leader died is sent
    // to the new one within 2 s of the metadata naming it.
    retry: { initialRetryTime: 200, retries: 14, maxRetryTime: 2_000 },
  });
  const producer = kafka.producer({ createPartitioner: keyHashPartitioner, idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: options.autoCreateTopics });
  const admin = kafka.admin();
  let adminConnected: Promise<void> | null = null;

  return {
    async connect() {
      logger.info({ kafkajs: KAFKAJS_VERSION, replacements }, "producer: kafkajs with the relay's replacements");
      try {
        await producer.connect();
      } catch (error) {
        throw kafkaFailure(error, `cannot connect to Kafka at ${options.brokers.join(',')}`);
      }
    },

    async produce(messages) {
      try {
        await producer.sendBatch({ acks: -1, timeout: PRODUCE_TIMEOUT_MS, topicMessages: groupByTopic(messages) });
        outage.acknowledged(messages.length);
      } catch (error) {
        throw kafkaFailure(error, `Kafka did not acknowledge a batch of ${messages.length}`);
      }
    },

    async describeTopic(topic): Promise<TopicDescription | null> {
      adminConnected ??= admin.connect();
      await adminConnected;
      let metadata;
      try {
        metadata = await admin.fetchTopicMetadata({ topics: [topic] });
      } catch (error) {
        if (kafkaErrorName(error) === 'UNKNOWN_TOPIC_OR_PARTITION') return null;
        throw error;
      }
      const configs = await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: kafkajs.ConfigResourceTypes.TOPIC, name: topic, configNames: ['min.insync.replicas', 'unclean.leader.election.enable', 'max.message.bytes'] }] });
      const entries = new Map(configs.resources[0]?.configEntries.map((entry) => [entry.configName, entry.configValue]) ?? []);
      return {
        replicationFactor: Math.min(...(metadata.topics[0]?.partitions ?? []).map((partition) => partition.replicas.length)),
        minInsyncReplicas: Number(entries.get('min.insync.replicas') ?? 1),
        uncleanLeaderElection: entries.get('unclean.leader.election.enable') === 'true',
        // Kafka's default when a topic does not say (1 MB minus the batch overhead it allows for).
        maxMessageBytes: Number(entries.get('max.message.bytes') ?? KAFKA_DEFAULT_MAX_MESSAGE_BYTES),
      };
    },

    async disconnect() {
      // A broker that stopped answering must not hold the session's end.
      await finishesWithin(producer.disconnect().catch(() => undefined), DISCONNECT_TIMEOUT_MS);
      if (adminConnected) await finishesWithin(admin.disconnect().catch(() => undefined), DISCONNECT_TIMEOUT_MS);
    },
  };
}

const AUTHENTICATION_ERRORS = new Set(['KafkaJSSASLAuthenticationError', 'SASL_AUTHENTICATION_FAILED', 'ILLEGAL_SASL_STATE', 'UNSUPPORTED_SASL_MECHANISM']);
const AUTHORIZATION_ERRORS = new Set(['TOPIC_AUTHORIZATION_FAILED', 'CLUSTER_AUTHORIZATION_FAILED', 'GROUP_AUTHORIZATION_FAILED', 'TRANSACTIONAL_ID_AUTHORIZATION_FAILED']);

/**
 * A kafkajs failure as the relay's error. Refused credentials, a missing ACL or an untrusted
 * certificate stop the relay with what to fix (retrying repeats the refusal); anything else is a
 * retriable SINK_PUBLISH.
 */
export function kafkaFailure(error: unknown, what: string): RelayError {
  const names: string[] = [];
  for (let current = error, depth = 0; current && depth < 5; current = (current as { cause?: unknown }).cause, depth++) {
    // The relay's own, raised inside kafkajs (e.g. by the OAUTHBEARER token provider): keep its code.
    if (current instanceof RelayError) return current;
    names.push(kafkaErrorName(current));
  }
  const detail = `${kafkaErrorName(error)}: ${(error as Error).message}`;
  let code: ErrorCode = 'SINK_PUBLISH';
  let hint = '';
  if (names.some((name) => AUTHENTICATION_ERRORS.has(name))) {
    code = 'SINK_AUTHENTICATION';
    hint = '; check KAFKA_SASL_MECHANISM and the credentials (KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD[_FILE], or the OAUTHBEARER token)';
  } else if (names.some((name) => AUTHORIZATION_ERRORS.has(name))) {
    code = 'SINK_NOT_AUTHORIZED';
    hint = "; the relay's principal needs WRITE and DESCRIBE (and DESCRIBE_CONFIGS) on its topics, CREATE if they are auto-created (README: Security, Kafka ACLs)";
  } else if (isTlsTrustError(error)) {
    code = 'SINK_TLS';
    hint = '; check KAFKA_SSL_CA_FILE (the CA that signed the brokers) and, for mutual TLS, KAFKA_SSL_CERT_FILE and KAFKA_SSL_KEY_FILE';
  }
  return new RelayError(code, `${what}: ${detail}${hint}`, { cause: error });
}

/**
 * One warning when Kafka stops acknowledging (and one more each time the reason changes, e.g.
 * a broker unreachable, then NOT_ENOUGH_REPLICAS once it is fenced), and one when it
 * acknowledges again, with how long and how many requests failed: during an outage the log
 * shows the outage, not the retry loop. Every failed request is still counted (produce errors
 * metric) and logged at debug.
 */
class OutageLog {
  private since: number | null = null;
  private failures = 0;
  private lastError: unknown = null;

  constructor(private readonly logger: Logger) {}

  failed(details: Record<string, unknown>): void {
    this.failures += 1;
    this.since ??= Date.now();
    if (details.error === this.lastError) {
      this.logger.debug(details, PRODUCE_REQUEST_FAILED);
      return;
    }
    this.lastError = details.error;
    this.logger.warn(details, `Kafka did not acknowledge a produce request (${String(details.error)}); retrying its partitions until it does`);
  }

  acknowledged(events: number): void {
    if (this.since === null) return;
    const outageMs = Date.now() - this.since;
    this.logger.warn({ outageMs, failedRequests: this.failures, events }, `Kafka acknowledges again after ${Math.round(outageMs / 1000)}s`);
    this.since = null;
    this.failures = 0;
    this.lastError = null;
  }
}

/**
 * kafkajs's own lines: connection errors and start-up chatter (a partition's leader not known
 * yet, a coordinator loading) are what the outage warning and the produce errors metric already
 * say, so they go to debug; anything else keeps kafkajs's level.
 */
function kafkajsLogLevel(namespace: string, level: number, message: string): 'debug' | 'warn' | 'error' {
  if (namespace === 'Connection' || namespace === 'BrokerPool' || namespace === 'Cluster') return 'debug';
  // Retries are limited on purpose: a batch that fails them restarts the stream from the
  // confirmed position, which is what keeps nothing lost.
  if (message.startsWith('Limiting retries for the idempotent producer') || message.includes('This server does not host this topic-partition')) return 'debug';
  return level <= kafkaLogLevel.ERROR ? 'error' : 'warn';
}

/**
 * kafkajs's DefaultPartitioner with the keyed case made cheap (see partitioner.ts): a key lands
 * on the same partition as with kafkajs or the Java client. Unkeyed messages go to kafkajs's own.
 */
export const keyHashPartitioner: ICustomPartitioner = () => {
  const unkeyed = Partitioners.DefaultPartitioner();
  return (args: PartitionerArgs) => {
    const { message, partitionMetadata } = args;
    if (message.partition !== null && message.partition !== undefined) return message.partition;
    if (message.key === null || message.key === undefined) return unkeyed(args);
    return partitionForKey(message.key, partitionMetadata.length);
  };
};

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

/** Records in a topic (high minus low watermark over its partitions); 0 if it does not exist. */
export async function countRecords(brokers: readonly string[], topic: string, security: KafkaSecurity = PLAINTEXT): Promise<number> {
  const admin = new Kafka({ clientId: 'outbox-relay-status', brokers: [...brokers], ...kafkaClientSecurity(security), logLevel: kafkaLogLevel.NOTHING, connectionTimeout: 3_000, retry: { retries: 1 } }).admin();
  try {
    await admin.connect();
    if (!(await admin.listTopics()).includes(topic)) return 0;
    const offsets = await admin.fetchTopicOffsets(topic);
    return offsets.reduce((sum, partition) => sum + Number(partition.high) - Number(partition.low), 0);
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

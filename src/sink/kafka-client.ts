// First: the relay's replacements go into kafkajs's module cache before kafkajs loads.
import { KAFKAJS_VERSION, verifyKafkajsPatches } from './kafkajs-patches.js';
import kafkajs, { Kafka, logLevel as kafkaLogLevel, Partitioners, type Admin, type ICustomPartitioner, type Message, type PartitionerArgs, type ProducerBatch, type TopicMessages, type Transaction } from 'kafkajs';
import type { Logger } from 'pino';
import { RelayError, type ErrorCode } from '../errors.js';
import { kafkaClientSecurity, PLAINTEXT, type KafkaSecurity } from '../security/kafka-security.js';
import { isTlsTrustError } from '../security/tls-errors.js';
import type { OutgoingMessage } from '../event.js';
import { kafkaErrorName, PRODUCE_REQUEST_FAILED } from './kafkajs-send-messages.js';
import { checkTransactionalIdAccess, readLastCommitted } from './kafkajs-exactly-once.js';
import { NO_HEADER_BLOCK } from './kafkajs-record.js';
import { partitionForKey } from './partitioner.js';
import { durabilityProblems } from './topic-durability.js';
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

/** Each send waits this long for acks=all before the request counts as failed and is retried. */
const PRODUCE_TIMEOUT_MS = 30_000;
/** How long the progress partition's last stable offset may stand still before the session fences again. */
const PROGRESS_STALL_MS = 10_000;
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
  const { exactlyOnce } = options;
  const producer = kafka.producer({
    createPartitioner: keyHashPartitioner,
    idempotent: true,
    maxInFlightRequests: 1,
    allowAutoTopicCreation: options.autoCreateTopics,
    ...(exactlyOnce && { transactionalId: exactlyOnce.transactionalId, transactionTimeout: exactlyOnce.transactionTimeoutMs }),
  });
  const admin = kafka.admin();
  let adminConnected: Promise<void> | null = null;
  const connectAdmin = async () => {
    adminConnected ??= admin.connect();
    await adminConnected;
  };

  const describeTopic = async (topic: string): Promise<TopicDescription | null> => {
    await connectAdmin();
    let metadata;
    try {
      metadata = await admin.fetchTopicMetadata({ topics: [topic] });
    } catch (error) {
      if (kafkaErrorName(error) === 'UNKNOWN_TOPIC_OR_PARTITION') return null;
      throw error;
    }
    const configs = await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: kafkajs.ConfigResourceTypes.TOPIC, name: topic, configNames: ['min.insync.replicas', 'unclean.leader.election.enable', 'max.message.bytes', 'cleanup.policy'] }] });
    const entries = new Map(configs.resources[0]?.configEntries.map((entry) => [entry.configName, entry.configValue]) ?? []);
    return {
      replicationFactor: Math.min(...(metadata.topics[0]?.partitions ?? []).map((partition) => partition.replicas.length)),
      minInsyncReplicas: Number(entries.get('min.insync.replicas') ?? 1),
      uncleanLeaderElection: entries.get('unclean.leader.election.enable') === 'true',
      // Kafka's default when a topic does not say (1 MB minus the batch overhead it allows for).
      maxMessageBytes: Number(entries.get('max.message.bytes') ?? KAFKA_DEFAULT_MAX_MESSAGE_BYTES),
      cleanupPolicy: entries.get('cleanup.policy') ?? 'delete',
    };
  };

  // Read once: it is a broker setting no producer can change (Kafka does not update it dynamically).
  let brokersCreate: Promise<boolean | null> | null = null;
  const brokersCreateTopics = (): Promise<boolean | null> =>
    (brokersCreate ??= (async () => {
      await connectAdmin();
      const { brokers } = await admin.describeCluster();
      const configs = await admin.describeConfigs({ includeSynonyms: false, resources: brokers.map((broker) => ({ type: kafkajs.ConfigResourceTypes.BROKER, name: String(broker.nodeId), configNames: ['auto.create.topics.enable'] })) });
      const values = configs.resources.flatMap((resource) => resource.configEntries.filter((entry) => entry.configName === 'auto.create.topics.enable').map((entry) => entry.configValue));
      // A broker that creates no topic is enough for a record to wait on one for ever.
      return values.length === 0 ? null : values.every((value) => value === 'true');
    })().catch((error: unknown) => {
      logger.warn({ err: (error as Error).message }, "could not read the brokers' auto.create.topics.enable (the relay's principal needs DESCRIBE_CONFIGS on the cluster): if they create no topics, events for a topic that does not exist wait for it; set OUTBOX_KAFKA_AUTO_CREATE_TOPICS=false to dead-letter them instead");
      return null;
    }));

  let transaction: Transaction | null = null;
  let transactionStartedAt = 0;
  /**
   * Ends a failed transaction before its timeout, so that read_committed consumers of its
   * partitions are not held back (if this fails too, the next session's producer aborts it).
   * Returns what the failure message should add when the broker had already aborted it for time.
   */
  const abortTransaction = async (): Promise<string> => {
    const failed = transaction;
    transaction = null;
    if (!failed || !exactlyOnce) return '';
    if (failed.isActive()) await finishesWithin(failed.abort().catch(() => undefined), DISCONNECT_TIMEOUT_MS);
    const took = Date.now() - transactionStartedAt;
    return took >= exactlyOnce.transactionTimeoutMs ? `; it was open ${took}ms, over OUTBOX_TRANSACTION_TIMEOUT (${exactlyOnce.transactionTimeoutMs}ms), so the broker aborted it` : '';
  };

  const sendBatch = (messages: readonly OutgoingMessage[], send: (request: ProducerBatch) => Promise<unknown>) =>
    send({ acks: -1, timeout: PRODUCE_TIMEOUT_MS, topicMessages: groupByTopic(messages) });

  return {
    async connect() {
      logger.info({ kafkajs: KAFKAJS_VERSION, replacements, transactionalId: exactlyOnce?.transactionalId }, "producer: kafkajs with the relay's replacements");
      try {
        if (exactlyOnce?.progress) await prepareProgressTopic(exactlyOnce.progress.topic, { describeTopic, admin: async () => (await connectAdmin(), admin), logger });
        await producer.connect();
        if (exactlyOnce) {
          await checkTransactionalIdAccess(kafka, exactlyOnce.transactionalId, (error) => kafkaFailure(error, '', exactlyOnce).code === 'SINK_NOT_AUTHORIZED');
          // kafkajs sends the transactional InitProducerId only at the first transaction, not at
          // connect: begin (and end) one now. It fences every earlier producer with this id and
          // aborts the transaction one left open, so nothing of theirs can commit after this, and
          // their open transaction no longer hides later records from read_committed readers.
          await (await producer.transaction()).abort();
        }
      } catch (error) {
        throw kafkaFailure(error, `cannot connect to Kafka at ${options.brokers.join(',')}`, exactlyOnce);
      }
    },

    async produce(messages) {
      if (!exactlyOnce) {
        try {
          await sendBatch(messages, (request) => producer.sendBatch(request));
          outage.acknowledged(messages.length);
        } catch (error) {
          throw kafkaFailure(error, `Kafka did not acknowledge a batch of ${messages.length}`);
        }
        return;
      }
      const { progress } = exactlyOnce;
      try {
        if (!transaction) {
          transaction = await producer.transaction();
          transactionStartedAt = Date.now();
        }
        const open = transaction;
        // Every request carries the progress of its last event: whichever request ends the
        // transaction, the committed progress covers exactly what the transaction holds.
        const withProgress = progress ? [...messages, progressMessage(progress, messages)] : messages;
        await sendBatch(withProgress, (request) => open.sendBatch(request));
        outage.acknowledged(messages.length);
      } catch (error) {
        throw kafkaFailure(error, `Kafka did not acknowledge a batch of ${messages.length} in a transaction${await abortTransaction()}`, exactlyOnce);
      }
    },

    ...(exactlyOnce && {
      commit: async () => {
        if (!transaction) return;
        try {
          await transaction.commit();
          transaction = null;
        } catch (error) {
          throw kafkaFailure(error, `Kafka did not commit a transaction${await abortTransaction()}`, exactlyOnce);
        }
      },
    }),

    describeTopic,
    brokersCreateTopics,

    ...(exactlyOnce?.progress && {
      readProgress: async () => {
        const { topic, key } = exactlyOnce.progress!;
        try {
          // Transactions open on the topic end within their timeout: wait that long, and a little more.
          return await readLastCommitted(kafka, topic, key, { timeoutMs: exactlyOnce.transactionTimeoutMs + PRODUCE_TIMEOUT_MS, stallMs: PROGRESS_STALL_MS });
        } catch (error) {
          throw kafkaFailure(error, `cannot read the exactly-once progress of ${key} from ${topic}`, exactlyOnce);
        }
      },
    }),

    async disconnect() {
      // A broker that stopped answering must not hold the session's end.
      await finishesWithin(producer.disconnect().catch(() => undefined), DISCONNECT_TIMEOUT_MS);
      if (adminConnected) await finishesWithin(admin.disconnect().catch(() => undefined), DISCONNECT_TIMEOUT_MS);
    },
  };
}

/** The progress record as a message of the transaction: keyed by slot and server, on the progress topic. */
function progressMessage(progress: ProgressRecordOptions, batch: readonly OutgoingMessage[]): OutgoingMessage {
  const value = progress.value(batch);
  // Only topic, key and value reach Kafka; the rest is what the batch's type asks of a message.
  return { ...batch.at(-1)!, topic: progress.topic, key: progress.key, value, headers: {}, headerBlock: NO_HEADER_BLOCK, deadLetter: false, label: 'progress' };
}

interface ProgressTopicAccess {
  describeTopic(topic: string): Promise<TopicDescription | null>;
  admin(): Promise<Admin>;
  logger: Logger;
}

/**
 * The progress topic: created compacted, one partition, as replicated as the cluster allows, if
 * missing; refused if no write to it can ever be acknowledged. Warned about if a record could be
 * deleted by retention (the relay then resends everything after its confirmed position: duplicates,
 * not loss) or lost with one broker.
 */
async function prepareProgressTopic(topic: string, access: ProgressTopicAccess): Promise<void> {
  let description = await access.describeTopic(topic);
  if (description === null) {
    const admin = await access.admin();
    const brokers = (await admin.describeCluster()).brokers.length;
    const replicationFactor = Math.min(3, brokers);
    await admin.createTopics({
      waitForLeaders: true,
      topics: [{ topic, numPartitions: 1, replicationFactor, configEntries: [{ name: 'cleanup.policy', value: 'compact' }, { name: 'min.insync.replicas', value: String(Math.max(1, replicationFactor - 1)) }] }],
    });
    access.logger.info({ topic, replicationFactor }, `created the exactly-once progress topic ${topic} (compacted, one partition)`);
    description = await access.describeTopic(topic);
    if (description === null) throw new RelayError('SINK_EXACTLY_ONCE', `the progress topic ${topic} was created but the broker does not describe it`);
  }
  const problems = durabilityProblems(description);
  if (description.minInsyncReplicas > description.replicationFactor) throw new RelayError('SINK_EXACTLY_ONCE', `the progress topic ${topic}: ${problems.join('; ')}; no transaction could commit`);
  if (!description.cleanupPolicy.split(',').includes('compact')) problems.push(`cleanup.policy=${description.cleanupPolicy} may delete the relay's last progress record (then a restart resends what it covered: duplicates); use cleanup.policy=compact`);
  if (problems.length > 0) access.logger.warn({ topic, problems }, `the exactly-once progress topic ${topic}: ${problems.join('; ')}`);
}

/** Kafka's answers that mean another producer with this transactional id took over. */
const FENCED_ERRORS = new Set(['PRODUCER_FENCED', 'INVALID_PRODUCER_EPOCH']);
/** Kafka's answers that mean the broker cannot keep exactly-once as configured. */
const EXACTLY_ONCE_REFUSALS = new Set(['INVALID_TRANSACTION_TIMEOUT', 'UNSUPPORTED_VERSION', 'KafkaJSNotImplemented', 'UNSUPPORTED_FOR_MESSAGE_FORMAT']);

const AUTHENTICATION_ERRORS = new Set(['KafkaJSSASLAuthenticationError', 'SASL_AUTHENTICATION_FAILED', 'ILLEGAL_SASL_STATE', 'UNSUPPORTED_SASL_MECHANISM']);
const AUTHORIZATION_ERRORS = new Set(['TOPIC_AUTHORIZATION_FAILED', 'CLUSTER_AUTHORIZATION_FAILED', 'GROUP_AUTHORIZATION_FAILED', 'TRANSACTIONAL_ID_AUTHORIZATION_FAILED']);

/**
 * A kafkajs failure as the relay's error. Refused credentials, a missing ACL or an untrusted
 * certificate stop the relay with what to fix (retrying repeats the refusal); anything else is a
 * retriable SINK_PUBLISH.
 */
export function kafkaFailure(error: unknown, what: string, exactlyOnce?: Pick<ExactlyOnceOptions, 'transactionalId'> | null): RelayError {
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
    if (exactlyOnce) hint += `, and for exactly-once WRITE and DESCRIBE on transactional id ${exactlyOnce.transactionalId} and READ on the progress topic (README: Delivery modes)`;
  } else if (exactlyOnce && names.some((name) => EXACTLY_ONCE_REFUSALS.has(name))) {
    code = 'SINK_EXACTLY_ONCE';
    hint = names.includes('INVALID_TRANSACTION_TIMEOUT')
      ? "; OUTBOX_TRANSACTION_TIMEOUT exceeds the broker's transaction.max.timeout.ms: lower it, or raise the broker's limit"
      : '; OUTBOX_DELIVERY=exactly-once needs brokers with transactions (Kafka 0.11 or later, with transaction.state.log settings the cluster can meet)';
  } else if (exactlyOnce && names.some((name) => FENCED_ERRORS.has(name))) {
    code = 'SINK_FENCED';
    hint = `; another relay instance started with transactional id ${exactlyOnce.transactionalId} and took over (this session ends; it waits as a standby while the other holds the slot)`;
  } else if (exactlyOnce && names.includes('COORDINATOR_NOT_AVAILABLE')) {
    hint = "; the transaction coordinator is not available: the brokers' transaction.state.log.replication.factor and transaction.state.log.min.isr must be met by the live brokers";
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

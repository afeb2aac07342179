import { tableReading } from '../decode/column-parsers.js';
import type { EncoderOptions, RegistryAccess } from '../encode/create-encoder.js';
import type { CutoverOptions } from '../ops/cutover.js';
import type { HandbackOptions } from '../ops/handback.js';
import type { RecoverOptions } from '../ops/recover.js';
import type { ReplayOptions } from '../ops/replay.js';
import type { StatusInput } from '../ops/status.js';
import type { ColumnMap } from '../outbox-table.js';
import { completeOutbox, outboxName, outboxTableRefs, tableOutboxOf, type Outbox, type OutboxEntry } from '../outboxes.js';
import { databaseAccess, type DatabaseAccess } from '../pg-connection.js';
import type { SlotServer } from '../slot-server.js';
import type { KafkaSecurity } from '../security/kafka-security.js';
import type { PruneOptions } from '../prune/pruner.js';
import type { SetupPattern, SetupTable, SetupTarget } from '../setup/setup.js';
import type { TableByAge } from '../setup/outbox-tables.js';
import type { DeliveryOptions } from '../delivery-chain.js';
import type { RelayOptions } from '../relay.js';
import type { CustomerRule } from '../webhooks/customer-rule.js';
import type { EndpointRules } from '../webhooks/delivery-store.js';
import type { RetryPolicy } from '../webhooks/retry-policy.js';
import type { KafkaClientName } from '../kafka/ports.js';
import type { CommandConfig, KafkaSecurityKey } from './commands.js';
import type { RelayConfig } from './options.js';

/*
 * The second stage of configuration (Temporal's compiled options): what a command loaded,
 * turned into the frozen options each stage takes, durations as `...Ms`. The only place that
 * knows both the option names and the stages.
 */

/** Where /metrics, /healthz and /readyz are served; null: not at all. */
export type HttpOptions = { readonly host: string; readonly port: number } | null;

export interface RunOptions {
  readonly logLevel: string;
  readonly setup: { readonly target: SetupTarget; readonly create: boolean };
  readonly encoder: EncoderOptions;
  readonly relay: RelayOptions;
  readonly slotMonitor: { readonly slotServer: SlotServer; readonly primary: DatabaseAccess; readonly slot: string; readonly intervalMs: number };
  readonly http: HttpOptions;
}

export interface PruneCommandOptions {
  readonly logLevel: string;
  readonly pruner: Omit<PruneOptions, 'logger' | 'metrics' | 'table' | 'createdAtColumn' | 'label'>;
  /** Every outbox table, each pruned by its own created_at column. */
  readonly tables: readonly TableByAge[];
  /** 0: one pass, then exit. */
  readonly everyMs: number;
  readonly http: HttpOptions;
}

export function compileRun(config: CommandConfig<'run'>): RunOptions {
  return frozen({
    logLevel: config.logLevel,
    setup: { target: setupTarget(config), create: config.setup },
    encoder: encoderOptions(config),
    relay: {
      source: {
        slotServer: slotServer(config),
        slot: config.slot,
        publication: config.publication,
        silenceTimeoutMs: config.replicationTimeout,
        ...sourceReading(config),
      },
      delivery: deliveryOptions(config, { clientId: config.kafkaClientId, onUnexpectedChange: config.onUnexpectedChange, onPoison: config.onPoison, transactionalId: streamTransactionalId(config) }),
      progressTopic: config.progressTopic,
      statusIntervalMs: config.statusInterval,
      shutdownTimeoutMs: config.shutdownTimeout,
      stallTimeoutMs: config.stallTimeout,
      reconnectMinMs: config.reconnectMin,
      reconnectMaxMs: config.reconnectMax,
      standbyPollMs: config.standbyPoll,
    },
    slotMonitor: { slotServer: slotServer(config), primary: database(config), slot: config.slot, intervalMs: config.slotPollInterval },
    http: httpOptions(config),
  });
}

export function compileReplay(config: CommandConfig<'replay'>): ReplayOptions {
  return frozen({
    logLevel: config.logLevel,
    database: database(config),
    filter: { since: config.since, until: config.until, eventTypes: config.eventType, eventIds: config.eventId },
    encoder: encoderOptions(config),
    // Its own client id, so that brokers' logs and quotas tell a replay from the stream. Only
    // inserts reach its pipeline: there is no unexpected change to fail on.
    // Exactly-once: its own transactional id, so that it never fences the stream (it republishes on purpose).
    delivery: deliveryOptions(config, { clientId: `${config.kafkaClientId}-replay`, onUnexpectedChange: 'fail', onPoison: config.onPoison, transactionalId: `${config.transactionalId ?? `outbox-relay.${outboxName(outboxes(config)[0]!)}`}.replay` }),
  });
}

export interface RecoverCommandOptions {
  readonly logLevel: string;
  readonly recover: RecoverOptions;
  readonly encoder: EncoderOptions;
  readonly dryRun: boolean;
}

/**
 * `recover` dead-letters a poison row whatever OUTBOX_ON_POISON says: stopping there would leave
 * the recovery unfinished (run, setup and prune refusing) with the same row in the way next time.
 */
const RECOVER_ON_POISON = 'dead-letter';

export function compileRecover(config: CommandConfig<'recover'>): RecoverCommandOptions {
  return frozen({
    logLevel: config.logLevel,
    // Its own client id, like replay; only inserts reach its pipeline.
    recover: { database: database(config), slotServer: slotServer(config), slot: config.slot, failover: config.slotFailover, delivery: deliveryOptions(config, { clientId: `${config.kafkaClientId}-recover`, onUnexpectedChange: 'fail', onPoison: RECOVER_ON_POISON, transactionalId: `${streamTransactionalId(config)}.recover` }) },
    encoder: encoderOptions(config),
    dryRun: config.dryRun,
  });
}

export interface CutoverCommandOptions {
  readonly logLevel: string;
  readonly cutover: CutoverOptions;
  readonly encoder: EncoderOptions;
  readonly dryRun: boolean;
}

/** `cutover` publishes the rows of a table the operator knows less well than the relay's own: a poison row is dead-lettered, as in recover. */
export function compileCutover(config: CommandConfig<'cutover'>): CutoverCommandOptions {
  return frozen({
    logLevel: config.logLevel,
    cutover: {
      target: { ...setupTarget(config), failover: config.slotFailover },
      delivery: deliveryOptions(config, { clientId: `${config.kafkaClientId}-cutover`, onUnexpectedChange: 'fail', onPoison: RECOVER_ON_POISON, transactionalId: `${streamTransactionalId(config)}.cutover` }),
      // CHECKS: required.
      pending: config.pending!,
    },
    encoder: encoderOptions(config),
    dryRun: config.dryRun,
  });
}

export function compileHandback(config: CommandConfig<'handback'>): { readonly logLevel: string; readonly handback: HandbackOptions; readonly dryRun: boolean } {
  return frozen({
    logLevel: config.logLevel,
    // CHECKS: both required.
    handback: { database: database(config), outboxes: outboxes(config), slot: config.slot, publication: config.publication, pending: config.pending!, markSent: config.markSent! },
    dryRun: config.dryRun,
  });
}

export function compilePrune(config: CommandConfig<'prune'>): PruneCommandOptions {
  return frozen({
    logLevel: config.logLevel,
    pruner: { database: database(config), slotServer: slotServer(config), slot: config.slot, retentionMs: config.pruneRetention, batchSize: config.pruneBatchSize },
    tables: tablesByAge(config),
    everyMs: config.pruneEvery,
    http: httpOptions(config),
  });
}

export interface WebhooksCommandOptions {
  readonly logLevel: string;
  readonly database: DatabaseAccess;
  readonly schema: string;
  readonly kafka: { readonly client: KafkaClientName; readonly brokers: readonly string[]; readonly clientId: string; readonly security: KafkaSecurity };
  /** Null: JSON events only (an Avro record is counted as undecodable). */
  readonly registry: RegistryAccess | null;
  readonly topics: readonly (string | RegExp)[];
  readonly groupId: string;
  /** How an event's customer is found. */
  readonly customerRule: CustomerRule;
  readonly policy: RetryPolicy;
  readonly rules: EndpointRules;
  readonly sender: { readonly connectTimeoutMs: number; readonly timeoutMs: number; readonly responseSnippetBytes: number; readonly allowAddresses: readonly string[] };
  readonly concurrency: number;
  /** Threads sending requests beside the main thread (0: the main thread sends them). */
  readonly senderThreads: number;
  readonly pollMs: number;
  readonly retentionMs: number;
  readonly shutdownTimeoutMs: number;
  readonly http: HttpOptions;
}

/** A Retry-After is honoured up to this long. */
const MAX_RETRY_AFTER_MS = 3_600_000;

export function compileWebhooks(config: CommandConfig<'webhooks'>): WebhooksCommandOptions {
  return frozen({
    logLevel: config.logLevel,
    database: database(config),
    schema: config.webhookSchema,
    kafka: { client: config.kafkaClient, brokers: config.kafkaBrokers, clientId: config.kafkaClientId, security: kafkaSecurity(config) },
    registry: config.schemaRegistryUrl === null ? null : registryAccess(config),
    topics: config.webhookTopics ?? [templateTopics(config.topicTemplate, config.deadLetterTopic)],
    groupId: config.webhookGroup,
    customerRule: config.webhookCustomerFrom,
    policy: { scheduleMs: config.webhookRetrySchedule, maxRetryAfterMs: MAX_RETRY_AFTER_MS },
    rules: { circuitFailures: config.webhookCircuitFailures, circuitCooldownMs: config.webhookCircuitCooldown, disableAfterMs: config.webhookDisableAfter },
    sender: { connectTimeoutMs: config.webhookConnectTimeout, timeoutMs: config.webhookTimeout, responseSnippetBytes: config.webhookResponseSnippet, allowAddresses: config.webhookAllowAddresses ?? [] },
    concurrency: config.webhookConcurrency,
    senderThreads: config.webhookSenderThreads,
    pollMs: config.webhookPoll,
    retentionMs: config.webhookRetention,
    shutdownTimeoutMs: config.shutdownTimeout,
    http: httpOptions(config),
  });
}

/** Every topic OUTBOX_TOPIC_TEMPLATE can name (a placeholder stands for any text), the dead-letter topic excepted. */
export function templateTopics(template: string, deadLetterTopic: string): RegExp {
  const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const pattern = template.split(/\{[^}]*\}/).map(escape).join('.+');
  return new RegExp(`^(?!${escape(deadLetterTopic)}$)${pattern}$`);
}

export function compileStatus(config: CommandConfig<'status'>): StatusInput {
  return frozen({
    database: database(config),
    slotServer: slotServer(config),
    slot: config.slot,
    publication: config.publication,
    tables: tablesByAge(config),
    // The slot is only read: its failover setting is never applied here.
    outboxes: setupTarget({ ...config, slotFailover: 'auto' }),
    kafkaBrokers: config.kafkaBrokers,
    kafkaClient: config.kafkaClient,
    kafkaSecurity: kafkaSecurity(config),
    deadLetterTopic: config.deadLetterTopic,
  });
}

export function setupTarget(config: Pick<RelayConfig, 'databaseUrl' | 'databasePassword' | 'publication' | 'slot' | 'slotFailover'> & ReplicaConfig & OutboxesConfig): SetupTarget {
  const entries = sourceEntries(config);
  // Each table with its format where it is known: its entry's, or OUTBOX_FORMAT for the commands that read it (not `setup`).
  const tables = outboxes(config).flatMap((outbox, i): (SetupTable | SetupPattern)[] => {
    const format = entries[i]!.format ?? config.format;
    if (outbox.kind === 'messages') return [];
    const where = outbox.kind === 'table' ? { table: outbox.table } : { pattern: outbox.pattern };
    return [{ ...where, columns: outbox.columns, ...(format && { format }) }];
  });
  return frozen({ database: database(config), outboxes: tables, publication: config.publication, slot: config.slot, failover: config.slotFailover, slotServer: slotServer(config) });
}

/** Every outbox table (OUTBOX_SOURCES' tables and patterns, or OUTBOX_TABLE), with its created_at column. */
function tablesByAge(config: Pick<RelayConfig, 'sources' | 'table' | 'columnCreatedAt'>): TableByAge[] {
  return sourceEntries(config).flatMap((entry): TableByAge[] => {
    if ('messages' in entry) return [];
    const createdAtColumn = entry.columns.createdAt ?? config.columnCreatedAt;
    return ['table' in entry ? { table: entry.table, createdAtColumn } : { pattern: entry.tables, createdAtColumn }];
  });
}

type ColumnKey = 'columnEventId' | 'columnAggregateType' | 'columnAggregateId' | 'columnEventType' | 'columnPayload' | 'columnHeaders' | 'columnCreatedAt';

function columnMap(config: Pick<RelayConfig, ColumnKey>): ColumnMap {
  return {
    eventId: config.columnEventId,
    aggregateType: config.columnAggregateType,
    aggregateId: config.columnAggregateId,
    eventType: config.columnEventType,
    payload: config.columnPayload,
    headers: config.columnHeaders,
    createdAt: config.columnCreatedAt,
  };
}

type DeliveryConfig = Pick<
  RelayConfig,
  | 'sources' | 'table' | 'kafkaBrokers' | 'kafkaClient' | 'kafkaCompression' | 'kafkaFastEncoder' | 'kafkaAutoCreateTopics' | KafkaSecurityKey | 'topicTemplate' | 'deadLetterTopic' | 'format'
  | ColumnKey
  | 'linger' | 'batchMaxEvents' | 'maxMessageBytes' | 'maxBufferedEvents' | 'delivery' | 'transactionTimeout'
>;

interface DeliveryOwn {
  readonly clientId: string;
  readonly onUnexpectedChange: DeliveryOptions['pipeline']['onUnexpectedChange'];
  readonly onPoison: DeliveryOptions['builder']['onPoison'];
  /** Exactly-once: the producer's transactional id. */
  readonly transactionalId: string;
}

/** Shared by every instance on the slot: a new one fences the old (a standby taking over). */
function streamTransactionalId(config: Pick<RelayConfig, 'transactionalId' | 'slot'>): string {
  return config.transactionalId ?? `outbox-relay.${config.slot}`;
}

function deliveryOptions(config: DeliveryConfig, own: DeliveryOwn): DeliveryOptions {
  return {
    outboxes: outboxes(config),
    builder: {
      deadLetterTopic: config.deadLetterTopic,
      onPoison: own.onPoison,
      maxMessageBytes: config.maxMessageBytes,
    },
    pipeline: { onUnexpectedChange: own.onUnexpectedChange, maxBufferedEvents: config.maxBufferedEvents },
    producer: { client: config.kafkaClient, brokers: config.kafkaBrokers, clientId: own.clientId, fastEncoder: config.kafkaFastEncoder, compression: config.kafkaCompression, maxMessageBytes: config.maxMessageBytes, autoCreateTopics: config.kafkaAutoCreateTopics, security: kafkaSecurity(config) },
    // A request is bounded like a record: the broker refuses a partition's batch above max.message.bytes.
    sink: { batchMaxEvents: config.batchMaxEvents, batchMaxBytes: config.maxMessageBytes, lingerMs: config.linger },
    topics: { maxMessageBytes: config.maxMessageBytes, autoCreate: config.kafkaAutoCreateTopics },
    exactlyOnce:
      config.delivery === 'exactly-once'
        ? {
            transactionalId: own.transactionalId,
            transactionTimeoutMs: config.transactionTimeout,
          }
        : null,
  };
}

/** What the outboxes are made of; `format` is the default of each entry's own, unknown to `setup` (which reads no encoding). */
type OutboxesConfig = Pick<RelayConfig, 'sources' | 'table' | 'topicTemplate' | ColumnKey> & { readonly format?: RelayConfig['format'] };

/** OUTBOX_SOURCES made whole, or the one table of OUTBOX_TABLE: each with its columns and topic template. */
export function outboxes(config: OutboxesConfig): Outbox[] {
  const defaults = { columns: columnMap(config), topicTemplate: config.topicTemplate, format: config.format ?? 'json' };
  return sourceEntries(config).map((entry) => completeOutbox(entry, defaults));
}

/** OUTBOX_SOURCES as written, or the one entry OUTBOX_TABLE stands for. */
function sourceEntries(config: Pick<RelayConfig, 'sources' | 'table'>): readonly OutboxEntry[] {
  return config.sources ?? [{ table: config.table, columns: {}, topicTemplate: null, format: null }];
}

/** What the replication stream needs of the outboxes: the tables and patterns, each table's column parsers, and whether messages are streamed. */
function sourceReading(config: OutboxesConfig): Pick<RelayOptions['source'], 'tables' | 'columnParsers' | 'messages'> {
  const all = outboxes(config);
  return {
    tables: outboxTableRefs(all),
    // Once per relation and session (pgoutput describes a table before its first row).
    columnParsers: (relation) => {
      const outbox = tableOutboxOf(all, relation);
      return outbox && tableReading(outbox).columnParsers;
    },
    messages: all.some((outbox) => outbox.kind === 'messages'),
  };
}

/** The encoders the outboxes use: JSON's, and Avro's when any outbox is Avro (its subjects resolved for those outboxes' topics). */
function encoderOptions(config: Pick<RelayConfig, 'format' | 'schemaRegistryUrl' | 'schemaRegistryCaFile' | 'schemaRegistryUsername' | 'schemaRegistryPassword' | 'schemasDir' | 'subjectStrategy' | 'autoRegister' | 'keySchema' | 'reconnectMin' | 'reconnectMax'> & OutboxesConfig): EncoderOptions {
  const avro = outboxes(config).filter((outbox) => outbox.format === 'avro');
  if (avro.length === 0) return { avro: null };
  return {
    avro: {
      registry: registryAccess(config),
      schemasDir: config.schemasDir,
      subjectStrategy: config.subjectStrategy,
      autoRegister: config.autoRegister,
      keySchema: config.keySchema,
      topicTemplates: avro.map((outbox) => outbox.topicTemplate),
      retryMinMs: config.reconnectMin,
      retryMaxMs: config.reconnectMax,
    },
  };
}

function registryAccess(config: Pick<RelayConfig, 'schemaRegistryUrl' | 'schemaRegistryCaFile' | 'schemaRegistryUsername' | 'schemaRegistryPassword'>): RegistryAccess {
  const { schemaRegistryUsername: username, schemaRegistryPassword: password } = config;
  return {
    // Never null here: CHECKS refuse avro without a registry when loading.
    url: config.schemaRegistryUrl!,
    // CHECKS: a user and a password come together.
    auth: username !== null && password !== null ? { username, password } : null,
    caFile: config.schemaRegistryCaFile,
  };
}

function database(config: Pick<RelayConfig, 'databaseUrl' | 'databasePassword'>): DatabaseAccess {
  return databaseAccess(config.databaseUrl, config.databasePassword);
}

/** Where the slot lives and the WAL is read: OUTBOX_REPLICA_URL's standby, or the primary; same login. */
/** OUTBOX_REPLICA_URL as a command loads it: null when unset. */
type ReplicaConfig = { readonly replicaUrl: RelayConfig['replicaUrl'] | null };

export function slotServer(config: Pick<RelayConfig, 'databaseUrl' | 'databasePassword'> & ReplicaConfig): SlotServer {
  return config.replicaUrl === null ? { database: database(config), standby: false } : { database: databaseAccess(config.replicaUrl, config.databasePassword), standby: true };
}

export function kafkaSecurity(config: Pick<RelayConfig, KafkaSecurityKey>): KafkaSecurity {
  return {
    tls: config.kafkaSsl
      ? { caFile: config.kafkaSslCaFile, certFile: config.kafkaSslCertFile, keyFile: config.kafkaSslKeyFile, keyPassword: config.kafkaSslKeyPassword, verifyHostname: config.kafkaSslVerifyHostname }
      : null,
    sasl: config.kafkaSaslMechanism
      ? { mechanism: config.kafkaSaslMechanism, username: config.kafkaSaslUsername, password: config.kafkaSaslPassword, tokenFile: config.kafkaSaslOauthbearerTokenFile, tokenProvider: config.kafkaSaslOauthbearerProvider }
      : null,
  };
}

function httpOptions(config: Pick<RelayConfig, 'httpHost' | 'httpPort'>): HttpOptions {
  // Port 0 turns the endpoint off (rather than asking the system for a free port).
  return config.httpPort === 0 ? null : { host: config.httpHost, port: config.httpPort };
}

/** Frozen all the way down (functions aside): no stage can change what another reads. */
function frozen<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const inner of Object.values(value)) frozen(inner);
    Object.freeze(value);
  }
  return value;
}

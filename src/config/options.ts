import { readFileSync } from 'node:fs';
import { DEFAULT_COLUMNS } from '../outbox-table.js';
import { completeOutbox, fixedTopicFormatConflict, OUTBOX_SOURCES_EXAMPLE, outboxName, parseOutboxEntries, TABLE_PLACEHOLDERS, type Outbox, type OutboxEntry } from '../outboxes.js';
import { SASL_MECHANISMS } from '../security/kafka-security.js';
import { Secret } from '../security/secret.js';
import { PLACEHOLDERS } from '../transform/topic-router.js';
import { KAFKA_CLIENT_NAMES, KAFKA_COMPRESSIONS, KAFKAJS_COMPRESSIONS } from '../kafka/ports.js';
import { parsePostgresUrl } from '../pg-url.js';
import { AddressGuard } from '../webhooks/address-guard.js';
import { CUSTOMER_RULE_EXAMPLES, parseCustomerRule, type CustomerRule } from '../webhooks/customer-rule.js';
import * as p from './parsers.js';

interface OptionFields<T> {
  readonly env: string;
  readonly parser: p.Parser<T>;
  /** Raw default, parsed like an operator's value; undefined means required. */
  readonly default?: string;
  readonly description: string;
  /**
   * A password, token or connection string: parsed into a Secret (never printed), and may be
   * given as a file instead, `<env>_FILE`, read again at each use (the Docker and Kubernetes
   * convention; rotation without restart). `file` makes the value from that file's path.
   */
  readonly secret?: boolean;
  readonly file?: (path: string) => T;
  /** A flag name other than the derived one, where the command reads better (`prune --every`). */
  readonly flag?: string;
  /** Where the option is listed, in `--help` and in docs/configuration.md. */
  readonly group: Group;
}

/**
 * How much an operator needs an option (Debezium's Field.withImportance), most needed first:
 * docs/configuration.md lists the first two tiers apart, each option with its one-line summary,
 * so that a first deployment reads a dozen options, not eighty.
 */
export const IMPORTANCE = {
  required: 'A first run cannot do without these.',
  common: 'The handful a first deployment sets.',
  tuning: 'Batching, timeouts and intervals: the defaults fit most loads.',
  expert: 'The rest: for one particular setup (certificate files, another client, exactly-once, column names, webhooks).',
} as const;

export type Importance = keyof typeof IMPORTANCE;

/** Every option has a tier; the first two tiers also a summary (one line, for the short list). */
type Tier = { readonly importance: 'required' | 'common'; readonly summary: string } | { readonly importance: 'tuning' | 'expert'; readonly summary?: undefined };

export type OptionSpec<T> = OptionFields<T> & Tier;

/** The groups options are listed in, in this order. */
export const GROUPS = {
  database: 'Postgres',
  kafka: 'Kafka',
  columns: 'Outbox columns',
  routing: 'Topics and poison events',
  encoding: 'Payload encoding',
  batching: 'Batching and memory',
  stream: 'Streaming, timeouts and reconnects',
  observe: 'Logs, metrics and health',
  prune: 'Pruning',
  webhooks: 'Webhooks',
} as const;

export type Group = keyof typeof GROUPS;

function option<T>(spec: OptionSpec<T>): OptionSpec<T> {
  return spec;
}

type SecretSpec = Omit<OptionFields<string>, 'secret' | 'file' | 'default'> & Tier;

/** A secret the command cannot do without (DATABASE_URL), from `<env>` or `<env>_FILE`. */
function secret(spec: SecretSpec): OptionSpec<Secret> {
  const { parser, env } = spec;
  return {
    ...spec,
    description: `${spec.description} Secret: never logged; or ${env}_FILE naming a file that holds it.`,
    secret: true,
    parser: { expected: parser.expected, parse: (raw) => Secret.fromValue(env, parser.parse(raw)) },
    file: (path) => {
      // Checked like a value given directly (its content is never shown), at start and at every re-read.
      return Secret.fromFile(`${env}_FILE`, path, (value) => {
        parser.parse(value);
      });
    },
  };
}

/** A secret that may be left unset (null). */
function optionalSecret(spec: SecretSpec): OptionSpec<Secret | null> {
  const required = secret(spec);
  return { ...required, default: '', parser: p.optional(required.parser) };
}

const postgresUrl: p.Parser<string> = {
  expected: 'a postgres:// or postgresql:// URL, e.g. postgres://relay:secret@db:5432/billing?sslmode=verify-full, or with several hosts (the first primary is used) postgres://relay@db1:5432,db2:5432/billing',
  parse: (raw) => {
    const value = raw.trim();
    const url = new URL(parsePostgresUrl(value).urls[0]!);
    if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') throw new Error(`is a ${url.protocol} URL, not postgres://`);
    return value;
  },
};

/** A token or key long enough not to be guessed. */
const longSecret: p.Parser<string> = {
  expected: 'at least 32 characters, e.g. from `openssl rand -base64 32`',
  parse: (raw) => {
    if (raw.length < 32) throw new Error(`has ${raw.length} characters`);
    return raw;
  },
};

const publicUrl: p.Parser<string> = {
  expected: 'an http:// or https:// URL without a path, e.g. https://webhooks.billing.example.com',
  parse: (raw) => {
    const url = new URL(raw.trim());
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error(`is a ${url.protocol} URL`);
    return url.origin;
  },
};

/** Checked here, with every other option, rather than when the relay first routes an event. */
const TEMPLATE_PLACEHOLDERS: readonly string[] = [...Object.keys(PLACEHOLDERS), ...TABLE_PLACEHOLDERS];

const topicTemplate: p.Parser<string> = {
  expected: `a topic name with placeholders among ${TEMPLATE_PLACEHOLDERS.map((key) => `{${key}}`).join(', ')}, e.g. outbox.{aggregate_type}`,
  parse: (raw) => {
    const template = raw.trim();
    if (template === '') throw new Error('is empty');
    for (const [, name] of template.matchAll(/\{([^}]*)\}/g)) if (!TEMPLATE_PLACEHOLDERS.includes(name!)) throw new Error(`has an unknown placeholder {${name}}`);
    return template;
  },
};

const outboxSources: p.Parser<OutboxEntry[]> = {
  expected: `a JSON array of outboxes, each {"table": "schema.name"} or {"tables": "tenant_*.name"} (optional "columns": {role: column} overriding OUTBOX_COLUMN_*, "topicTemplate" and "format": "json" or "avro") or {"messages": "<prefix>"} (optional "topicTemplate" and "format"), e.g. ${OUTBOX_SOURCES_EXAMPLE}`,
  parse: (raw) => parseOutboxEntries(raw, (template) => topicTemplate.parse(template)),
};

const httpUrl: p.Parser<string> = {
  expected: 'an http(s) URL, e.g. http://registry:8081 or http://apicurio:8080/apis/ccompat/v7',
  parse: (raw) => {
    let url: URL;
    try {
      url = new URL(raw.trim());
    } catch {
      throw new Error('is not a URL');
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('is not an http(s) URL');
    return raw.trim();
  },
};

const customerRule: p.Parser<CustomerRule> = {
  expected: `header:<name>, payload:<JSON pointer> or aggregate_id, e.g. ${CUSTOMER_RULE_EXAMPLES}`,
  parse: parseCustomerRule,
};

const webhookTopics: p.Parser<readonly (string | RegExp)[]> = {
  expected: 'comma-separated topic names or /regular expressions/, e.g. outbox.invoice,/^outbox\\./',
  parse: (raw) =>
    p.list.parse(raw).map((item) => {
      if (!item.startsWith('/')) return item;
      if (!item.endsWith('/') || item.length < 3) throw new Error(`has "${item}", which starts with / but does not end with one`);
      try {
        return new RegExp(item.slice(1, -1));
      } catch (error) {
        throw new Error(`has "${item}", not a regular expression (${(error as Error).message})`);
      }
    }),
};

const allowAddresses: p.Parser<readonly string[]> = {
  expected: 'comma-separated addresses or CIDRs, e.g. 127.0.0.1,10.20.0.0/16,::1/128',
  parse: (raw) => {
    const entries = p.list.parse(raw);
    new AddressGuard(entries);
    return entries;
  },
};

/**
 * Every setting of the relay, declared once: environment variable, type, default, meaning and
 * group (which commands read it: commands.ts). The flag for an option is its env name in kebab
 * case without the OUTBOX_ prefix (OUTBOX_TOPIC_TEMPLATE -> --topic-template). docs/configuration.md
 * and every `--help` are generated from this.
 */
export const OPTIONS = {
  databaseUrl: secret({ group: 'database', importance: 'required', summary: 'Postgres connection string, as a role with REPLICATION (the table\'s owner for `setup`).', env: 'DATABASE_URL', parser: postgresUrl, description: "Postgres connection string (a role with REPLICATION; the table's owner for `setup`). TLS as libpq spells it: sslmode (up to verify-full), sslrootcert, sslcert, sslkey (file paths). Several hosts, as libpq takes them (postgres://relay@db1:5432,db2:5432/billing), are tried in order and the first primary is kept (target_session_attrs primary, the default, or read-write), at every connection: the relay follows a promotion (docs/operations.md#postgres-failover)." }),
  databasePassword: optionalSecret({ group: 'database', importance: 'common', summary: 'DATABASE_URL\'s password kept out of the URL; DATABASE_PASSWORD_FILE in a container.', env: 'DATABASE_PASSWORD', parser: p.text, description: "Password of DATABASE_URL's user, when the URL has none; read at every connection (as DATABASE_PASSWORD_FILE, a rotated password needs no restart)." }),
  replicaUrl: optionalSecret({ group: 'database', importance: 'expert', env: 'OUTBOX_REPLICA_URL', parser: postgresUrl, description: "A physical standby (read replica) of DATABASE_URL's primary, Postgres 16 or later, on which the slot lives and from which the relay reads the WAL, so that decoding and sending every event costs the primary nothing. DATABASE_URL stays the primary: setup makes the publication there and the slot here, and prune writes there. The standby needs hot_standby_feedback = on, wal_level = logical (on the primary too) and primary_slot_name; setup and run refuse, naming the setting, without them. Same user and password as DATABASE_URL (DATABASE_PASSWORD). Promoted, it is read on as the primary it became (docs/operations.md#reading-from-a-standby)." }),
  table: option({ group: 'database', importance: 'common', summary: 'The outbox table the relay streams.', env: 'OUTBOX_TABLE', parser: p.qualifiedTable, default: 'public.event_outbox', description: 'The outbox table.' }),
  sources: option({
    group: 'database',
    importance: 'expert',
    env: 'OUTBOX_SOURCES',
    parser: p.optional(outboxSources),
    default: '',
    file: (path) => {
      try {
        return outboxSources.parse(readFileSync(path, 'utf8'));
      } catch (error) {
        throw new Error(`OUTBOX_SOURCES_FILE=${JSON.stringify(path)}: ${(error as Error).message}`, { cause: error });
      }
    },
    description: "Several outboxes through the one slot and publication, in commit order: tables, each with its own column names, topic template and format where they differ from OUTBOX_COLUMN_*, OUTBOX_TOPIC_TEMPLATE and OUTBOX_FORMAT ({schema} and {table} name the table), and table-less events written with pg_logical_emit_message(true, '<prefix>', <JSON>) (docs/outboxes.md). Or OUTBOX_SOURCES_FILE naming a JSON file. Empty: OUTBOX_TABLE alone.",
  }),
  slot: option({ group: 'database', importance: 'expert', env: 'OUTBOX_SLOT', parser: p.identifier, default: 'outbox_relay', description: 'Logical replication slot (pgoutput).' }),
  slotFailover: option({ group: 'database', importance: 'expert', env: 'OUTBOX_SLOT_FAILOVER', parser: p.oneOf('auto', 'true', 'false'), default: 'auto', description: "Whether the slot `setup` (and `recover`) creates is a failover slot (Postgres 17+): a standby with sync_replication_slots keeps a copy, and the relay streams on from it after a promotion (docs/operations.md#postgres-failover). auto: yes on 17 and later, a plain slot before; true: refuse a server before 17; false: a plain slot. `setup` alters an existing slot to match while no relay reads it; `run` says at start when it does not." }),
  publication: option({ group: 'database', importance: 'expert', env: 'OUTBOX_PUBLICATION', parser: p.identifier, default: 'outbox_relay', description: "Publication covering only the outbox table, publish = 'insert'." }),
  kafkaBrokers: option({ group: 'kafka', importance: 'required', summary: 'Kafka bootstrap servers, host:port, comma-separated.', env: 'KAFKA_BROKERS', parser: p.brokers, description: 'Kafka bootstrap servers, comma-separated host:port pairs.' }),
  kafkaClientId: option({ group: 'kafka', importance: 'expert', env: 'KAFKA_CLIENT_ID', parser: p.text, default: 'outbox-relay', description: 'Kafka client id.' }),
  kafkaSsl: option({ group: 'kafka', importance: 'common', summary: 'TLS to the brokers.', env: 'KAFKA_SSL', parser: p.boolean, default: 'false', description: 'TLS to the brokers (security.protocol SSL, or SASL_SSL with a KAFKA_SASL_MECHANISM).' }),
  kafkaSslCaFile: option({ group: 'kafka', importance: 'expert', env: 'KAFKA_SSL_CA_FILE', parser: p.optional(p.text), default: '', description: "PEM file of the CAs that signed the brokers' certificates; empty: the system's CAs." }),
  kafkaSslCertFile: option({ group: 'kafka', importance: 'expert', env: 'KAFKA_SSL_CERT_FILE', parser: p.optional(p.text), default: '', description: 'PEM client certificate, for mutual TLS (the principal is its subject).' }),
  kafkaSslKeyFile: option({ group: 'kafka', importance: 'expert', env: 'KAFKA_SSL_KEY_FILE', parser: p.optional(p.text), default: '', description: 'PEM private key of the client certificate.' }),
  kafkaSslKeyPassword: optionalSecret({ group: 'kafka', importance: 'expert', env: 'KAFKA_SSL_KEY_PASSWORD', parser: p.text, description: 'Passphrase of an encrypted KAFKA_SSL_KEY_FILE.' }),
  kafkaSslVerifyHostname: option({ group: 'kafka', importance: 'expert', env: 'KAFKA_SSL_VERIFY_HOSTNAME', parser: p.boolean, default: 'true', description: "Check that a broker's certificate names the host connected to (the chain is always verified)." }),
  kafkaSaslMechanism: option({ group: 'kafka', importance: 'common', summary: 'SASL login to the brokers: plain, scram-sha-256, scram-sha-512 or oauthbearer.', env: 'KAFKA_SASL_MECHANISM', parser: p.optional(p.oneOf(...SASL_MECHANISMS)), default: '', description: 'SASL authentication: plain, scram-sha-256, scram-sha-512 or oauthbearer; empty: none.' }),
  kafkaSaslUsername: option({ group: 'kafka', importance: 'common', summary: 'SASL user, with plain and scram-*.', env: 'KAFKA_SASL_USERNAME', parser: p.optional(p.text), default: '', description: 'SASL user (plain, scram-*).' }),
  kafkaSaslPassword: optionalSecret({ group: 'kafka', importance: 'common', summary: 'SASL password, with plain and scram-*; KAFKA_SASL_PASSWORD_FILE in a container.', env: 'KAFKA_SASL_PASSWORD', parser: p.text, description: 'SASL password (plain, scram-*); read again at each reconnect.' }),
  kafkaSaslOauthbearerTokenFile: option({ group: 'kafka', importance: 'expert', env: 'KAFKA_SASL_OAUTHBEARER_TOKEN_FILE', parser: p.optional(p.text), default: '', description: 'oauthbearer: file holding the token, read at each authentication (a Kubernetes projected token is replaced in place).' }),
  kafkaSaslOauthbearerProvider: option({ group: 'kafka', importance: 'expert', env: 'KAFKA_SASL_OAUTHBEARER_PROVIDER', parser: p.optional(p.text), default: '', description: 'oauthbearer: a JavaScript module whose default export returns a token, `{ value }` or a string (e.g. signed for Amazon MSK IAM; docs/security.md#managed-kafka).' }),
  kafkaClient: option({ group: 'kafka', importance: 'expert', env: 'OUTBOX_KAFKA_CLIENT', parser: p.oneOf(...KAFKA_CLIENT_NAMES), default: 'kafkajs', description: "The Kafka client: kafkajs (pure JavaScript, with the relay's per-partition send and encoder), librdkafka (Confluent's C client through @confluentinc/kafka-javascript, built by scripts/librdkafka.sh: idempotence, retries, transactions and Java's partitioner done by librdkafka; every compression codec) or platformatic (@platformatic/kafka, pure TypeScript, maintained; Node 22.22 or later; every compression codec). docs/kafka-clients.md gives the guarantee suites each passes, and their speed. For `webhooks`, the client its consumer reads with (librdkafka fetches ahead in its own threads)." }),
  kafkaCompression: option({ group: 'kafka', importance: 'tuning', env: 'OUTBOX_KAFKA_COMPRESSION', parser: p.oneOf(...KAFKA_COMPRESSIONS), default: 'none', description: 'Record batch compression: none, gzip, snappy, lz4 or zstd. kafkajs compresses with gzip only (refused at start otherwise); librdkafka has all of them.' }),
  kafkaFastEncoder: option({ group: 'kafka', importance: 'expert', env: 'OUTBOX_KAFKA_FAST_ENCODER', parser: p.boolean, default: 'true', description: "Encode Produce requests and frame every request with the relay's encoder (the same bytes as kafkajs's, a fraction of the CPU); false uses kafkajs's own. The relay's per-partition send, which keeps leader changes from losing events, is always used." }),
  delivery: option({ group: 'kafka', importance: 'common', summary: 'at-least-once (consumers dedupe on event_id) or exactly-once (Kafka transactions).', env: 'OUTBOX_DELIVERY', parser: p.oneOf('at-least-once', 'exactly-once'), default: 'at-least-once', description: 'at-least-once: after a crash, events after the confirmed position are sent again (consumers dedupe on event_id). exactly-once: every produce request is a Kafka transaction that also records how far the relay got; after a crash nothing is sent twice, for consumers that read with isolation.level=read_committed (docs/delivery-modes.md).' }),
  transactionalId: option({ group: 'kafka', importance: 'expert', env: 'OUTBOX_TRANSACTIONAL_ID', parser: p.optional(p.text), default: '', description: "exactly-once: the producer's transactional.id; empty: outbox-relay.<OUTBOX_SLOT>. Every instance on one slot must share it: a new one fences the old. recover uses <id>.recover, replay <id>.replay (without OUTBOX_TRANSACTIONAL_ID: outbox-relay.<OUTBOX_TABLE>.replay)." }),
  transactionTimeout: option({ group: 'kafka', importance: 'tuning', env: 'OUTBOX_TRANSACTION_TIMEOUT', parser: p.durationAtLeast(30_000, '30s'), default: '60s', description: "exactly-once: how long a transaction may stay open before the broker aborts it (transaction.timeout.ms); at least the 30 s a produce request may wait, at most the broker's transaction.max.timeout.ms." }),
  progressTopic: option({ group: 'kafka', importance: 'expert', env: 'OUTBOX_PROGRESS_TOPIC', parser: p.text, default: 'outbox.relay-progress', description: 'exactly-once: the compacted topic where each transaction records the last event it holds, keyed by server and slot; created (compacted, one partition) when missing.' }),
  kafkaAutoCreateTopics: option({ group: 'kafka', importance: 'expert', env: 'OUTBOX_KAFKA_AUTO_CREATE_TOPICS', parser: p.boolean, default: 'true', description: "Let the broker create a topic at its first event, where the brokers' auto.create.topics.enable allows it (read at the first missing topic; brokers that create none are taken as false, and reading it needs DESCRIBE_CONFIGS on the cluster). false: an event for a topic that does not exist is a dead letter (SINK_TOPIC_MISSING) naming the topic and the stream goes on; create the topic, then replay it." }),
  columnEventId: option({ group: 'columns', importance: 'expert', env: 'OUTBOX_COLUMN_EVENT_ID', parser: p.identifier, default: DEFAULT_COLUMNS.eventId, description: 'Column holding the event id (Kafka header `event_id`).' }),
  columnAggregateType: option({ group: 'columns', importance: 'expert', env: 'OUTBOX_COLUMN_AGGREGATE_TYPE', parser: p.optional(p.identifier), default: DEFAULT_COLUMNS.aggregateType, description: 'Column holding the aggregate type (Kafka header `aggregate_type`); empty: the table has none (no such header, and OUTBOX_TOPIC_TEMPLATE cannot use {aggregate_type}).' }),
  columnAggregateId: option({ group: 'columns', importance: 'expert', env: 'OUTBOX_COLUMN_AGGREGATE_ID', parser: p.identifier, default: DEFAULT_COLUMNS.aggregateId, description: 'Column holding the aggregate id (the Kafka key).' }),
  columnEventType: option({ group: 'columns', importance: 'expert', env: 'OUTBOX_COLUMN_EVENT_TYPE', parser: p.identifier, default: DEFAULT_COLUMNS.eventType, description: 'Column holding the event type.' }),
  columnPayload: option({ group: 'columns', importance: 'expert', env: 'OUTBOX_COLUMN_PAYLOAD', parser: p.identifier, default: DEFAULT_COLUMNS.payload, description: 'Column holding the payload: json or jsonb (published as Postgres stores it), text or varchar (its bytes), bytea (its raw bytes).' }),
  columnHeaders: option({ group: 'columns', importance: 'expert', env: 'OUTBOX_COLUMN_HEADERS', parser: p.identifier, default: DEFAULT_COLUMNS.headers, description: 'Column holding extra headers (jsonb object, optional).' }),
  columnCreatedAt: option({ group: 'columns', importance: 'expert', env: 'OUTBOX_COLUMN_CREATED_AT', parser: p.identifier, default: DEFAULT_COLUMNS.createdAt, description: 'Column holding the creation time.' }),
  topicTemplate: option({ group: 'routing', importance: 'common', summary: 'The topic of each event, e.g. outbox.{aggregate_type}.', env: 'OUTBOX_TOPIC_TEMPLATE', parser: topicTemplate, default: 'outbox.{aggregate_type}', description: 'Topic per event; placeholders {aggregate_type}, {event_type}, and the outbox table\'s {schema} and {table}.' }),
  deadLetterTopic: option({ group: 'routing', importance: 'common', summary: 'Where an event that cannot be published goes, with the reason.', env: 'OUTBOX_DEAD_LETTER_TOPIC', parser: p.text, default: 'outbox.dead-letter', description: 'Where events that cannot be decoded, routed or encoded go.' }),
  onPoison: option({ group: 'routing', importance: 'expert', env: 'OUTBOX_ON_POISON', parser: p.oneOf('dead-letter', 'fail'), default: 'dead-letter', description: 'A poison event goes to the dead-letter topic, or stops the relay (`fail`).' }),
  onUnexpectedChange: option({ group: 'routing', importance: 'expert', env: 'OUTBOX_ON_UNEXPECTED_CHANGE', parser: p.oneOf('warn', 'fail'), default: 'warn', description: 'An UPDATE, DELETE or TRUNCATE reaching the relay is logged, or stops it.' }),
  format: option({ group: 'encoding', importance: 'common', summary: 'json, or avro through a schema registry.', env: 'OUTBOX_FORMAT', parser: p.oneOf('json', 'avro'), default: 'json', description: 'Payload encoding: json (UTF-8 JSON of the payload column), or avro (schema of the event type from OUTBOX_SCHEMAS_DIR, Confluent wire format, via the schema registry).' }),
  schemaRegistryUrl: optionalSecret({ group: 'encoding', importance: 'common', summary: 'The schema registry, needed with avro.', env: 'SCHEMA_REGISTRY_URL', parser: httpUrl, description: 'Confluent-compatible schema registry (Apicurio: .../apis/ccompat/v7); user:password@ in the URL is sent as basic auth. Required with avro.' }),
  schemaRegistryCaFile: option({ group: 'encoding', importance: 'expert', env: 'SCHEMA_REGISTRY_CA_FILE', parser: p.optional(p.text), default: '', description: "PEM file of the CAs that signed an https registry's certificate, beside the system's." }),
  schemaRegistryUsername: option({ group: 'encoding', importance: 'expert', env: 'SCHEMA_REGISTRY_USERNAME', parser: p.optional(p.text), default: '', description: 'Basic auth user for the registry (instead of user:password@ in the URL).' }),
  schemaRegistryPassword: optionalSecret({ group: 'encoding', importance: 'expert', env: 'SCHEMA_REGISTRY_PASSWORD', parser: p.text, description: 'Basic auth password for the registry; read at each request.' }),
  schemasDir: option({ group: 'encoding', importance: 'expert', env: 'OUTBOX_SCHEMAS_DIR', parser: p.text, default: 'schemas', description: 'Folder of Avro schemas, one <event_type>.avsc per event type, at any depth (e.g. schemas/billing/invoice.paid.avsc).' }),
  subjectStrategy: option({ group: 'encoding', importance: 'expert', env: 'OUTBOX_SUBJECT_STRATEGY', parser: p.oneOf('topic', 'record', 'topic-record'), default: 'topic-record', description: 'Registry subject: topic-record (<topic>-<namespace>.<name>: several event types share a topic), topic (<topic>-value, one schema per topic) or record (<namespace>.<name>).' }),
  autoRegister: option({ group: 'encoding', importance: 'expert', env: 'OUTBOX_AUTO_REGISTER', parser: p.boolean, default: 'false', description: 'Register local schemas (development); off, use the version already registered and fail, naming the subject, if none equals the local schema.' }),
  keySchema: option({ group: 'encoding', importance: 'expert', env: 'OUTBOX_KEY_SCHEMA', parser: p.optional(p.text), default: '', description: 'Avro schema file for the Kafka key ("string", or a record of one string field); empty: the key is the aggregate id as a UTF-8 string.' }),
  linger: option({ group: 'batching', importance: 'tuning', env: 'OUTBOX_LINGER', parser: p.duration, default: '5ms', description: 'How long an event waits for more before its produce request is sent, also while a request is in flight (a full batch goes at once). Fewer, larger requests under load for at most this much latency; 0 sends every event at once.' }),
  batchMaxEvents: option({ group: 'batching', importance: 'tuning', env: 'OUTBOX_BATCH_MAX_EVENTS', parser: p.integer(1, 100_000), default: '2000', description: 'Most events in one Kafka produce request.' }),
  maxMessageBytes: option({ group: 'batching', importance: 'tuning', env: 'OUTBOX_MAX_MESSAGE_BYTES', parser: p.integer(1_024, 100_000_000), default: '1000000', description: "Largest record, and largest produce request, in bytes. A larger event is a dead letter instead of a request the broker refuses forever. Keep at or below the topics' max.message.bytes." }),
  maxBufferedEvents: option({ group: 'batching', importance: 'tuning', env: 'OUTBOX_MAX_BUFFERED_EVENTS', parser: p.integer(1, 10_000_000), default: '4000', description: 'Events decoded but not yet acknowledged before reading from Postgres pauses (memory bound).' }),
  setup: option({ group: 'stream', importance: 'expert', env: 'OUTBOX_SETUP', parser: p.boolean, default: 'false', description: '`run` first creates the table, publication and slot when missing.' }),
  statusInterval: option({ group: 'stream', importance: 'tuning', env: 'OUTBOX_STATUS_INTERVAL', parser: p.duration, default: '1s', description: 'How often the confirmed position is sent to Postgres.' }),
  shutdownTimeout: option({ group: 'stream', importance: 'tuning', env: 'OUTBOX_SHUTDOWN_TIMEOUT', parser: p.duration, default: '30s', description: 'On SIGTERM, how long to drain in-flight events before exiting.' }),
  replicationTimeout: option({ group: 'stream', importance: 'tuning', env: 'OUTBOX_REPLICATION_TIMEOUT', parser: p.durationAtLeast(1_000, '1s'), default: '60s', description: "A replication connection that delivered nothing (no data, no keepalive) for this long is dead: the relay drops it and reconnects, as Postgres's own subscriber does with wal_receiver_timeout. Keep it above the server's wal_sender_timeout / 2 (its keepalive interval)." }),
  stallTimeout: option({ group: 'stream', importance: 'tuning', env: 'OUTBOX_STALL_TIMEOUT', parser: p.durationAtLeast(1_000, '1s'), default: '3m', description: 'Events waiting with no progress (no position confirmed) for this long make /healthz fail, so that Kubernetes restarts a relay that is alive but stuck.' }),
  reconnectMin: option({ group: 'stream', importance: 'tuning', env: 'OUTBOX_RECONNECT_MIN', parser: p.duration, default: '500ms', description: 'First reconnect delay after a lost connection (doubles up to the max).' }),
  reconnectMax: option({ group: 'stream', importance: 'tuning', env: 'OUTBOX_RECONNECT_MAX', parser: p.duration, default: '15s', description: 'Longest reconnect delay.' }),
  standbyPoll: option({ group: 'stream', importance: 'tuning', env: 'OUTBOX_STANDBY_POLL', parser: p.duration, default: '2s', description: 'How often a standby checks whether the slot became free.' }),
  logLevel: option({ group: 'observe', importance: 'common', summary: 'How much the JSON log says.', env: 'LOG_LEVEL', parser: p.oneOf('trace', 'debug', 'info', 'warn', 'error', 'fatal'), default: 'info', description: 'Log level (payloads are logged at trace only).' }),
  httpHost: option({ group: 'observe', importance: 'common', summary: 'Address of /metrics and the health checks: 0.0.0.0 in a container.', env: 'OUTBOX_HTTP_HOST', parser: p.text, default: '127.0.0.1', description: 'Address of /metrics, /healthz and /readyz (0.0.0.0 in a container).' }),
  httpPort: option({ group: 'observe', importance: 'common', summary: 'Port of /metrics and the health checks.', env: 'OUTBOX_HTTP_PORT', parser: p.integer(0, 65_535), default: '9464', description: 'Port of /metrics, /healthz and /readyz; 0 turns the endpoint off.' }),
  slotPollInterval: option({ group: 'observe', importance: 'tuning', env: 'OUTBOX_SLOT_POLL_INTERVAL', parser: p.duration, default: '10s', description: "How often the slot's lag, wal_status and safe_wal_size are read for the metrics." }),
  pruneRetention: option({ group: 'prune', importance: 'common', summary: 'How long `prune` keeps rows the relay confirmed.', env: 'OUTBOX_PRUNE_RETENTION', flag: 'retention', parser: p.age, default: '7d', description: 'Keep rows at least this long (and always until the relay confirmed them; 0s allowed).' }),
  pruneEvery: option({ group: 'prune', importance: 'tuning', env: 'OUTBOX_PRUNE_EVERY', flag: 'every', parser: p.duration, default: '0s', description: 'Repeat a pass at this interval; 0s runs one pass and exits.' }),
  pruneBatchSize: option({ group: 'prune', importance: 'tuning', env: 'OUTBOX_PRUNE_BATCH_SIZE', flag: 'batch-size', parser: p.integer(1, 100_000), default: '1000', description: 'Rows deleted per transaction (bounds lock time).' }),
  webhookSchema: option({ group: 'webhooks', importance: 'expert', env: 'OUTBOX_WEBHOOK_SCHEMA', parser: p.identifier, default: 'outbox_webhooks', description: 'Postgres schema of the webhook tables (endpoints, events, events_without_customer, deliveries, attempts); `webhooks setup` creates it.' }),
  webhookTopics: option({ group: 'webhooks', importance: 'expert', env: 'OUTBOX_WEBHOOK_TOPICS', parser: p.optional(webhookTopics), default: '', description: "Topics the webhooks consumer reads, comma-separated; /regex/ for a pattern. Empty: every topic OUTBOX_TOPIC_TEMPLATE can name, except OUTBOX_DEAD_LETTER_TOPIC." }),
  webhookCustomerFrom: option({ group: 'webhooks', importance: 'required', summary: "webhooks: where an event's customer is (header:, payload: or aggregate_id).", env: 'OUTBOX_WEBHOOK_CUSTOMER_FROM', parser: customerRule, description: "Whose event it is, so that it goes to that customer's endpoints (and the platform-wide ones) and no other: header:<name> (a Kafka header, e.g. one the relay carries from the outbox's headers column), payload:<JSON pointer> (a field of the payload, e.g. payload:/customer/id; the same path into a decoded Avro payload), or aggregate_id (the record key, where the aggregate is the customer). An event whose customer is not found goes to no customer's endpoint: it is counted, listed by `webhooks without-customer`, and replayable (docs/webhooks.md#customers)." }),
  webhookGroup: option({ group: 'webhooks', importance: 'expert', env: 'OUTBOX_WEBHOOK_GROUP', parser: p.text, default: 'outbox-relay-webhooks', description: 'Kafka consumer group of the webhooks processes: processes in one group split the partitions. A new group reads the topics from their beginning; each endpoint is owed only the events produced from its --deliver-from on (by default, from when it was added).' }),
  webhookRetrySchedule: option({ group: 'webhooks', importance: 'tuning', env: 'OUTBOX_WEBHOOK_RETRY_SCHEDULE', parser: p.durationList, default: '0s,5s,5m,30m,2h,5h,10h,10h', description: "Delay before each attempt (the Standard Webhooks schedule): the first after the event is recorded, each next after a failure, with jitter (-20% to +20%). After the last one fails the delivery is failed: listed, counted, alerting, replayable." }),
  webhookConnectTimeout: option({ group: 'webhooks', importance: 'tuning', env: 'OUTBOX_WEBHOOK_CONNECT_TIMEOUT', parser: p.durationAtLeast(100, '100ms'), default: '5s', description: 'An endpoint not connected within this time fails the attempt.' }),
  webhookTimeout: option({ group: 'webhooks', importance: 'tuning', env: 'OUTBOX_WEBHOOK_TIMEOUT', parser: p.durationAtLeast(100, '100ms'), default: '15s', description: 'An attempt not answered (headers and the read part of the body) within this time, connecting included, fails.' }),
  webhookConcurrency: option({ group: 'webhooks', importance: 'tuning', env: 'OUTBOX_WEBHOOK_CONCURRENCY', parser: p.integer(1, 10_000), default: '200', description: "Requests in flight from one process, over every endpoint (each endpoint also has its own limit, `--max-in-flight`); the process holds up to four times as many deliveries (being recorded, queued, or having their results written)." }),
  webhookSenderThreads: option({ group: 'webhooks', importance: 'tuning', env: 'OUTBOX_WEBHOOK_SENDER_THREADS', parser: p.integer(0, 16), default: '1', description: "Threads of its own that send a process's requests (undici, the sockets, the answers), beside the thread that consumes and records (on 2 cores, 12–20% more deliveries a second in `npm run bench:webhooks`). 0: requests are sent from the main thread." }),
  webhookCircuitFailures: option({ group: 'webhooks', importance: 'tuning', env: 'OUTBOX_WEBHOOK_CIRCUIT_FAILURES', parser: p.integer(1, 1_000), default: '5', description: "Consecutive failed attempts that open an endpoint's circuit: nothing is sent to it for OUTBOX_WEBHOOK_CIRCUIT_COOLDOWN, then one probe; its success closes the circuit." }),
  webhookCircuitCooldown: option({ group: 'webhooks', importance: 'tuning', env: 'OUTBOX_WEBHOOK_CIRCUIT_COOLDOWN', parser: p.durationAtLeast(100, '100ms'), default: '30s', description: 'How long an open circuit waits before its probe.' }),
  webhookDisableAfter: option({ group: 'webhooks', importance: 'tuning', env: 'OUTBOX_WEBHOOK_DISABLE_AFTER', parser: p.durationAtLeast(1_000, '1s'), default: '5d', description: 'An endpoint failing for this long without one success is disabled, with the reason; its deliveries are held until `webhooks endpoint enable`.' }),
  webhookAllowAddresses: option({ group: 'webhooks', importance: 'expert', env: 'OUTBOX_WEBHOOK_ALLOW_ADDRESSES', parser: p.optional(allowAddresses), default: '', description: 'Addresses or CIDRs (comma-separated) an endpoint may resolve to although they are loopback, private, link-local or metadata addresses (refused otherwise, at `endpoint add` and at every connection), e.g. 10.20.0.0/16 for a private deployment.' }),
  webhookRetention: option({ group: 'webhooks', importance: 'tuning', env: 'OUTBOX_WEBHOOK_RETENTION', parser: p.age, default: '7d', description: 'Delivered deliveries (and their attempts) are deleted after this long; pending and failed ones are kept.' }),
  webhookPoll: option({ group: 'webhooks', importance: 'tuning', env: 'OUTBOX_WEBHOOK_POLL', parser: p.durationAtLeast(10, '10ms'), default: '250ms', description: "How often a process looks for due deliveries when nothing woke it (its own consumer wakes it at once; this bounds the wait for retries and for other processes' events)." }),
  webhookResponseSnippet: option({ group: 'webhooks', importance: 'tuning', env: 'OUTBOX_WEBHOOK_RESPONSE_SNIPPET', parser: p.integer(0, 65_536), default: '1024', description: "Bytes of an endpoint's answer kept with each attempt (for `webhooks attempts`)." }),
  webhookApiHost: option({ group: 'webhooks', importance: 'expert', env: 'OUTBOX_WEBHOOK_API_HOST', parser: p.text, default: '127.0.0.1', description: 'Address `webhooks api` listens on: the HTTP API, /openapi.json, the portal, /metrics and /healthz (0.0.0.0 in a container).' }),
  webhookApiPort: option({ group: 'webhooks', importance: 'tuning', env: 'OUTBOX_WEBHOOK_API_PORT', parser: p.integer(0, 65_535), default: '8088', description: 'Port of `webhooks api` (0: any free port, logged at start).' }),
  webhookApiToken: secret({ group: 'webhooks', importance: 'required', summary: 'webhooks api: the platform token (full access); OUTBOX_WEBHOOK_API_TOKEN_FILE in a container.', env: 'OUTBOX_WEBHOOK_API_TOKEN', parser: longSecret, description: "The platform's token for `webhooks api` (`Authorization: Bearer <token>`): every customer's objects, and minting customer tokens. Compared by its SHA-256 digest in constant time; read again at each request from its file." }),
  webhookApiSigningKey: secret({ group: 'webhooks', importance: 'required', summary: 'webhooks api: the key customer tokens are signed with (HMAC-SHA256).', env: 'OUTBOX_WEBHOOK_API_SIGNING_KEY', parser: longSecret, description: "Key of the HMAC-SHA256 signature of customer tokens (minted by `POST /v1/customer-tokens`, never stored). Changing it ends every customer token at once; every `webhooks api` replica needs the same one." }),
  webhookApiPublicUrl: option({ group: 'webhooks', importance: 'expert', env: 'OUTBOX_WEBHOOK_API_PUBLIC_URL', parser: p.optional(publicUrl), default: '', description: "Base URL of `webhooks api` as the platform's customers reach it (e.g. https://webhooks.billing.example.com), for the portal links of minted tokens; empty: the request's own origin." }),
  webhookApiRateLimit: option({ group: 'webhooks', importance: 'tuning', env: 'OUTBOX_WEBHOOK_API_RATE_LIMIT', parser: p.integer(1, 1_000_000), default: '600', description: 'Requests per minute a caller may make to `webhooks api` (per replica): the platform, or one customer whichever of its tokens it uses, or an address for requests without a valid token; beyond it, 429 with Retry-After.' }),
} as const;

export type OptionKey = keyof typeof OPTIONS;

export type RelayConfig = {
  readonly [K in OptionKey]: (typeof OPTIONS)[K] extends OptionSpec<infer T> ? T : never;
};

/**
 * A rule across values, declared with them (Debezium's validators): it runs once every value it
 * uses is loaded and valid, and its problem is listed with all the others.
 */
export interface Check<V> {
  readonly uses: readonly (keyof V & string)[];
  /** The problem, or null. `name` says how the operator set a value: its flag or its variable. */
  readonly problem: (values: V, name: (key: keyof V & string) => string) => string | null;
}

function check<const K extends OptionKey>(uses: readonly K[], problem: (values: Pick<RelayConfig, K>, name: (key: K) => string) => string | null): Check<RelayConfig> {
  return { uses, problem };
}

/** What makes the outboxes Avro, named as the operator set it (null: none is): OUTBOX_FORMAT, or entries of OUTBOX_SOURCES saying so. */
function avroOutboxes(c: Pick<RelayConfig, 'format' | 'sources'>, name: (key: 'format' | 'sources') => string): string | null {
  const entries = c.sources ?? [{ format: null }];
  const avro = entries.filter((entry) => (entry.format ?? c.format) === 'avro');
  if (avro.length === 0) return null;
  return avro.every((entry) => entry.format === null) ? `${name('format')}=avro` : `Avro outboxes (${name('sources')} entries with "format": "avro")`;
}

/**
 * Two outboxes of different formats that write one topic whatever their events hold (equal
 * templates with no placeholder left), named with their templates as the operator set them;
 * null if none. Where an event's placeholders decide, the record builder refuses at run time.
 */
function topicFormatConflict(c: Pick<RelayConfig, 'sources' | 'topicTemplate' | 'format'>, name: (key: 'sources' | 'topicTemplate') => string): string | null {
  const entries = c.sources ?? [];
  const outboxes = entries.map((entry) => completeOutbox(entry, { columns: DEFAULT_COLUMNS, topicTemplate: c.topicTemplate, format: c.format }));
  const conflict = fixedTopicFormatConflict(outboxes);
  if (!conflict) return null;
  const described = (outbox: Outbox) => {
    const { topicTemplate } = entries[outboxes.indexOf(outbox)]!;
    return `${outboxName(outbox)} (${outbox.format}, ${topicTemplate === null ? `${name('topicTemplate')} "${c.topicTemplate}"` : `topic template "${topicTemplate}"`})`;
  };
  const [first, second] = conflict.outboxes;
  return `${name('sources')}: outboxes ${described(first)} and ${described(second)} both write topic ${conflict.topic}: its consumers would read two formats; give one of them a "topicTemplate" of its own, or both the same "format"`;
}

/** Rules across options; a command is held to those whose options it reads. */
export const CHECKS: readonly Check<RelayConfig>[] = [
  check(['kafkaClient', 'kafkaCompression'], (c, name) => (c.kafkaClient === 'kafkajs' && !KAFKAJS_COMPRESSIONS.has(c.kafkaCompression) ? `${name('kafkaCompression')}=${c.kafkaCompression} needs ${name('kafkaClient')}=librdkafka: kafkajs compresses with gzip only (expected none or gzip)` : null)),
  // Refused at start, not as a dead letter per event: every event would route to "null".
  check(['topicTemplate', 'columnAggregateType'], (c, name) => (c.columnAggregateType === null && c.topicTemplate.includes('{aggregate_type}') ? `${name('topicTemplate')} "${c.topicTemplate}" uses {aggregate_type}, but ${name('columnAggregateType')} is empty (the table has no aggregate type): route by {event_type} or a fixed name, e.g. billing.{event_type}` : null)),
  check(['sources', 'topicTemplate', 'columnAggregateType'], (c, name) => {
    const without = (c.sources ?? []).find((entry) => !('messages' in entry) && (entry.columns.aggregateType === undefined ? c.columnAggregateType : entry.columns.aggregateType) === null && (entry.topicTemplate ?? c.topicTemplate).includes('{aggregate_type}'));
    if (!without || 'messages' in without) return null;
    const { schema, name: table } = 'table' in without ? without.table : without.tables;
    return `${name('sources')}: the entry of ${schema}.${table} routes by {aggregate_type}, but that table has no aggregate type column: route by {event_type} or a fixed name`;
  }),
  check(['reconnectMin', 'reconnectMax'], (c, name) => (c.reconnectMin > c.reconnectMax ? `${name('reconnectMin')} (${c.reconnectMin}ms) exceeds ${name('reconnectMax')} (${c.reconnectMax}ms)` : null)),
  // Reading pauses at maxBufferedEvents unacknowledged: a larger batch could never fill.
  check(['batchMaxEvents', 'maxBufferedEvents'], (c, name) => (c.batchMaxEvents > c.maxBufferedEvents ? `${name('batchMaxEvents')} (${c.batchMaxEvents}) exceeds ${name('maxBufferedEvents')} (${c.maxBufferedEvents})` : null)),
  check(['sources', 'topicTemplate', 'format'], topicFormatConflict),
  check(['format', 'sources', 'schemaRegistryUrl'], (c, name) => (c.schemaRegistryUrl === null && avroOutboxes(c, name) ? `${name('schemaRegistryUrl')} is required with ${avroOutboxes(c, name)}` : null)),
  check(['format', 'sources', 'keySchema'], (c, name) => (c.keySchema !== null && !avroOutboxes(c, name) ? `${name('keySchema')} needs an Avro outbox (${name('format')}=avro, or "format": "avro" in an ${name('sources')} entry): JSON outboxes are keyed by the aggregate id as text` : null)),
  // pg lets a password in the URL win over the separate one: two passwords is a mistake to name.
  check(['databaseUrl', 'databasePassword'], (c, name) => (c.databasePassword !== null && new URL(parsePostgresUrl(c.databaseUrl.reveal()).urls[0]!).password !== '' ? `${name('databaseUrl')} has a password and ${name('databasePassword')} is set; give one of them` : null)),
  check(['kafkaSaslMechanism', 'kafkaSaslUsername', 'kafkaSaslPassword'], (c, name) => {
    const usesPassword = c.kafkaSaslMechanism !== null && c.kafkaSaslMechanism !== 'oauthbearer';
    return usesPassword && (c.kafkaSaslUsername === null || c.kafkaSaslPassword === null) ? `${name('kafkaSaslMechanism')}=${c.kafkaSaslMechanism} needs ${name('kafkaSaslUsername')} and ${OPTIONS.kafkaSaslPassword.env} (or ${OPTIONS.kafkaSaslPassword.env}_FILE)` : null;
  }),
  check(['kafkaSaslMechanism', 'kafkaSaslOauthbearerTokenFile', 'kafkaSaslOauthbearerProvider'], (c, name) => {
    if (c.kafkaSaslMechanism !== 'oauthbearer') return null;
    const given = [c.kafkaSaslOauthbearerTokenFile, c.kafkaSaslOauthbearerProvider].filter((value) => value !== null).length;
    return given === 1 ? null : `${name('kafkaSaslMechanism')}=oauthbearer needs exactly one of ${name('kafkaSaslOauthbearerTokenFile')} and ${name('kafkaSaslOauthbearerProvider')}`;
  }),
  check(['kafkaSslCertFile', 'kafkaSslKeyFile'], (c, name) => ((c.kafkaSslCertFile === null) !== (c.kafkaSslKeyFile === null) ? `${name('kafkaSslCertFile')} and ${name('kafkaSslKeyFile')} go together (mutual TLS)` : null)),
  check(['kafkaSsl', 'kafkaSslCaFile', 'kafkaSslCertFile'], (c, name) => (!c.kafkaSsl && (c.kafkaSslCaFile !== null || c.kafkaSslCertFile !== null) ? `${name('kafkaSslCaFile')} / ${name('kafkaSslCertFile')} are set but ${name('kafkaSsl')} is false: set ${name('kafkaSsl')}=true (or remove them)` : null)),
  check(['schemaRegistryUsername', 'schemaRegistryPassword'], (c, name) => ((c.schemaRegistryUsername === null) !== (c.schemaRegistryPassword === null) ? `${name('schemaRegistryUsername')} and ${name('schemaRegistryPassword')} go together` : null)),
];

export function flagName(key: OptionKey): string {
  const spec: OptionSpec<unknown> = OPTIONS[key];
  if (spec.flag) return `--${spec.flag}`;
  return `--${OPTIONS[key].env.replace(/^OUTBOX_/, '').toLowerCase().replace(/_/g, '-')}`;
}

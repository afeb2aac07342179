import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { CDC_TABLE, PUBLICATION } from './db.js';
import { startDebezium } from './debezium.js';
import type { Rgb } from './png.js';
import { Child } from './proc.js';
import { Recvlogical } from './recvlogical.js';

/**
 * What runs a contender: `recvlogical` is Postgres's own pg_recvlogical (the ceiling every
 * figure is divided by), `stages` the relay's own source and decode stages without Kafka,
 * `relay` the relay itself (`node dist/cli.js run`) with the contender's variables.
 */
export type ContenderKind = 'recvlogical' | 'stages' | 'relay' | 'polling' | 'debezium';

interface Contender {
  readonly kind: ContenderKind;
  /** In the report's tables. */
  readonly label: string;
  /** In the charts. */
  readonly short: string;
  readonly color: Rgb;
  /** Relay only: its variables on top of the bench's (and of `relayEnv` below, for those known only at run time). */
  readonly env?: Readonly<Record<string, string>>;
  /** compression: drains only, and only with --compression (or named in --only). */
  readonly group?: 'compression';
}

function relay(label: string, short: string, color: Rgb, env: Record<string, string> = {}): Contender {
  return { kind: 'relay', label, short, color, env };
}

const LIBRDKAFKA = { OUTBOX_KAFKA_CLIENT: 'librdkafka' };
const PLATFORMATIC = { OUTBOX_KAFKA_CLIENT: 'platformatic' };

/** A relay JSON with one codec (OUTBOX_KAFKA_COMPRESSION), on kafkajs or librdkafka. */
function compressed(codec: string, client: 'kafkajs' | 'librdkafka', color: Rgb): Contender {
  const on = client === 'librdkafka' ? ' on librdkafka' : '';
  return { ...relay(`outbox-relay JSON${on}, ${codec}`, `relay JSON${client === 'librdkafka' ? ' rdkafka' : ''} ${codec}`, color, { OUTBOX_KAFKA_CLIENT: client, OUTBOX_KAFKA_COMPRESSION: codec }), group: 'compression' };
}

/**
 * Every contender, in the order they run and are reported. A relay that differs only by its
 * variables is one line here, e.g.
 * `'relay-json-eos': relay('outbox-relay JSON, exactly-once', 'relay JSON EOS', [255, 127, 14], { OUTBOX_EXACTLY_ONCE: 'true' }),`
 * (then it drains every workload and runs every steady load like relay-json; --only takes its name).
 */
export const CONTENDERS = {
  'pg-recvlogical': { kind: 'recvlogical', label: 'pg_recvlogical ceiling (Postgres, no Kafka)', short: 'pg_recvlogical', color: [110, 110, 110] },
  'relay-stages': { kind: 'stages', label: 'relay stages: source + decode (no Kafka)', short: 'relay stages', color: [180, 180, 180] },
  'relay-json': relay('outbox-relay JSON', 'relay JSON', [31, 119, 180]),
  // Each produce request a Kafka transaction: markers take offsets, so its drain is counted from the relay's own committed count.
  'relay-json-exactly-once': relay('outbox-relay JSON, exactly-once', 'relay JSON EOS', [255, 127, 14], { OUTBOX_DELIVERY: 'exactly-once' }),
  'relay-json-sasl-ssl': relay('outbox-relay JSON, SASL_SSL broker', 'relay JSON, SASL_SSL', [148, 103, 189]),
  'relay-avro': relay('outbox-relay Avro', 'relay Avro', [23, 190, 207], { OUTBOX_FORMAT: 'avro' }),
  // The same relay on librdkafka (OUTBOX_KAFKA_CLIENT): which client is the default is decided by these against relay-json.
  'relay-json-librdkafka': relay('outbox-relay JSON on librdkafka', 'relay JSON rdkafka', [140, 86, 75], LIBRDKAFKA),
  'relay-json-librdkafka-exactly-once': relay('outbox-relay JSON on librdkafka, exactly-once', 'relay JSON rdkafka EOS', [227, 119, 194], { ...LIBRDKAFKA, OUTBOX_DELIVERY: 'exactly-once' }),
  // And on @platformatic/kafka (issue 64): the third client, measured beside the other two.
  'relay-json-platformatic': relay('outbox-relay JSON on @platformatic/kafka', 'relay JSON platformatic', [188, 189, 34], PLATFORMATIC),
  'relay-json-platformatic-exactly-once': relay('outbox-relay JSON on @platformatic/kafka, exactly-once', 'relay JSON platformatic EOS', [127, 127, 127], { ...PLATFORMATIC, OUTBOX_DELIVERY: 'exactly-once' }),
  'relay-json-gzip': compressed('gzip', 'kafkajs', [158, 218, 229]),
  'relay-json-librdkafka-gzip': compressed('gzip', 'librdkafka', [196, 156, 148]),
  'relay-json-librdkafka-snappy': compressed('snappy', 'librdkafka', [247, 182, 210]),
  'relay-json-librdkafka-lz4': compressed('lz4', 'librdkafka', [199, 199, 199]),
  'relay-json-librdkafka-zstd': compressed('zstd', 'librdkafka', [219, 219, 141]),
  polling: { kind: 'polling', label: 'polling relay', short: 'polling relay', color: [214, 39, 40] },
  debezium: { kind: 'debezium', label: 'Debezium 3.6 + EventRouter', short: 'Debezium', color: [44, 160, 44] },
} as const satisfies Record<string, Contender>;

export type ContenderName = keyof typeof CONTENDERS;

/** The ceiling every contender's events/s is divided by. */
export const CEILING = 'pg-recvlogical' satisfies ContenderName;

/** Names of results written before the pg_recvlogical ceiling (--render of an old run). */
export const RENAMED: Readonly<Record<string, ContenderName>> = { ceiling: 'relay-stages' };

export function spec(name: ContenderName): Contender {
  return CONTENDERS[name];
}

/** Contenders that only drain, and only when asked for (--compression, or --only naming them). */
export function isOptIn(name: ContenderName): boolean {
  return (CONTENDERS[name] as Contender).group === 'compression';
}

export function kind(name: ContenderName): ContenderKind {
  return CONTENDERS[name].kind;
}

/** The contenders that are the relay itself (`node dist/cli.js run`). */
export function isRelay(name: ContenderName): boolean {
  return kind(name) === 'relay';
}

/** The contenders that publish nothing to Kafka (they only read the WAL). */
export function isCeiling(name: ContenderName): boolean {
  return kind(name) === 'recvlogical' || kind(name) === 'stages';
}

export function label(name: ContenderName): string {
  return CONTENDERS[name].label;
}

/** Header carrying the event id in each contender's records (Debezium's EventRouter: `id`). */
export function idHeader(name: ContenderName): string {
  return kind(name) === 'debezium' ? 'id' : 'event_id';
}

/** The contender's own replication slot (none for the polling relay). */
export function slot(name: ContenderName): string {
  return kind(name) === 'polling' ? '' : `bench_${name.replace(/-/g, '_')}`;
}

export interface Services {
  readonly databaseUrl: string;
  readonly kafkaBrokers: string;
  readonly schemaRegistryUrl: string;
  readonly pgPort: number;
  readonly workDir: string;
  readonly debeziumHome: string | null;
  readonly pollingBatch: number;
  readonly pollingIdleMs: number;
  /** Node flags of the relays: --profile's and --relay-node-flags, after the shipped ones so they win. */
  readonly relayNodeArgs: readonly string[];
  /** pg_recvlogical of the server's major version (findRecvlogical), null if there is none. */
  readonly recvlogical: string | null;
  /** relay-avro: the schema directory and registry settings (OUTBOX_FORMAT=avro comes from its entry above). */
  readonly avroEnv: Record<string, string>;
  /** relay-json-sasl-ssl: the relay's KAFKA_* variables for the secured broker (null without --secure). */
  readonly secureKafkaEnv: Record<string, string> | null;
  /** The broker's log.dirs: what a drained topic takes on disk is read there (null: not measured). */
  readonly kafkaLogDir: string | null;
}

/** What one start of a contender needs besides the services. */
export interface StartOptions {
  /** relay-stages: the inserts to count before it reports done. */
  readonly count?: number;
  /** pg-recvlogical: the LSN it stops at (--endpos), the backlog's end. */
  readonly endLsn?: string;
  /** Relays: settings of this workload on top of the contender's. */
  readonly relayEnv?: Record<string, string>;
  /** The slot to read (a repeated drain's own); the contender's own slot by default. */
  readonly slot?: string;
}

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const CLI = join(REPO, 'dist', 'cli.js');
/** As the Dockerfile, `npm start` and scripts/dev.sh start the relay. */
const RELAY_NODE_FLAGS = ['--max-semi-space-size=16'];
export const BUILD_DIR = join(REPO, 'node_modules', '.cache', 'outbox-relay-bench');

/** Starts a contender that publishes to `<topicPrefix>.<aggregate_type>`. */
export const RELAY_HTTP_PORT = Number(process.env.BENCH_RELAY_HTTP_PORT ?? 60084);

export function startContender(name: ContenderName, services: Services, topicPrefix: string, options: StartOptions = {}): Child {
  const contender = spec(name);
  const slotName = options.slot ?? slot(name);
  switch (contender.kind) {
    case 'recvlogical':
      if (!options.endLsn) throw new Error(`${name} needs the backlog's end LSN`);
      if (!services.recvlogical) throw new Error('no pg_recvlogical binary found (set OUTBOX_PG_BIN)');
      return new Recvlogical(services.recvlogical, services.databaseUrl, slotName, PUBLICATION, options.endLsn);
    case 'stages':
      return new Child(name, process.execPath, [join(BUILD_DIR, 'bench', 'contenders', 'ceiling.js')], {
        DATABASE_URL: services.databaseUrl,
        BENCH_SLOT: slotName,
        BENCH_PUBLICATION: PUBLICATION,
        BENCH_COUNT: String(options.count ?? 0),
        BENCH_TABLE: `public.${CDC_TABLE}`,
      });
    case 'relay':
      if (name === 'relay-json-sasl-ssl' && !services.secureKafkaEnv) throw new Error('the secured broker is not started (--secure)');
      return new Child(name, process.execPath, [...RELAY_NODE_FLAGS, ...services.relayNodeArgs, CLI, 'run'], {
        DATABASE_URL: services.databaseUrl,
        KAFKA_BROKERS: services.kafkaBrokers,
        SCHEMA_REGISTRY_URL: services.schemaRegistryUrl,
        OUTBOX_TABLE: `public.${CDC_TABLE}`,
        OUTBOX_SLOT: slotName,
        OUTBOX_PUBLICATION: PUBLICATION,
        OUTBOX_TOPIC_TEMPLATE: `${topicPrefix}.{aggregate_type}`,
        OUTBOX_DEAD_LETTER_TOPIC: `${topicPrefix}.dead-letter`,
        LOG_LEVEL: 'info',
        // Not the default 9464, which other relays on the machine may hold.
        OUTBOX_HTTP_PORT: String(RELAY_HTTP_PORT),
        ...(name === 'relay-json-sasl-ssl' ? services.secureKafkaEnv : {}),
        ...options.relayEnv,
        ...contender.env,
        ...(contender.env?.OUTBOX_FORMAT === 'avro' ? services.avroEnv : {}),
      });
    case 'polling':
      return new Child(name, process.execPath, [join(BUILD_DIR, 'bench', 'contenders', 'polling.js')], {
        DATABASE_URL: services.databaseUrl,
        KAFKA_BROKERS: services.kafkaBrokers,
        BENCH_TOPIC_PREFIX: topicPrefix,
        BENCH_BATCH: String(services.pollingBatch),
        BENCH_IDLE_MS: String(services.pollingIdleMs),
      });
    case 'debezium':
      if (!services.debeziumHome) throw new Error('Debezium is not available');
      return startDebezium({
        home: services.debeziumHome,
        workDir: join(services.workDir, 'debezium'),
        kafkaBrokers: services.kafkaBrokers,
        pgPort: services.pgPort,
        database: new URL(services.databaseUrl).pathname.slice(1),
        slot: slotName,
        publication: PUBLICATION,
        table: CDC_TABLE,
        topicPrefix,
        restPort: Number(process.env.BENCH_CONNECT_REST_PORT ?? 60083),
      });
  }
}

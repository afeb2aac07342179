import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { CDC_TABLE, PUBLICATION } from './db.js';
import { startDebezium } from './debezium.js';
import { Child } from './proc.js';

export type ContenderName = 'ceiling' | 'relay-json' | 'relay-json-sasl-ssl' | 'relay-avro' | 'polling' | 'debezium';

/** The contenders that are the relay itself (`node dist/cli.js run`). */
export function isRelay(name: ContenderName): boolean {
  return name.startsWith('relay-');
}

export const LABEL: Record<ContenderName, string> = {
  ceiling: 'decode ceiling (no Kafka)',
  'relay-json': 'outbox-relay JSON',
  'relay-json-sasl-ssl': 'outbox-relay JSON, SASL_SSL broker',
  'relay-avro': 'outbox-relay Avro',
  polling: 'polling relay',
  debezium: 'Debezium 3.6 + EventRouter',
};

/** Header carrying the event id in each contender's records (Debezium's EventRouter: `id`). */
export const ID_HEADER: Record<ContenderName, string> = {
  ceiling: 'event_id',
  'relay-json': 'event_id',
  'relay-json-sasl-ssl': 'event_id',
  'relay-avro': 'event_id',
  polling: 'event_id',
  debezium: 'id',
};

export const SLOT: Record<ContenderName, string> = {
  ceiling: 'bench_ceiling',
  'relay-json': 'bench_relay_json',
  'relay-json-sasl-ssl': 'bench_relay_json_sasl_ssl',
  'relay-avro': 'bench_relay_avro',
  polling: '',
  debezium: 'bench_debezium',
};

export interface Services {
  readonly databaseUrl: string;
  readonly kafkaBrokers: string;
  readonly schemaRegistryUrl: string;
  readonly pgPort: number;
  readonly workDir: string;
  readonly debeziumHome: string | null;
  readonly pollingBatch: number;
  readonly pollingIdleMs: number;
  readonly relayNodeArgs: readonly string[];
  readonly avroEnv: Record<string, string>;
  /** relay-json-sasl-ssl: the relay's KAFKA_* variables for the secured broker (null without --secure). */
  readonly secureKafkaEnv: Record<string, string> | null;
}

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const CLI = join(REPO, 'dist', 'cli.js');
export const BUILD_DIR = join(REPO, 'node_modules', '.cache', 'outbox-relay-bench');

/** Starts a contender that publishes to `<topicPrefix>.<aggregate_type>`. */
export const RELAY_HTTP_PORT = Number(process.env.BENCH_RELAY_HTTP_PORT ?? 60084);

export function startContender(name: ContenderName, services: Services, topicPrefix: string, count = 0, relayEnv: Record<string, string> = {}): Child {
  switch (name) {
    case 'ceiling':
      return new Child(name, process.execPath, [join(BUILD_DIR, 'bench', 'contenders', 'ceiling.js')], {
        DATABASE_URL: services.databaseUrl,
        BENCH_SLOT: SLOT.ceiling,
        BENCH_PUBLICATION: PUBLICATION,
        BENCH_COUNT: String(count),
        BENCH_TABLE: `public.${CDC_TABLE}`,
      });
    case 'relay-json':
    case 'relay-json-sasl-ssl':
    case 'relay-avro':
      if (name === 'relay-json-sasl-ssl' && !services.secureKafkaEnv) throw new Error('the secured broker is not started (--secure)');
      return new Child(name, process.execPath, [...services.relayNodeArgs, CLI, 'run'], {
        DATABASE_URL: services.databaseUrl,
        KAFKA_BROKERS: services.kafkaBrokers,
        SCHEMA_REGISTRY_URL: services.schemaRegistryUrl,
        OUTBOX_TABLE: `public.${CDC_TABLE}`,
        OUTBOX_SLOT: SLOT[name],
        OUTBOX_PUBLICATION: PUBLICATION,
        OUTBOX_TOPIC_TEMPLATE: `${topicPrefix}.{aggregate_type}`,
        OUTBOX_DEAD_LETTER_TOPIC: `${topicPrefix}.dead-letter`,
        LOG_LEVEL: 'info',
        // Not the default 9464, which other relays on the machine may hold.
        OUTBOX_HTTP_PORT: String(RELAY_HTTP_PORT),
        ...(name === 'relay-json-sasl-ssl' ? services.secureKafkaEnv : {}),
        ...relayEnv,
        ...(name === 'relay-avro' ? { OUTBOX_FORMAT: 'avro', ...services.avroEnv } : {}),
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
        slot: SLOT.debezium,
        publication: PUBLICATION,
        table: CDC_TABLE,
        topicPrefix,
        restPort: Number(process.env.BENCH_CONNECT_REST_PORT ?? 60083),
      });
  }
}

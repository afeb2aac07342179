import * as p from './parsers.js';

interface OptionSpec<T> {
  readonly env: string;
  readonly parser: p.Parser<T>;
  /** Raw default, parsed like an operator's value; undefined means required. */
  readonly default?: string;
  readonly description: string;
  /** Redacted from the start-up log. */
  readonly secret?: boolean;
}

function option<T>(spec: OptionSpec<T>): OptionSpec<T> {
  return spec;
}

/**
 * Every setting of the relay, declared once: environment variable, type, default and meaning.
 * The flag for an option is its env name in kebab case without the OUTBOX_ prefix
 * (OUTBOX_TOPIC_TEMPLATE -> --topic-template). The README's table is generated from this.
 */
export const OPTIONS = {
  databaseUrl: option({ env: 'DATABASE_URL', parser: p.text, secret: true, description: 'Postgres connection string (a role with REPLICATION, or superuser for `setup`).' }),
  kafkaBrokers: option({ env: 'KAFKA_BROKERS', parser: p.list, description: 'Kafka bootstrap servers, comma-separated.' }),
  kafkaClientId: option({ env: 'KAFKA_CLIENT_ID', parser: p.text, default: 'outbox-relay', description: 'Kafka client id.' }),
  table: option({ env: 'OUTBOX_TABLE', parser: p.qualifiedTable, default: 'public.event_outbox', description: 'The outbox table.' }),
  slot: option({ env: 'OUTBOX_SLOT', parser: p.identifier, default: 'outbox_relay', description: 'Logical replication slot (pgoutput).' }),
  publication: option({ env: 'OUTBOX_PUBLICATION', parser: p.identifier, default: 'outbox_relay', description: "Publication covering only the outbox table, publish = 'insert'." }),
  columnEventId: option({ env: 'OUTBOX_COLUMN_EVENT_ID', parser: p.identifier, default: 'event_id', description: 'Column holding the event id (Kafka header `event_id`).' }),
  columnAggregateType: option({ env: 'OUTBOX_COLUMN_AGGREGATE_TYPE', parser: p.identifier, default: 'aggregate_type', description: 'Column holding the aggregate type.' }),
  columnAggregateId: option({ env: 'OUTBOX_COLUMN_AGGREGATE_ID', parser: p.identifier, default: 'aggregate_id', description: 'Column holding the aggregate id (the Kafka key).' }),
  columnEventType: option({ env: 'OUTBOX_COLUMN_EVENT_TYPE', parser: p.identifier, default: 'event_type', description: 'Column holding the event type.' }),
  columnPayload: option({ env: 'OUTBOX_COLUMN_PAYLOAD', parser: p.identifier, default: 'payload', description: 'Column holding the payload (jsonb).' }),
  columnHeaders: option({ env: 'OUTBOX_COLUMN_HEADERS', parser: p.identifier, default: 'headers', description: 'Column holding extra headers (jsonb object, optional).' }),
  columnCreatedAt: option({ env: 'OUTBOX_COLUMN_CREATED_AT', parser: p.identifier, default: 'created_at', description: 'Column holding the creation time.' }),
  topicTemplate: option({ env: 'OUTBOX_TOPIC_TEMPLATE', parser: p.text, default: 'outbox.{aggregate_type}', description: 'Topic per event; placeholders {aggregate_type}, {event_type}.' }),
  deadLetterTopic: option({ env: 'OUTBOX_DEAD_LETTER_TOPIC', parser: p.text, default: 'outbox.dead-letter', description: 'Where events that cannot be decoded, routed or encoded go.' }),
  onPoison: option({ env: 'OUTBOX_ON_POISON', parser: p.oneOf('dead-letter', 'fail'), default: 'dead-letter', description: 'A poison event goes to the dead-letter topic, or stops the relay (`fail`).' }),
  onUnexpectedChange: option({ env: 'OUTBOX_ON_UNEXPECTED_CHANGE', parser: p.oneOf('warn', 'fail'), default: 'warn', description: 'An UPDATE, DELETE or TRUNCATE reaching the relay is logged, or stops it.' }),
  format: option({ env: 'OUTBOX_FORMAT', parser: p.oneOf('json'), default: 'json', description: 'Payload encoding: json (UTF-8 JSON of the payload column).' }),
  batchMaxEvents: option({ env: 'OUTBOX_BATCH_MAX_EVENTS', parser: p.integer(1, 100_000), default: '4000', description: 'Most events in one Kafka produce request.' }),
  maxBufferedEvents: option({ env: 'OUTBOX_MAX_BUFFERED_EVENTS', parser: p.integer(1, 10_000_000), default: '40000', description: 'Events decoded but not yet acknowledged before reading from Postgres pauses (memory bound).' }),
  statusInterval: option({ env: 'OUTBOX_STATUS_INTERVAL', parser: p.duration, default: '1s', description: 'How often the confirmed position is sent to Postgres.' }),
  shutdownTimeout: option({ env: 'OUTBOX_SHUTDOWN_TIMEOUT', parser: p.duration, default: '30s', description: 'On SIGTERM, how long to drain in-flight events before exiting.' }),
  reconnectMin: option({ env: 'OUTBOX_RECONNECT_MIN', parser: p.duration, default: '500ms', description: 'First reconnect delay after a lost connection (doubles up to the max).' }),
  reconnectMax: option({ env: 'OUTBOX_RECONNECT_MAX', parser: p.duration, default: '15s', description: 'Longest reconnect delay.' }),
  standbyPoll: option({ env: 'OUTBOX_STANDBY_POLL', parser: p.duration, default: '2s', description: 'How often a standby checks whether the slot became free.' }),
  setup: option({ env: 'OUTBOX_SETUP', parser: p.boolean, default: 'false', description: '`run` first creates the table, publication and slot when missing.' }),
  logLevel: option({ env: 'LOG_LEVEL', parser: p.oneOf('trace', 'debug', 'info', 'warn', 'error', 'fatal'), default: 'info', description: 'Log level (payloads are logged at trace only).' }),
} as const;

export type OptionKey = keyof typeof OPTIONS;

export type RelayConfig = {
  readonly [K in OptionKey]: (typeof OPTIONS)[K] extends OptionSpec<infer T> ? T : never;
};

export function flagName(key: OptionKey): string {
  return `--${OPTIONS[key].env.replace(/^OUTBOX_/, '').toLowerCase().replace(/_/g, '-')}`;
}

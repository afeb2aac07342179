import type { Check, OptionKey, RelayConfig } from './options.js';
import * as p from './parsers.js';

/** A flag of one command only, with no environment variable (`replay --since`). */
export type ArgSpec =
  | { readonly description: string; readonly parser: p.Parser<unknown> }
  /** Given alone, never with a value (`status --json`): true when given. */
  | { readonly description: string; readonly switch: true };

export type Args = Readonly<Record<string, ArgSpec>>;

type ArgValue<S> = S extends { readonly switch: true } ? boolean : S extends { readonly parser: p.Parser<infer T> } ? T | undefined : never;

/** What a command reads once loaded: its options (null: an optional one left unset) and its arguments. */
export type Loaded<K extends OptionKey, O extends K, A extends Args> = {
  readonly [P in K]: P extends O ? RelayConfig[P] | null : RelayConfig[P];
} & { readonly [N in keyof A]: ArgValue<A[N]> };

export interface CommandSpec<K extends OptionKey, O extends K, A extends Args> {
  readonly summary: string;
  /** The options the command reads: its `--help` lists these, and only these are loaded. */
  readonly options: readonly K[];
  /** Options required elsewhere that this command does without. */
  readonly optional?: readonly O[];
  /** The command's own defaults, where they differ from the declared ones. */
  readonly defaults?: { readonly [P in NoInfer<K>]?: string };
  /** Its own flags, named in camelCase like options (`eventType` is `--event-type`). */
  readonly args?: A;
  /** Rules of this command across its options and arguments. */
  readonly checks?: readonly Check<NoInfer<Loaded<K, O, A>>>[];
}

/** Any command, as help and docs/configuration.md list them. */
export type CommandHelp = Omit<CommandSpec<OptionKey, OptionKey, Args>, 'checks'>;

function declared<const K extends OptionKey, const O extends K = never, const A extends Args = Record<never, ArgSpec>>(spec: CommandSpec<K, O, A>): CommandSpec<K, O, A> {
  return spec;
}

export function argFlag(name: string): string {
  return `--${name.replace(/[A-Z]/g, (letter) => `-${letter.toLowerCase()}`)}`;
}

/** Where Postgres is and how to log in: every command that connects reads these. */
const DATABASE_ACCESS = ['databaseUrl', 'databasePassword'] as const;
/** Where the slot lives: DATABASE_URL's primary, or OUTBOX_REPLICA_URL's standby. */
const SLOT = ['slot', 'replicaUrl'] as const;
const DATABASE = [...DATABASE_ACCESS, 'table', 'publication', ...SLOT] as const;
/** TLS and SASL to Kafka: every command that talks to Kafka reads them. */
export const KAFKA_SECURITY = [
  'kafkaSsl', 'kafkaSslCaFile', 'kafkaSslCertFile', 'kafkaSslKeyFile', 'kafkaSslKeyPassword', 'kafkaSslVerifyHostname',
  'kafkaSaslMechanism', 'kafkaSaslUsername', 'kafkaSaslPassword', 'kafkaSaslOauthbearerTokenFile', 'kafkaSaslOauthbearerProvider',
] as const;
export type KafkaSecurityKey = (typeof KAFKA_SECURITY)[number];
const COLUMNS = ['columnEventId', 'columnAggregateType', 'columnAggregateId', 'columnEventType', 'columnPayload', 'columnHeaders', 'columnCreatedAt'] as const;
const KAFKA = ['kafkaBrokers', 'kafkaClientId', 'kafkaClient', 'kafkaCompression', 'kafkaFastEncoder', 'kafkaAutoCreateTopics', ...KAFKA_SECURITY] as const;
/** How records are delivered; `replay` and `recover` derive their own transactional id from the slot's. */
const DELIVERY = ['delivery', 'transactionalId', 'transactionTimeout'] as const;
const ENCODING = ['format', 'schemaRegistryUrl', 'schemaRegistryCaFile', 'schemaRegistryUsername', 'schemaRegistryPassword', 'schemasDir', 'subjectStrategy', 'autoRegister', 'keySchema'] as const;
const BATCHING = ['linger', 'batchMaxEvents', 'maxMessageBytes', 'maxBufferedEvents'] as const;
/** The encoder's start-up retries while the schema registry is down. */
const RETRY = ['reconnectMin', 'reconnectMax'] as const;
const REPLAY_FILTERS = ['since', 'until', 'eventType', 'eventId'] as const;
/** Where the webhook tables are. */
const WEBHOOK_STORE = [...DATABASE_ACCESS, 'webhookSchema'] as const;
const WEBHOOK_DELIVERY = [
  'webhookCustomerFrom', 'webhookTopics', 'webhookGroup', 'webhookRetrySchedule', 'webhookConnectTimeout', 'webhookTimeout', 'webhookConcurrency', 'webhookSenderThreads', 'webhookCircuitFailures', 'webhookCircuitCooldown',
  'webhookDisableAfter', 'webhookAllowAddresses', 'webhookRetention', 'webhookPoll', 'webhookResponseSnippet',
] as const;
const REGISTRY_ACCESS = ['schemaRegistryUrl', 'schemaRegistryCaFile', 'schemaRegistryUsername', 'schemaRegistryPassword'] as const;
/** The settings of an endpoint, for `endpoint add` and `endpoint update`. */
const ENDPOINT_ARGS = {
  url: { description: 'where events are POSTed, e.g. https://billing.example.com/webhooks (its address may not be private: OUTBOX_WEBHOOK_ALLOW_ADDRESSES)', parser: p.text },
  eventTypes: { description: 'event types it receives, comma-separated; a trailing .* takes every type below (invoice.*), * every type', parser: p.commaList('invoice.paid,subscription.*') },
  description: { description: 'a note for operators (whose endpoint, which customer)', parser: p.text },
  maxInFlight: { description: 'deliveries in flight to it at once, over every process, each from its lease until its result is written (default 10)', parser: p.integer(1, 1_000) },
  rateLimit: { description: 'attempts per second to it, over every process; 0 for none (default none)', parser: p.integer(0, 100_000) },
  headers: { description: 'headers sent with every request, as a JSON object, e.g. \'{"authorization":"Bearer ..."}\'', parser: p.jsonStringMap },
  customer: { description: 'the customer whose events it receives, an id the platform already uses (e.g. cus_123); set once', parser: p.text },
  platformWide: { description: "it receives every customer's events (an internal consumer); instead of --customer", switch: true },
  deliverFrom: {
    description: 'the events it receives: those produced to Kafka at or after this ISO time, or all (every event the topics still hold); default: from when it is added, so a new endpoint is not sent the history',
    parser: p.timeOrAll,
  },
} as const;
const ENDPOINT_ID = { id: { description: 'the endpoint (`webhooks endpoint list` shows them)', parser: p.text } } as const;
const JSON_OUTPUT = { json: { description: 'print JSON instead of a table', switch: true } } as const;

/**
 * cutover, handback: the way from and back to a polling relay, whose rows they read and mark on
 * the primary (handback writes; cutover's --pending may need to). With the slot on a standby they
 * are refused, naming where to run them, rather than done half on each server. (recover works
 * with the slot on a standby.)
 */
function onThePrimary(command: 'cutover' | 'handback'): Check<{ readonly replicaUrl: RelayConfig['replicaUrl'] | null }> {
  return {
    uses: ['replicaUrl'],
    problem: (values, name) =>
      values.replicaUrl === null
        ? null
        : `${command} ${command === 'handback' ? 'drops' : 'creates'} the slot under a snapshot of a polling relay's table, on the primary only, and ${name('replicaUrl')} puts the slot on a standby: ` +
          `run ${command} with ${name('replicaUrl')} unset; the slot is then the primary's, and \`run\` must read it there (${name('replicaUrl')} unset for it too) (docs/operations.md#reading-from-a-standby)`,
  };
}

function required<const N extends string>(command: string, ...names: N[]): Check<Record<N, unknown>> {
  return { uses: names, problem: (values, name) => (names.some((key) => values[key] === undefined) ? `${command} needs ${names.map(name).join(' and ')}` : null) };
}

/**
 * Every command and what it reads, declared once (Debezium's Field groups): `<command> --help`,
 * the top-level help and docs/configuration.md are generated from this, and the loader loads a
 * command's options and nothing else.
 */
export const COMMANDS = {
  run: declared({
    summary: 'Stream outbox inserts from the WAL to Kafka until SIGTERM.',
    options: [
      ...DATABASE, 'sources', ...KAFKA, ...DELIVERY, 'progressTopic', ...COLUMNS, 'topicTemplate', 'deadLetterTopic', 'onPoison', 'onUnexpectedChange', ...ENCODING, ...BATCHING,
      'setup', 'slotFailover', 'statusInterval', 'shutdownTimeout', 'replicationTimeout', 'stallTimeout', ...RETRY, 'standbyPoll', 'logLevel', 'httpHost', 'httpPort', 'slotPollInterval',
    ],
  }),
  setup: declared({
    summary: 'Create the outbox table, publication and slot if missing (idempotent); print what it did.',
    // The column mapping and the payload column's type are checked and reported.
    options: [...DATABASE, 'sources', 'topicTemplate', ...COLUMNS, 'slotFailover'],
    args: {
      printRoles: { description: 'print the SQL of least-privilege roles for the relay, the pruner and writers (sql/003_roles.sql for this table) and exit', switch: true },
      createRoles: { description: 'apply that SQL (as a superuser) after creating the table, publication and slot', switch: true },
    },
  }),
  status: declared({
    summary: 'Slot, active reader, lag, wal_status, outbox size and dead letters.',
    // The column maps and format: a tenant table that cannot be streamed is listed as quarantined.
    options: [...DATABASE, 'sources', ...COLUMNS, 'topicTemplate', 'format', 'kafkaBrokers', 'kafkaClient', ...KAFKA_SECURITY, 'deadLetterTopic'],
    // Status must work when the broker is the thing that is down: without it, no dead-letter count.
    optional: ['kafkaBrokers'],
    args: { json: { description: 'print JSON instead of a table', switch: true } },
  }),
  prune: declared({
    summary: 'Delete outbox rows older than the retention that the relay has confirmed; one pass, or a loop with --every.',
    options: [...DATABASE_ACCESS, 'table', 'sources', ...SLOT, 'columnCreatedAt', 'pruneRetention', 'pruneEvery', 'pruneBatchSize', 'logLevel', 'httpHost', 'httpPort'],
    // Its own port: a pruner beside a relay on one host must not collide with the relay's 9464.
    defaults: { httpPort: '9465' },
  }),
  replay: declared({
    summary: 'Publish retained outbox rows again (by time range, event type or event id), with their original event_id.',
    // Rows come from the table, not the slot: no slot, publication or stream timing. The
    // pipeline sees inserts only, so OUTBOX_ON_UNEXPECTED_CHANGE never applies.
    options: [...DATABASE_ACCESS, 'table', 'sources', ...KAFKA, ...DELIVERY, ...COLUMNS, 'topicTemplate', 'deadLetterTopic', 'onPoison', ...ENCODING, ...BATCHING, ...RETRY, 'logLevel'],
    args: {
      since: { description: 'created_at at or after this ISO time', parser: p.time },
      until: { description: 'created_at before this ISO time', parser: p.time },
      eventType: { description: 'comma-separated event types', parser: p.commaList('invoice.paid,invoice.voided') },
      eventId: { description: 'comma-separated event ids', parser: p.commaList('evt_1,evt_2') },
    },
    checks: [
      {
        uses: REPLAY_FILTERS,
        problem: (args, name) =>
          REPLAY_FILTERS.some((filter) => args[filter] !== undefined)
            ? null
            : `replay needs at least one of ${REPLAY_FILTERS.map(name).join(', ')} (refusing to republish the whole outbox by accident)`,
      },
    ],
  }),
  recover: declared({
    summary: 'After the slot was lost or dropped: create it again and publish every retained row of every outbox table it cannot prove delivered, so that nothing is skipped.',
    // replay's options, and the slot it re-creates (the publication must exist: run checks it).
    // A poison row is always dead-lettered (compile.ts says why): no OUTBOX_ON_POISON.
    options: [...DATABASE_ACCESS, 'table', 'sources', ...SLOT, 'slotFailover', ...KAFKA, ...DELIVERY, ...COLUMNS, 'topicTemplate', 'deadLetterTopic', ...ENCODING, ...BATCHING, ...RETRY, 'logLevel'],
    args: { dryRun: { description: 'say how many rows would be published again, and their time range; change nothing', switch: true } },
  }),
  cutover: declared({
    summary: "Take over the outbox tables polling relays fill (they may keep running meanwhile): create the slot with a snapshot, publish the rows the pollers have not sent, then `run` streams what commits after.",
    // setup's and recover's: it makes the publication and slot, and publishes through the stream's path.
    options: [...DATABASE, 'sources', 'slotFailover', ...KAFKA, ...DELIVERY, ...COLUMNS, 'topicTemplate', 'deadLetterTopic', ...ENCODING, ...BATCHING, ...RETRY, 'logLevel'],
    args: {
      pending: { description: "SQL condition, true of the rows the polling relay has not sent (e.g. \"status = 'pending'\" or \"NOT published\")", parser: p.text },
      dryRun: { description: 'say how many rows would be published, and their time range; change nothing', switch: true },
    },
    checks: [onThePrimary('cutover'), { uses: ['pending'], problem: (values, name) => (values.pending === undefined ? `cutover needs ${name('pending')}: the condition of the rows the polling relay has not sent (e.g. ${name('pending')} "status = 'pending'")` : null) }],
  }),
  handback: declared({
    summary: 'The way back to polling, with the relay stopped: mark sent every pending row of every outbox table the relay confirmed, then drop the slot.',
    // Every column option: OUTBOX_SOURCES' entries take theirs from them (handback reads the event id).
    options: [...DATABASE, 'sources', ...COLUMNS, 'topicTemplate', 'logLevel'],
    args: {
      pending: { description: "SQL condition of the rows the poller has not sent, as given to cutover (e.g. \"status = 'pending'\")", parser: p.text },
      markSent: { description: "SQL SET clause that marks a row sent for the poller (e.g. \"status = 'sent', sent_at = now()\")", parser: p.text },
      dryRun: { description: 'say how many rows would be marked sent and how many stay pending; change nothing', switch: true },
    },
    checks: [
      onThePrimary('handback'),
      {
        uses: ['pending', 'markSent'],
        problem: (values, name) => (values.pending === undefined || values.markSent === undefined ? `handback needs ${name('pending')} (which rows the poller would send) and ${name('markSent')} (how a row is marked sent)` : null),
      },
    ],
  }),
  'drop-slot': declared({
    summary: 'Drop the replication slot (releases the WAL it holds; events after its position then need `recover`).',
    options: [...DATABASE_ACCESS, ...SLOT],
    args: { yes: { description: 'confirm: you accept that unconfirmed events must be replayed with `outbox-relay replay`', switch: true } },
    checks: [
      {
        uses: ['yes', 'slot'],
        problem: (values, name) =>
          values.yes
            ? null
            : `drop-slot needs ${name('yes')}: dropping "${values.slot}" releases its WAL, and events committed after its confirmed position are then published only by \`outbox-relay recover\``,
      },
    ],
  }),
  webhooks: declared({
    summary: 'Deliver outbox events from Kafka to the endpoints subscribed to them (signed, retried, never dropped) until SIGTERM.',
    options: [
      ...WEBHOOK_STORE, 'kafkaBrokers', 'kafkaClientId', 'kafkaClient', ...KAFKA_SECURITY, ...REGISTRY_ACCESS, 'topicTemplate', 'deadLetterTopic', ...WEBHOOK_DELIVERY,
      'shutdownTimeout', 'logLevel', 'httpHost', 'httpPort',
    ],
    // Its own port, beside a relay (9464) and a pruner (9465) on one host.
    defaults: { httpPort: '9466', kafkaClientId: 'outbox-relay-webhooks' },
  }),
  'webhooks setup': declared({
    summary: 'Create the webhook tables (endpoints, events, events_without_customer, deliveries, attempts, the view all_attempts) if missing (idempotent); name the endpoints an earlier setup left without a customer.',
    options: [...WEBHOOK_STORE],
  }),
  'webhooks endpoint add': declared({
    summary: 'Add an endpoint and its subscriptions; prints its id and signing secret.',
    options: [...WEBHOOK_STORE, 'webhookAllowAddresses'],
    args: {
      ...ENDPOINT_ARGS,
      id: { description: 'its id (default: a new ep_ id)', parser: p.text },
      secret: { description: "a whsec_ signing secret to use (the receiver's current one, when moving from another sender); default: a new one", parser: p.text },
      ordered: { description: "deliver one aggregate's events one at a time, in order (the next waits for the previous one's success)", switch: true },
      ...JSON_OUTPUT,
    },
    checks: [
      required('webhooks endpoint add', 'url', 'eventTypes'),
      {
        uses: ['customer', 'platformWide'],
        problem: (v, name) =>
          v.customer !== undefined && v.platformWide
            ? `${name('customer')} and ${name('platformWide')} exclude each other: an endpoint receives one customer's events, or every customer's`
            : v.customer === undefined && !v.platformWide
              ? `webhooks endpoint add needs ${name('customer')} (whose events it receives) or ${name('platformWide')} (every customer's, for an internal consumer)`
              : null,
      },
    ],
  }),
  'webhooks endpoint list': declared({
    summary: 'List endpoints: whose, subscriptions, state (enabled, circuit, disabled and why), limits.',
    options: [...WEBHOOK_STORE],
    args: { customer: { description: "only this customer's endpoints", parser: p.text }, ...JSON_OUTPUT },
  }),
  'webhooks endpoint update': declared({
    summary: "Change an endpoint's URL, subscriptions, limits, ordering or headers (what is not given stays), or assign an earlier setup's endpoint its customer.",
    options: [...WEBHOOK_STORE, 'webhookAllowAddresses'],
    args: { ...ENDPOINT_ID, ...ENDPOINT_ARGS, ordered: { description: "true or false: deliver one aggregate's events in order", parser: p.boolean }, ...JSON_OUTPUT },
    checks: [required('webhooks endpoint update', 'id')],
  }),
  'webhooks endpoint disable': declared({
    summary: 'Stop sending to an endpoint; its deliveries are still recorded, and held.',
    options: [...WEBHOOK_STORE],
    args: { ...ENDPOINT_ID, reason: { description: 'why (shown by `endpoint list`)', parser: p.text } },
    checks: [required('webhooks endpoint disable', 'id')],
  }),
  'webhooks endpoint enable': declared({
    summary: 'Send to an endpoint again: circuit closed, failure streak ended, held deliveries due now.',
    options: [...WEBHOOK_STORE],
    args: { ...ENDPOINT_ID },
    checks: [required('webhooks endpoint enable', 'id')],
  }),
  'webhooks endpoint rotate-secret': declared({
    summary: 'Give an endpoint a new signing secret; the old ones keep signing for --keep-old; prints the new one.',
    options: [...WEBHOOK_STORE],
    args: {
      ...ENDPOINT_ID,
      keepOld: { description: 'how long the current secrets keep signing beside the new one (default 24h)', parser: p.duration },
      secret: { description: 'the new whsec_ secret (default: a new one)', parser: p.text },
    },
    checks: [required('webhooks endpoint rotate-secret', 'id')],
  }),
  'webhooks deliveries list': declared({
    summary: 'List deliveries, newest first, by customer, endpoint, event or status.',
    options: [...WEBHOOK_STORE],
    args: {
      customer: { description: "only to this customer's endpoints", parser: p.text },
      endpoint: { description: 'only this endpoint', parser: p.text },
      eventId: { description: 'only this event', parser: p.text },
      status: { description: 'pending, delivered or failed', parser: p.oneOf('pending', 'delivered', 'failed') },
      since: { description: 'recorded at or after this ISO time', parser: p.time },
      limit: { description: 'at most this many (default 50)', parser: p.integer(1, 100_000) },
      ...JSON_OUTPUT,
    },
  }),
  'webhooks attempts': declared({
    summary: "Every attempt of one delivery: when, how long, the endpoint's status and answer.",
    options: [...WEBHOOK_STORE],
    args: { delivery: { description: 'the delivery id (`webhooks deliveries list` shows them)', parser: p.text }, ...JSON_OUTPUT },
    checks: [required('webhooks attempts', 'delivery')],
  }),
  'webhooks replay': declared({
    summary: "Send deliveries again, with their webhook-id and a fresh retry schedule: one delivery, an event, an endpoint or a customer since a time; or deliver events whose customer was not found.",
    options: [...WEBHOOK_STORE, 'webhookCustomerFrom'],
    // Only --without-customer applies the rule.
    optional: ['webhookCustomerFrom'],
    args: {
      delivery: { description: 'one delivery (failed or delivered)', parser: p.text },
      eventId: { description: "an event's deliveries (with --endpoint: to that endpoint only; with --without-customer: that event only)", parser: p.text },
      endpoint: { description: "with --since: the endpoint's deliveries recorded since then", parser: p.text },
      customer: { description: "with --since: the deliveries to this customer's endpoints recorded since then; with --without-customer and --event-id: the event's customer, named by the operator", parser: p.text },
      since: { description: 'with --endpoint or --customer: recorded at or after this ISO time', parser: p.time },
      withoutCustomer: {
        description: "events whose customer was not found (`webhooks without-customer`): each is given its customer by OUTBOX_WEBHOOK_CUSTOMER_FROM as it is now (or by --customer, for one --event-id), and its deliveries to that customer's endpoints are recorded due; those still without one stay listed",
        switch: true,
      },
    },
    checks: [
      {
        uses: ['delivery', 'eventId', 'endpoint', 'customer', 'since', 'withoutCustomer'],
        problem: (v, name) => {
          const given = (['delivery', 'eventId', 'endpoint', 'customer', 'since'] as const).filter((key) => v[key] !== undefined);
          const exactly = (...keys: readonly string[]) => given.length === keys.length && keys.every((key) => (given as readonly string[]).includes(key));
          if (v.withoutCustomer) {
            return exactly() || exactly('eventId') || exactly('eventId', 'customer') ? null : `${name('withoutCustomer')} takes ${name('eventId')} (one event) and, with it, ${name('customer')}, nothing else`;
          }
          return exactly('delivery') || exactly('eventId') || exactly('eventId', 'endpoint') || exactly('endpoint', 'since') || exactly('customer', 'since')
            ? null
            : `webhooks replay needs ${name('delivery')}, ${name('eventId')} (with ${name('endpoint')} or not), ${name('endpoint')} with ${name('since')}, ${name('customer')} with ${name('since')}, or ${name('withoutCustomer')}`;
        },
      },
      {
        uses: ['withoutCustomer', 'customer', 'webhookCustomerFrom'],
        problem: (v, name) => (v.withoutCustomer && v.customer === undefined && v.webhookCustomerFrom === null ? `${name('withoutCustomer')} finds each event's customer by ${name('webhookCustomerFrom')}: set it as the webhooks processes have it` : null),
      },
    ],
  }),
  'webhooks without-customer': declared({
    summary: 'List events whose customer was not found (delivered to no customer), oldest first, with what was missing.',
    options: [...WEBHOOK_STORE],
    args: { limit: { description: 'at most this many (default 50)', parser: p.integer(1, 100_000) }, ...JSON_OUTPUT },
  }),
  'webhooks api': declared({
    summary: "Serve the webhooks HTTP API (customers, endpoints, event types, deliveries, attempts, replay; OpenAPI at /openapi.json), the customer portal at /portal/, /metrics and /healthz until SIGTERM.",
    options: [...WEBHOOK_STORE, 'webhookAllowAddresses', 'webhookApiHost', 'webhookApiPort', 'webhookApiToken', 'webhookApiSigningKey', 'webhookApiPublicUrl', 'webhookApiRateLimit', 'schemasDir', 'shutdownTimeout', 'logLevel'],
  }),
  'schemas check': declared({
    summary: 'Parse and compile every Avro schema; list problems with file and path (exit 1 if any).',
    options: ['schemasDir', 'keySchema'],
  }),
};

export type CommandName = keyof typeof COMMANDS;

/** What command `C` is given once loaded. */
export type CommandConfig<C extends CommandName> = (typeof COMMANDS)[C] extends CommandSpec<infer K, infer O, infer A> ? Loaded<K, O, A> : never;

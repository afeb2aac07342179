/**
 * What an error code means, declared once: the relay's retry logic reads `retriable` and
 * `poison`, docs/errors.md is generated from all of it (`npm run docs`).
 */
export interface CodeSpec {
  /** Reconnecting can help: `run` resumes from the confirmed position. */
  readonly retriable: boolean;
  /** The problem is one event's, not the stream's: it goes to the dead-letter topic. */
  readonly poison: boolean;
  /** What happened, in one sentence. */
  readonly meaning: string;
  /** What the operator does about it. */
  readonly action: string;
  /** Only logged and counted: no command ends on it. */
  readonly logOnly?: true;
}

/**
 * Every error the relay raises on purpose is a RelayError with a stable `code`, for logs,
 * metrics, dead-letter headers and the CLI's `failed [CODE]` line.
 */
export const ERROR_CODES = {
  CONFIG_INVALID: {
    retriable: false, poison: false,
    meaning: 'A variable, flag or combination of them is invalid, or the command was asked for what the current state makes pointless (recover with a usable slot, cutover with a slot already there); every problem is listed at once, with the variable or flag and what was expected.',
    action: 'Fix what the message names and start again; `outbox-relay <command> --help` lists what each command reads. Nothing was changed.',
  },
  SETUP_WAL_LEVEL: {
    retriable: false, poison: false,
    meaning: 'Postgres runs with wal_level below logical, so it can have no logical replication slot.',
    action: "Set wal_level = logical (ALTER SYSTEM SET wal_level = logical, or your provider's parameter for it) and restart Postgres.",
  },
  SETUP_STANDBY: {
    retriable: false, poison: false,
    meaning: "OUTBOX_REPLICA_URL names a server that cannot hold the relay's slot as a standby of DATABASE_URL's primary: before Postgres 16, another cluster, or a setting a standby's logical slot needs is missing (hot_standby_feedback, wal_level, primary_slot_name).",
    action: 'Set what the message names on the standby (or the primary) and reload or restart it, then run `outbox-relay setup` again (docs/operations.md#reading-from-a-standby).',
  },
  SETUP_PRIVILEGE: {
    retriable: false, poison: false,
    meaning: "Postgres refused a statement for lack of a privilege (42501): the role lacks REPLICATION, ownership of the schema or table for `setup`, or the pruner's grants.",
    action: "`outbox-relay setup --print-roles` prints the grants each role needs; run `setup` once as the table's owner or a superuser; the relay's own role needs only LOGIN REPLICATION and SELECT.",
  },
  SETUP_PUBLICATION: {
    retriable: false, poison: false,
    meaning: "The publication is missing or cannot be used (it covers other tables, publishes more than inserts, or names a partitioned table's partitions), or the slot was made with another plugin or on another database.",
    action: 'Run `outbox-relay setup` for a missing publication; alter or recreate a wrong one as the "Expected:" statement in the message shows; for a slot of another plugin or database, set OUTBOX_SLOT to a slot of this relay\'s.',
  },
  SETUP_TABLE: {
    retriable: false, poison: false,
    meaning: 'The outbox table, a column the OUTBOX_COLUMN_* settings name, or a table the command reads is missing, or the payload column has a type the relay cannot publish (at the CLI also Postgres\'s 42P01 and 3F000: no such table, no such schema).',
    action: 'Run `outbox-relay setup` (or `outbox-relay webhooks setup` for the webhook tables), or point OUTBOX_TABLE (or the entries of OUTBOX_SOURCES) and the OUTBOX_COLUMN_* variables at the table you have; the message lists its columns and names the setting that named the table. A schema that does not exist is for the application to create: setup makes an outbox table, not its schema.',
  },
  SETUP_CUTOVER_NEEDED: {
    retriable: false, poison: false,
    meaning: 'The outbox table holds rows and no slot was ever made for it (a table a polling relay fills): a slot made now would skip the rows not sent yet.',
    action: 'Take the table over with `outbox-relay cutover --pending "<condition of unsent rows>" --dry-run`, then without --dry-run; if a slot existed before and was dropped, run `outbox-relay recover` instead.',
  },
  CUTOVER_CONDITION: {
    retriable: false, poison: false,
    meaning: 'The SQL given to `cutover --pending` or `handback --mark-sent` was refused by Postgres, or would not do what it must (a comment or semicolon in it, rows changed meanwhile, rows still pending once marked).',
    action: 'Correct the condition or SET clause as the message says (for rows changed meanwhile, stop the poller first) and run the command again; nothing was changed.',
  },
  SOURCE_PROTOCOL: {
    retriable: false, poison: false,
    meaning: 'A replication message from Postgres did not parse as pgoutput (an unknown frame or column kind, more columns than its relation describes).',
    action: 'Report it with the log line and the Postgres version; the relay stops rather than guess, and nothing after the confirmed position is lost.',
  },
  SOURCE_DISCONNECTED: {
    retriable: true, poison: false,
    meaning: 'The connection to Postgres could not be made or was lost: refused, reset, timed out, or closed by a server shutting down or starting.',
    action: "`run` reconnects by itself from the confirmed position (OutboxRelayReconnecting fires if it lasts); for another command, check that Postgres is up and reachable at DATABASE_URL's host and port, then run it again.",
  },
  SOURCE_TIMEOUT: {
    retriable: true, poison: false,
    meaning: 'The replication connection delivered nothing, not even a keepalive, for OUTBOX_REPLICATION_TIMEOUT: the network path to Postgres is gone.',
    action: "Nothing while it is rare: the relay reconnects. If it repeats, look at the network path (NAT and load balancer idle timeouts) and keep OUTBOX_REPLICATION_TIMEOUT above the server's wal_sender_timeout / 2.",
  },
  SOURCE_NO_PRIMARY: {
    retriable: true, poison: false,
    meaning: "No host in DATABASE_URL is a writable primary now (a failover in progress, every host down, or each a standby or read-only); at the CLI also Postgres's 25006, a statement refused by a read-only server.",
    action: "`run` retries. If it lasts, promote a standby or correct DATABASE_URL's hosts and target_session_attrs; the message gives each host's answer.",
  },
  SOURCE_SLOT_BUSY: {
    retriable: true, poison: false,
    meaning: 'The replication slot is being read by another process (another relay instance, or a walsender left from one).',
    action: 'For `run`, nothing: this instance waits as a standby and takes over when the slot is free. For `drop-slot` and `handback`, stop every relay (SIGTERM) and run the command again.',
  },
  SOURCE_SLOT_MISSING: {
    retriable: false, poison: false,
    meaning: 'The replication slot does not exist (dropped, or Postgres failed over to a server without it); a new slot would skip every event committed since the old one stopped.',
    action: '`outbox-relay recover --dry-run` says what would be published again; `outbox-relay recover` re-creates the slot and publishes it; then start `run`. Before a first start, `outbox-relay setup` creates the slot.',
  },
  SOURCE_SLOT_LOST: {
    retriable: false, poison: false,
    meaning: 'The slot lost WAL it needed (wal_status lost, e.g. past max_slot_wal_keep_size): it cannot be streamed, and events after its confirmed position may not have reached Kafka.',
    action: '`outbox-relay recover --dry-run`, then `outbox-relay recover` (consumers drop what they already have by event_id), then `run`; raise max_slot_wal_keep_size, or act on OutboxRelaySlotSafeWalSizeLow, before it happens again.',
  },
  SOURCE_RECOVERY_UNFINISHED: {
    retriable: false, poison: false,
    meaning: 'A `recover` or `cutover` began and did not finish: streaming, setup or pruning now could skip or delete rows it has not published.',
    action: 'Run the unfinished command again (cutover with the same --pending): it starts over, and the refused command works once it finished.',
  },
  SOURCE_HANDOVER_BUSY: {
    retriable: false, poison: false,
    meaning: 'Another recover, cutover or handback is running on the same slot (the slot its outboxes share), or on one of its outbox tables: through another slot, or by a relay of a version before several outboxes (which locked the table).',
    action: 'Wait for it to finish, or stop it, then run the command again: one at a time.',
  },
  SOURCE_HANDBACK_UNCONFIRMED: {
    retriable: false, poison: false,
    meaning: 'handback found events of a message outbox after the slot\'s confirmed position: they exist only in the WAL the slot holds, and dropping it would lose them.',
    action: 'Stop the applications emitting them (no poller carries message outbox events), run the relay until it confirms them (stop it with SIGTERM: it confirms what Kafka acknowledged), then run handback again; nothing was changed.',
  },
  SOURCE_UNEXPECTED_CHANGE: {
    retriable: false, poison: false,
    meaning: 'An UPDATE, DELETE or TRUNCATE of the outbox table reached the relay, which publishes inserts only, and OUTBOX_ON_UNEXPECTED_CHANGE=fail stopped it.',
    action: 'Make the publication publish inserts only (`outbox-relay setup` checks it), and find what changes outbox rows: a row is written once, and only the pruner deletes it.',
  },
  SOURCE_TIMELINE_SWITCHED: {
    retriable: true, poison: false,
    meaning: "The standby of OUTBOX_REPLICA_URL changed timelines while the relay read it (it was promoted, or followed a promoted upstream). With exactly-once delivery the session ends before it publishes WAL of the new timeline, so that Kafka's progress names the timeline of what it covers.",
    action: 'Nothing: the relay starts a new session on the same server at once. After a promotion, make DATABASE_URL name the promoted server for prune and setup.',
  },
  SOURCE_TIMELINE_DIVERGED: {
    retriable: false, poison: false,
    meaning: "Kafka's exactly-once progress was written from WAL this server's history does not contain: the relay reached an old primary, or a standby that lacked that WAL was promoted.",
    action: 'Connect the relay to the current primary. If it is the current one, compare the events in Kafka with the outbox table, then remove the progress record to go on.',
  },
  SOURCE_AUTHENTICATION: {
    retriable: false, poison: false,
    meaning: 'Postgres refused the login (SQLSTATE class 28): the password, the pg_hba.conf entry or the client certificate; retrying repeats the refusal.',
    action: 'Check the user and password in DATABASE_URL (or DATABASE_PASSWORD[_FILE]), sslcert and sslkey, and that pg_hba.conf lets this user reach this database from this host.',
  },
  SOURCE_TLS: {
    retriable: false, poison: false,
    meaning: "TLS to Postgres could not be set up as DATABASE_URL asks: the server's certificate is not trusted, or the server has no TLS.",
    action: "Set sslrootcert in DATABASE_URL to the CA that signed the server's certificate (sslmode=verify-full also checks the host name), or turn TLS on at the server.",
  },
  SOURCE_DATABASE_MISSING: {
    retriable: false, poison: false,
    meaning: 'The database DATABASE_URL names does not exist on the server (Postgres\'s 3D000).',
    action: 'Correct the database name in DATABASE_URL (the path after the host: postgres://user@host:5432/<database>), or create the database; the relay never creates one.',
  },
  SOURCE_QUERY_FAILED: {
    retriable: false, poison: false,
    meaning: "Postgres refused one of the command's statements with a SQLSTATE the relay has no code of its own for; the message carries Postgres's SQLSTATE and text.",
    action: "Look the SQLSTATE up in Postgres's list of error codes and remove the cause on the server (a statement_timeout, a lock, a full disk); if the server is fine, report the message.",
  },
  DECODE_MISSING_COLUMN: {
    retriable: false, poison: true,
    meaning: 'An outbox row lacks a column the OUTBOX_COLUMN_* settings name: the table and the settings do not match.',
    action: 'Correct the OUTBOX_COLUMN_* settings or the table, then publish the dead-lettered events again with `outbox-relay replay --event-id ...` (the dead-letter record names them).',
  },
  OUTBOX_TABLE_QUARANTINED: {
    retriable: false, poison: true,
    meaning: "A tenant's outbox table (a table a pattern of OUTBOX_SOURCES names) lacks a column its column map needs, or its payload column has a type the relay cannot publish, or it is not in the publication: the table is quarantined. Its rows go to the dead-letter topic with this code, the metric outbox_relay_outbox_table_quarantined names it, `status` lists it, and every other outbox streams on.",
    action: 'Fix the table (its migration, or the column map in OUTBOX_SOURCES); rows inserted after the fix flow again. Then publish the dead-lettered rows with `outbox-relay replay` (OUTBOX_SOURCES holding that table alone, with --since the time it was quarantined, or --event-id from the dead letters): docs/runbooks/OutboxRelayOutboxTableQuarantined.md.',
  },
  DECODE_BAD_VALUE: {
    retriable: false, poison: true,
    meaning: 'A column of an outbox row holds what the relay cannot publish: an empty id or type, a null payload, headers that are not a JSON object, a bad timestamp, or with avro a text payload that is not JSON.',
    action: 'Fix the writer that made the row (the dead-letter headers name the column); correct the row if it must still go out, then `outbox-relay replay` it.',
  },
  DECODE_BAD_MESSAGE: {
    retriable: false, poison: true,
    meaning: "A logical decoding message with a declared prefix (OUTBOX_SOURCES) whose content is not the JSON object of an event's fields (event_id, aggregate_type, aggregate_id, event_type, payload; headers and created_at optional), lacks one of them, or is not UTF-8 (a message emitted as bytea; the dead letter keeps it as content_base64).",
    action: "Fix the writer that emitted it (the dead letter holds the content and names the field); a message outbox has no table to replay from: emit the corrected event again.",
  },
  SOURCE_MESSAGE_NOT_TRANSACTIONAL: {
    retriable: false, poison: true,
    meaning: "A non-transactional logical decoding message (pg_logical_emit_message(false, ...)) reached the relay: it is written whether or not the business change commits, so it is not an outbox event.",
    action: "Emit outbox events with pg_logical_emit_message(true, ...) inside the transaction of the business change; the dead letter holds the content.",
  },
  SOURCE_MESSAGE_UNDECLARED: {
    retriable: false, poison: true,
    meaning: 'A transactional logical decoding message whose prefix no message outbox in OUTBOX_SOURCES declares (a typo in the writer, or another tool emitting messages in the same database).',
    action: "Declare the prefix in OUTBOX_SOURCES, or fix the writer's prefix; the dead letter holds the content, to emit again once fixed.",
  },
  ROUTE_BAD_TOPIC: {
    retriable: false, poison: true,
    meaning: "OUTBOX_TOPIC_TEMPLATE made an illegal Kafka topic name from the event's values (characters other than letters, digits, . _ -, or over 249 of them).",
    action: 'Fix the aggregate or event type the writer used, or the template; then `outbox-relay replay` the event.',
  },
  ROUTE_FORMAT_CONFLICT: {
    retriable: false, poison: true,
    meaning: "Two outboxes of different formats (OUTBOX_SOURCES' \"format\") route to one topic: the event's outbox would write a topic another outbox already writes in the other format (since the relay started). Templates that always meet are refused at start (CONFIG_INVALID); these met through the events' values.",
    action: 'Give one of the outboxes a "topicTemplate" of its own (or both the same "format"), then `outbox-relay replay` the event (a message outbox\'s event: the application emits it again).',
  },
  ENCODE_NO_SCHEMA: {
    retriable: false, poison: true,
    meaning: "With OUTBOX_FORMAT=avro, OUTBOX_SCHEMAS_DIR has no <event_type>.avsc for the event's type.",
    action: 'Add the schema (and register it, unless OUTBOX_AUTO_REGISTER), deploy it with the relay, then `outbox-relay replay` the event.',
  },
  ENCODE_SCHEMA_MISMATCH: {
    retriable: false, poison: true,
    meaning: "The event's payload does not fit its event type's Avro schema; the dead-letter headers name the path that does not fit.",
    action: "Fix the writer or evolve the schema, then `outbox-relay replay` the event; the client kit's writer catches this before the commit (OUTBOX_PAYLOAD_MISMATCH).",
  },
  ENCODE_REGISTRY: {
    retriable: true, poison: false,
    meaning: 'The schema registry could not be reached, or answered with a server error (5xx, 429).',
    action: "Nothing while it is brief: the relay retries. If it lasts, check SCHEMA_REGISTRY_URL and the registry's health.",
  },
  ENCODE_REGISTRY_REFUSED: {
    retriable: false, poison: false,
    meaning: 'The schema registry refused a request (a 4xx other than 429: credentials, a URL that is not a registry), or its TLS certificate is not trusted.',
    action: 'Check SCHEMA_REGISTRY_URL (Apicurio: .../apis/ccompat/v7), SCHEMA_REGISTRY_USERNAME and SCHEMA_REGISTRY_PASSWORD, and SCHEMA_REGISTRY_CA_FILE for a private CA.',
  },
  SCHEMA_INVALID: {
    retriable: false, poison: false,
    meaning: 'A local Avro schema or OUTBOX_KEY_SCHEMA does not parse or compile, OUTBOX_SCHEMAS_DIR holds none, or the registry refused one as invalid.',
    action: '`outbox-relay schemas check` lists each problem with its file and path; fix them and start again.',
  },
  SCHEMA_INCOMPATIBLE: {
    retriable: false, poison: false,
    meaning: "The registry refused to register a local schema as incompatible with the subject's earlier versions (OUTBOX_AUTO_REGISTER=true).",
    action: "Evolve the schema compatibly (a default for each new field), or change the subject's compatibility level on purpose; then start again.",
  },
  SCHEMA_NOT_REGISTERED: {
    retriable: false, poison: false,
    meaning: 'The registry has no version of the subject equal to the local schema, and OUTBOX_AUTO_REGISTER is off.',
    action: 'Register the schema (through your schema pipeline, or once with OUTBOX_AUTO_REGISTER=true), or deploy the relay with the schema that is registered.',
  },
  SINK_PUBLISH: {
    retriable: true, poison: false,
    meaning: 'Kafka could not be reached or did not acknowledge a request: brokers down, no leader for a partition, a timeout, a transaction left open.',
    action: "`run` retries from the confirmed position (OutboxRelayReconnecting fires if it lasts); check KAFKA_BROKERS and the brokers' health. For another command, run it again once Kafka answers.",
  },
  SINK_CLIENT: {
    retriable: false, poison: false,
    meaning: "The Kafka client cannot run as configured: the librdkafka binding does not load or was built without scripts/kafka-javascript.patch, or kafkajs is not the version the relay's replacements are made for.",
    action: 'Build the binding with `npm run build:librdkafka` (an opt-in: npm ci does not build it), or set OUTBOX_KAFKA_CLIENT=kafkajs; install the kafkajs version package.json pins.',
  },
  SINK_TOO_LARGE: {
    retriable: false, poison: true,
    meaning: "The event's record is larger than OUTBOX_MAX_MESSAGE_BYTES (or its topic's max.message.bytes): the broker would refuse it for ever.",
    action: "Raise OUTBOX_MAX_MESSAGE_BYTES and the topic's max.message.bytes together, or make the event smaller; then `outbox-relay replay` it (a message outbox's event has no row: the application emits it again).",
  },
  SINK_TOPIC_MISSING: {
    retriable: false, poison: true,
    meaning: "The event's topic does not exist and will not be created (OUTBOX_KAFKA_AUTO_CREATE_TOPICS=false, or the brokers' auto.create.topics.enable is off).",
    action: 'Create the topic with the partitions and replication its consumers expect, then `outbox-relay replay` the event.',
  },
  SINK_AUTHENTICATION: {
    retriable: false, poison: false,
    meaning: 'Kafka refused the SASL login, or the relay could not present credentials (an OAUTHBEARER token that is unreadable, empty or expired); retrying repeats the refusal.',
    action: 'Check KAFKA_SASL_MECHANISM, KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD[_FILE], or the token file or provider, and start again.',
  },
  SINK_NOT_AUTHORIZED: {
    retriable: false, poison: false,
    meaning: "The relay's principal lacks an ACL it needs: WRITE, DESCRIBE or DESCRIBE_CONFIGS on its topics, CREATE for auto-created ones, and for exactly-once its transactional id and the progress topic.",
    action: 'Grant the ACLs the message names, then start again.',
  },
  SINK_TLS: {
    retriable: false, poison: false,
    meaning: "TLS to Kafka failed: the broker's certificate is not trusted (CA, expiry, host name), the broker refused ours, or the client certificate or key cannot be used.",
    action: 'Check KAFKA_SSL_CA_FILE and, for mutual TLS, KAFKA_SSL_CERT_FILE, KAFKA_SSL_KEY_FILE and KAFKA_SSL_KEY_PASSWORD.',
  },
  SINK_EXACTLY_ONCE: {
    retriable: false, poison: false,
    meaning: 'OUTBOX_DELIVERY=exactly-once cannot be kept with these brokers or topics: no transactions, a transaction timeout the broker refuses, a progress topic that could lose records or never commit.',
    action: "Do what the message says: lower OUTBOX_TRANSACTION_TIMEOUT below the brokers' transaction.max.timeout.ms, fix the progress topic's replication and min.insync.replicas, or use at-least-once.",
  },
  SINK_FENCED: {
    retriable: true, poison: false,
    meaning: 'Another relay instance started with the same transactional id and took over; this instance\'s session ends.',
    action: 'Nothing after a planned takeover (a rolling restart): this instance waits as a standby. If relays on different slots share one OUTBOX_TRANSACTIONAL_ID, give each slot its own.',
  },
  SINK_PROGRESS: {
    retriable: false, poison: false,
    meaning: 'The exactly-once progress record in Kafka cannot be read (another relay version wrote it): resuming on a guess could skip events.',
    action: "Run the relay version that wrote it; or, having compared Kafka's events with the outbox table, remove the progress record of this slot.",
  },
  WEBHOOK_ENDPOINT_INVALID: {
    retriable: false, poison: false,
    meaning: 'An endpoint given to `webhooks endpoint add` or `update` cannot be used as given: its URL, event types, headers or limits.',
    action: 'Correct the flag the message names and run the command again; nothing was changed.',
  },
  WEBHOOK_ADDRESS_REFUSED: {
    retriable: false, poison: false,
    meaning: "An endpoint's host resolves to a loopback, private, link-local or metadata address not in OUTBOX_WEBHOOK_ALLOW_ADDRESSES (checked at `endpoint add` and at every connection, against request forgery).",
    action: "Use the endpoint's public address; for an endpoint private on purpose, add its address or CIDR to OUTBOX_WEBHOOK_ALLOW_ADDRESSES, for the CLI and for the `webhooks` processes.",
  },
  WEBHOOK_NOT_FOUND: {
    retriable: false, poison: false,
    meaning: 'No webhook endpoint, delivery, event or customer has the id given (a replay that names one replays nothing then: it says so rather than "0 deliveries are due again").',
    action: 'Take an id from `outbox-relay webhooks endpoint list` or `webhooks deliveries list` (an empty list: check OUTBOX_WEBHOOK_SCHEMA).',
  },
  WEBHOOK_SCHEMA_MISSING: {
    retriable: false, poison: false,
    meaning: 'The webhook tables are missing from OUTBOX_WEBHOOK_SCHEMA, or older than this version.',
    action: 'Run `outbox-relay webhooks setup` (idempotent) as a role that may create them, then start again.',
  },
  WEBHOOK_ENDPOINTS_UNASSIGNED: {
    retriable: false, poison: false,
    meaning: "Endpoints of an earlier setup belong to no customer and are not marked platform-wide: the webhooks process does not start, rather than send one customer's events to another's endpoint.",
    action: 'For each endpoint the message names, run `outbox-relay webhooks endpoint update --id <id> --customer <customer id>` (or `--platform-wide` for an internal consumer of every customer\'s events), then start again; `webhooks endpoint list` shows who each endpoint belongs to.',
  },
  WEBHOOK_EVENT_WITHOUT_CUSTOMER: {
    retriable: false, poison: false, logOnly: true,
    meaning: "An event's customer could not be found by OUTBOX_WEBHOOK_CUSTOMER_FROM (a missing header, a null or absent payload field, no aggregate id): it went to no customer's endpoint (platform-wide ones still got it), was counted, and is listed by `webhooks without-customer`.",
    action: 'Fix the producer (the outbox row) or the rule, then `outbox-relay webhooks replay --without-customer` records the events\' deliveries by the rule as it is now; or name the customer of one event: `webhooks replay --without-customer --event-id <id> --customer <customer id>`.',
  },
  WEBHOOK_UNDECODABLE: {
    retriable: false, poison: false, logOnly: true,
    meaning: 'A record on a topic the webhooks consumer reads is not an outbox event (no event_id header, a value that does not decode, Avro without SCHEMA_REGISTRY_URL): counted, skipped, and left in Kafka.',
    action: 'Find the producer of the record (its topic, partition and offset are logged) or narrow OUTBOX_WEBHOOK_TOPICS; for Avro, set SCHEMA_REGISTRY_URL, then publish the events again with `outbox-relay replay`.',
  },
  WEBHOOK_API_UNAUTHORIZED: {
    retriable: false, poison: false,
    meaning: 'A request to `webhooks api` carried no bearer token, or one that is neither the platform token nor a customer token signed with OUTBOX_WEBHOOK_API_SIGNING_KEY (401).',
    action: 'Send `Authorization: Bearer <token>`: the platform token (OUTBOX_WEBHOOK_API_TOKEN), or a customer token minted by `POST /v1/customer-tokens` with the signing key the API runs with now.',
  },
  WEBHOOK_API_TOKEN_EXPIRED: {
    retriable: false, poison: false,
    meaning: 'A customer token given to `webhooks api` is past its expiry (401): customer tokens are short-lived on purpose.',
    action: "Mint a new one (`POST /v1/customer-tokens`, platform token) and hand the customer a new portal link.",
  },
  WEBHOOK_API_FORBIDDEN: {
    retriable: false, poison: false,
    meaning: "A customer token asked `webhooks api` for what only the platform may do (403): mint tokens, list customers, add a platform-wide endpoint; or it named another customer (in a body, a path or a `customerId` filter). Refused from the token alone, before any read: the answer is the same whether that customer exists.",
    action: "Make the call from the platform's application with the platform token, or with the token of the customer it names.",
  },
  WEBHOOK_API_INVALID_REQUEST: {
    retriable: false, poison: false,
    meaning: 'A request to `webhooks api` is malformed: JSON that does not parse, a field of the wrong type or out of range, a field the route does not take, a missing one, a text with a NUL byte (400); or its body is over the limit (413), a path parameter is over its limit (414), its route does not exist (404), or the path does not take the method (405, with `Allow` listing those it takes).',
    action: 'Correct what the message names (the field and what was expected; docs/openapi.json has every route\'s schema); nothing was changed.',
  },
  WEBHOOK_API_INVALID_CURSOR: {
    retriable: false, poison: false,
    meaning: "A listing's cursor given to `webhooks api` is not one the API handed out (400).",
    action: "Pass the `nextCursor` of the previous page as it was given, or leave `cursor` out for the first page.",
  },
  WEBHOOK_API_IDEMPOTENCY_CONFLICT: {
    retriable: false, poison: false,
    meaning: 'An `Idempotency-Key` given to `webhooks api` was used before with another request body (422), or its first request is still running (409).',
    action: 'Use a new key for a new request; for 409, retry once the first request has answered: the same key and body then get its answer.',
  },
  WEBHOOK_API_RATE_LIMITED: {
    retriable: true, poison: false,
    meaning: 'A caller (the platform, or one customer with any of its tokens) made more requests to `webhooks api` than OUTBOX_WEBHOOK_API_RATE_LIMIT allows per minute (429, with Retry-After).',
    action: 'Wait for Retry-After seconds; if the load is legitimate, raise OUTBOX_WEBHOOK_API_RATE_LIMIT.',
  },
  INTERNAL: {
    retriable: false, poison: false,
    meaning: "A broken invariant of the relay's own, or an error nobody classified: a bug. The process stops instead of looping; nothing is lost (the slot keeps every event after the confirmed position).",
    action: 'Report it with the log line (its stack field) or the CLI\'s message; starting again is safe.',
  },
} as const satisfies Record<string, CodeSpec>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** The codes with a property set in ERROR_CODES (e.g. every poison code). */
export function codesWhere(property: 'retriable' | 'poison'): ErrorCode[] {
  return (Object.keys(ERROR_CODES) as ErrorCode[]).filter((code) => ERROR_CODES[code][property]);
}

export interface RelayErrorOptions {
  retriable?: boolean;
  cause?: unknown;
  /** Structured facts for logs (never payloads). */
  details?: Record<string, unknown>;
}

/** The shape every error of this package has: a stable code, whether retrying helps, facts. */
export class CodedError<Code extends string> extends Error {
  readonly code: Code;
  readonly retriable: boolean;
  readonly details: Record<string, unknown>;

  constructor(code: Code, message: string, options: RelayErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.retriable = options.retriable ?? false;
    this.details = options.details ?? {};
  }
}

/** `retriable` comes from the code (ERROR_CODES), not from where the error is raised. */
export class RelayError extends CodedError<ErrorCode> {
  constructor(code: ErrorCode, message: string, options: Omit<RelayErrorOptions, 'retriable'> = {}) {
    super(code, message, { ...options, retriable: ERROR_CODES[code].retriable });
  }
}

/**
 * A problem with one event rather than with the stream: the event goes to the dead-letter topic
 * (or stops the relay when the operator chose `--on-poison fail`), the stream goes on.
 */
export class PoisonEventError extends RelayError {}

/**
 * The relay's code of an error; INTERNAL for one nobody classified (a driver's own code, an
 * ECONNREFUSED or a SQLSTATE, is no code of the relay's: classify it first, as
 * commands/failure.ts and session-failure.ts do).
 */
export function errorCode(error: unknown): ErrorCode {
  return error instanceof RelayError ? error.code : 'INTERNAL';
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The SQLSTATE of a node-postgres error (or anything carrying a string `code`). */
export function sqlState(error: unknown): string | undefined {
  if (error === null || typeof error !== 'object' || !('code' in error)) return undefined;
  const code = (error as { code: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

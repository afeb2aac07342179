import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { COMMANDS, type Args, type CommandSpec } from './commands.js';
import { compileCutover, compileHandback, compileRecover, compileReplay, compileRun } from './compile.js';
import { load, redactedConfig, type ConfigSources } from './load.js';
import type { OptionKey } from './options.js';

const required = { DATABASE_URL: 'postgres://relay:s3cret@db:5432/billing', KAFKA_BROKERS: 'k1:9092, k2:9092' };

/** The message of the CONFIG_INVALID error `load` throws. */
function problems<K extends OptionKey, O extends K, A extends Args>(command: CommandSpec<K, O, A>, sources: ConfigSources): string {
  try {
    load(command, sources);
  } catch (error) {
    expect(error).toMatchObject({ code: 'CONFIG_INVALID' });
    return (error as Error).message;
  }
  throw new Error('expected a configuration error');
}

describe('load', () => {
  it('applies defaults and compiles durations and lists', () => {
    const config = load(COMMANDS.run, { env: { ...required, OUTBOX_STATUS_INTERVAL: '2.5s' } });
    expect(config.kafkaBrokers).toEqual(['k1:9092', 'k2:9092']);
    expect(config.statusInterval).toBe(2500);
    expect(config.table).toEqual({ schema: 'public', name: 'event_outbox' });
    expect(config.onPoison).toBe('dead-letter');
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('loads only what the command reads', () => {
    const config = load(COMMANDS.replay, { env: { ...required, OUTBOX_STALL_TIMEOUT: 'never', OUTBOX_SLOT: 'bad-slot' }, flags: { since: '2026-11-29T10:00:00Z' } });
    expect(config.since).toEqual(new Date('2026-11-29T10:00:00Z'));
    expect(Object.keys(config)).not.toContain('slot');
    expect(Object.keys(config)).not.toContain('stallTimeout');
  });

  it('lets flags win over the environment', () => {
    const config = load(COMMANDS.run, { env: { ...required, OUTBOX_TABLE: 'a' }, flags: { table: 'billing.outbox', 'on-poison': 'fail' } });
    expect(config.table).toEqual({ schema: 'billing', name: 'outbox' });
    expect(config.onPoison).toBe('fail');
  });

  it('reports every problem at once, naming the variable and what was expected', () => {
    const message = problems(COMMANDS.run, { env: { KAFKA_BROKERS: 'k:9092', OUTBOX_ON_POISON: 'ignore', OUTBOX_STATUS_INTERVAL: 'soon', OUTBOX_SLOT: 'my-slot' } });
    expect(message).toMatch(/DATABASE_URL \(or --database-url, or DATABASE_URL_FILE naming a file\) is required/);
    expect(message).toMatch(/OUTBOX_ON_POISON="ignore" is not an allowed value; expected one of dead-letter \| fail\./);
    expect(message).toMatch(/OUTBOX_STATUS_INTERVAL="soon" is not a duration; expected a duration such as 500ms/);
    expect(message).toMatch(/OUTBOX_SLOT="my-slot" is not a plain SQL identifier/);
  });

  it('refuses a wait longer than a timer can hold (24d), but not a long retention', () => {
    const tooLong = (env: string) => new RegExp(`${env}="25d" is longer than 24d, the longest wait a timer can hold`);
    expect(problems(COMMANDS.prune, { env: { ...required, OUTBOX_PRUNE_EVERY: '25d' } })).toMatch(tooLong('OUTBOX_PRUNE_EVERY'));
    for (const env of ['OUTBOX_STATUS_INTERVAL', 'OUTBOX_SLOT_POLL_INTERVAL']) expect(problems(COMMANDS.run, { env: { ...required, [env]: '25d' } })).toMatch(tooLong(env));
    expect(load(COMMANDS.prune, { env: { ...required, OUTBOX_PRUNE_EVERY: '24d', OUTBOX_PRUNE_RETENTION: '400d' } })).toMatchObject({ pruneEvery: 24 * 86_400_000, pruneRetention: 400 * 86_400_000 });
  });

  it('takes a bare boolean flag as true, and refuses an empty boolean variable instead of switching the feature on', () => {
    expect(load(COMMANDS.run, { env: required, flags: { setup: '' } }).setup).toBe(true);
    expect(problems(COMMANDS.run, { env: { ...required, OUTBOX_AUTO_REGISTER: '' } })).toMatch(/OUTBOX_AUTO_REGISTER="" is not true or false/);
  });

  it('checks the database URL and the topic template with every other option', () => {
    const message = problems(COMMANDS.run, { env: { DATABASE_URL: 'this is not a url', KAFKA_BROKERS: 'k:9092', OUTBOX_TOPIC_TEMPLATE: 'outbox.{aggregate}', OUTBOX_SLOT: 'bad-slot' } });
    expect(message).toMatch(/DATABASE_URL=\(redacted\) is not a URL; expected a postgres:\/\/ or postgresql:\/\/ URL/);
    expect(message).toMatch(/OUTBOX_TOPIC_TEMPLATE="outbox.\{aggregate\}" has an unknown placeholder \{aggregate\}; expected a topic name with placeholders among \{aggregate_type\}, \{event_type\}/);
    expect(message).toMatch(/OUTBOX_SLOT="bad-slot"/);
    expect(problems(COMMANDS.run, { env: { ...required, DATABASE_URL: 'mysql://db/billing' } })).toMatch(/DATABASE_URL=\(redacted\) is a mysql: URL, not postgres:\/\//);
  });

  it('refuses a replication or stall timeout shorter than a second (0 would fire at once)', () => {
    expect(problems(COMMANDS.run, { env: { ...required, OUTBOX_REPLICATION_TIMEOUT: '0', OUTBOX_STALL_TIMEOUT: '500ms' } })).toMatch(/OUTBOX_REPLICATION_TIMEOUT="0" is shorter than 1s[\s\S]*OUTBOX_STALL_TIMEOUT="500ms" is shorter than 1s/);
  });

  it("applies a command's own default under the environment and flags", () => {
    expect(load(COMMANDS.prune, { env: required }).httpPort).toBe(9465);
    expect(load(COMMANDS.prune, { env: { ...required, OUTBOX_HTTP_PORT: '9999' } }).httpPort).toBe(9999);
    expect(load(COMMANDS.run, { env: required }).httpPort).toBe(9464);
  });

  it('never shows a password, in errors or in the start-up log', () => {
    const config = load(COMMANDS.run, { env: required });
    expect(JSON.stringify(redactedConfig(config))).not.toContain('s3cret');
    expect(JSON.stringify(redactedConfig(config))).toContain('relay:***@db');
    const inQuery = load(COMMANDS.run, { env: { ...required, DATABASE_URL: 'postgres://relay@db/billing?password=q1&sslpassword=q2&sslmode=verify-full' } });
    const shown = JSON.stringify(redactedConfig(inQuery));
    expect(shown).not.toMatch(/q1|q2/);
    expect(shown).toContain('sslmode=verify-full');
    const invalid = problems(COMMANDS.run, { env: { ...required, DATABASE_URL: 'mysql://relay:t0psecret@db/billing' } });
    expect(invalid).toContain('DATABASE_URL=(redacted) is a mysql: URL');
    expect(invalid).not.toContain('t0psecret');
  });
});

describe('secrets from files (<NAME>_FILE)', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'config-secrets-'));
  const file = (name: string, content: string) => {
    const target = path.join(dir, name);
    writeFileSync(target, content);
    return target;
  };

  it('reads the secret from the file, again at each use, and the start-up log names the file only', () => {
    const passwordFile = file('sasl', 'first-secret\n');
    const config = load(COMMANDS.run, { env: { ...required, KAFKA_SASL_MECHANISM: 'scram-sha-512', KAFKA_SASL_USERNAME: 'relay', KAFKA_SASL_PASSWORD_FILE: passwordFile } });
    expect(config.kafkaSaslPassword?.reveal()).toBe('first-secret');
    writeFileSync(passwordFile, 'rotated-secret');
    expect(config.kafkaSaslPassword?.reveal()).toBe('rotated-secret');
    const shown = JSON.stringify(redactedConfig(config));
    expect(shown).not.toContain('secret"');
    expect(shown).not.toContain('rotated');
    expect(shown).toContain(`(redacted) from ${passwordFile}`);
  });

  it('checks a file-borne value like a direct one, and shows the URL masked', () => {
    const urlFile = file('url', 'postgres://relay:from-file@db/billing');
    const { DATABASE_URL: _unused, ...withoutUrl } = required;
    const config = load(COMMANDS.run, { env: { ...withoutUrl, DATABASE_URL_FILE: urlFile } });
    expect(config.databaseUrl.reveal()).toBe('postgres://relay:from-file@db/billing');
    expect(JSON.stringify(redactedConfig(config))).toContain(`relay:***@db/billing (from ${urlFile})`);
    const notUrl = problems(COMMANDS.run, { env: { ...withoutUrl, DATABASE_URL_FILE: file('bad-url', 'mysql://x') } });
    expect(notUrl).toMatch(/expected a postgres:\/\/ or postgresql:\/\/ URL/);
    expect(notUrl).not.toContain('mysql://x');
  });

  it('refuses a file that cannot be read, an empty one, and a secret given both ways', () => {
    expect(problems(COMMANDS.run, { env: { ...required, DATABASE_PASSWORD_FILE: path.join(dir, 'missing') } })).toMatch(/DATABASE_PASSWORD_FILE: cannot read .*missing \(ENOENT\)/);
    expect(problems(COMMANDS.run, { env: { ...required, DATABASE_PASSWORD_FILE: file('empty', '\n') } })).toMatch(/DATABASE_PASSWORD_FILE: .*empty is empty/);
    expect(problems(COMMANDS.run, { env: { ...required, DATABASE_URL_FILE: file('url2', 'postgres://db/x') } })).toMatch(/DATABASE_URL_FILE and DATABASE_URL are both set/);
  });
});

describe('security checks', () => {
  it('name what a SASL mechanism, mutual TLS or registry auth is missing, with the other problems', () => {
    const message = problems(COMMANDS.run, {
      env: { ...required, KAFKA_SASL_MECHANISM: 'scram-sha-512', KAFKA_SSL_CERT_FILE: '/tls/client.crt', SCHEMA_REGISTRY_USERNAME: 'relay' },
    });
    expect(message).toMatch(/KAFKA_SASL_MECHANISM=scram-sha-512 needs KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD/);
    expect(message).toMatch(/KAFKA_SSL_CERT_FILE and KAFKA_SSL_KEY_FILE go together/);
    expect(message).toMatch(/KAFKA_SSL_CA_FILE \/ KAFKA_SSL_CERT_FILE are set but KAFKA_SSL is false/);
    expect(message).toMatch(/SCHEMA_REGISTRY_USERNAME and SCHEMA_REGISTRY_PASSWORD go together/);
    expect(problems(COMMANDS.run, { env: { ...required, KAFKA_SASL_MECHANISM: 'oauthbearer' } })).toMatch(/needs exactly one of KAFKA_SASL_OAUTHBEARER_TOKEN_FILE and KAFKA_SASL_OAUTHBEARER_PROVIDER/);
    expect(problems(COMMANDS.run, { env: { ...required, DATABASE_PASSWORD: 'x' } })).toMatch(/DATABASE_URL has a password and DATABASE_PASSWORD is set/);
  });
});

describe('cross-field checks', () => {
  it('are reported together with every other bad option, in one message, by the names the operator used', () => {
    const message = problems(COMMANDS.run, { env: { ...required, OUTBOX_RECONNECT_MIN: '1m', OUTBOX_SLOT: 'bad-slot' }, flags: { 'reconnect-max': '1s' } });
    expect(message).toMatch(/^invalid configuration:\n {2}- /);
    expect(message).toMatch(/OUTBOX_SLOT="bad-slot" is not a plain SQL identifier/);
    expect(message).toMatch(/OUTBOX_RECONNECT_MIN \(60000ms\) exceeds --reconnect-max \(1000ms\)/);
  });

  it('skip a value that is itself invalid: its own problem says enough', () => {
    const message = problems(COMMANDS.run, { env: { ...required, OUTBOX_BATCH_MAX_EVENTS: 'lots', OUTBOX_MAX_BUFFERED_EVENTS: '10' } });
    expect(message).toMatch(/OUTBOX_BATCH_MAX_EVENTS="lots" is not an integer/);
    expect(message).not.toMatch(/exceeds/);
  });

  it('refuse what the encoder cannot work with, at load rather than at the first event', () => {
    expect(problems(COMMANDS.run, { env: { ...required, OUTBOX_BATCH_MAX_EVENTS: '5000', OUTBOX_MAX_BUFFERED_EVENTS: '4000' } })).toMatch(/OUTBOX_BATCH_MAX_EVENTS \(5000\) exceeds OUTBOX_MAX_BUFFERED_EVENTS \(4000\)/);
    expect(problems(COMMANDS.run, { env: { ...required, OUTBOX_FORMAT: 'avro' } })).toMatch(/SCHEMA_REGISTRY_URL is required with OUTBOX_FORMAT=avro/);
    expect(problems(COMMANDS.replay, { env: required, flags: { 'key-schema': 'key.avsc', since: '2026-11-29' } })).toMatch(/--key-schema needs an Avro outbox \(OUTBOX_FORMAT=avro, or "format": "avro" in an OUTBOX_SOURCES entry\)/);
    // One Avro outbox among JSON ones needs the registry too, and is named as such.
    const oneAvro = JSON.stringify([{ table: 'billing.outbox' }, { table: 'payments.outbox', format: 'avro' }]);
    expect(problems(COMMANDS.run, { env: { ...required, OUTBOX_SOURCES: oneAvro } })).toMatch(/SCHEMA_REGISTRY_URL is required with Avro outboxes \(OUTBOX_SOURCES entries with "format": "avro"\)/);
    // Every outbox JSON by its entry: no registry needed, whatever OUTBOX_FORMAT says.
    const allJson = JSON.stringify([{ table: 'billing.outbox', format: 'json' }]);
    expect(() => load(COMMANDS.run, { env: { ...required, OUTBOX_FORMAT: 'avro', OUTBOX_SOURCES: allJson } })).not.toThrow();
  });

  it('refuse a JSON outbox and an Avro outbox that write one topic whatever their events hold, naming both and the templates', () => {
    const env = { ...required, SCHEMA_REGISTRY_URL: 'http://registry:8081' };
    // {schema} and {table} are the table's own: billing.events for both.
    const same = JSON.stringify([{ table: 'billing.outbox', topicTemplate: '{schema}.events' }, { table: 'billing.outbox2', format: 'avro' }, { messages: 'outbox', format: 'avro' }]);
    const message = problems(COMMANDS.run, { env: { ...env, OUTBOX_SOURCES: same, OUTBOX_TOPIC_TEMPLATE: 'billing.events' } });
    expect(message).toMatch(/OUTBOX_SOURCES: outboxes billing\.outbox \(json, topic template "\{schema\}\.events"\) and billing\.outbox2 \(avro, OUTBOX_TOPIC_TEMPLATE "billing\.events"\) both write topic billing\.events: its consumers would read two formats; give one of them a "topicTemplate" of its own, or both the same "format"/);
    // Templates with an event's placeholders meet only if events make them: refused at run time, when they do.
    const byEvent = JSON.stringify([{ table: 'billing.outbox' }, { table: 'payments.outbox', format: 'avro' }]);
    expect(() => load(COMMANDS.run, { env: { ...env, OUTBOX_SOURCES: byEvent } })).not.toThrow();
    // One format on one topic is what a topic is for.
    const oneFormat = JSON.stringify([{ table: 'billing.outbox', format: 'avro' }, { messages: 'outbox', format: 'avro' }]);
    expect(() => load(COMMANDS.run, { env: { ...env, OUTBOX_SOURCES: oneFormat, OUTBOX_TOPIC_TEMPLATE: 'events' } })).not.toThrow();
  });

  it("hold a command to those whose options it reads (replay has no reconnect loop of its own, but the encoder's retries)", () => {
    expect(problems(COMMANDS.prune, { env: { ...required, OUTBOX_RECONNECT_MIN: '1m', OUTBOX_RECONNECT_MAX: '1s', OUTBOX_PRUNE_BATCH_SIZE: '0' } })).not.toMatch(/RECONNECT/);
    expect(problems(COMMANDS.replay, { env: { ...required, OUTBOX_RECONNECT_MIN: '1m', OUTBOX_RECONNECT_MAX: '1s' }, flags: { 'event-id': 'evt_1' } })).toMatch(/OUTBOX_RECONNECT_MIN \(60000ms\) exceeds OUTBOX_RECONNECT_MAX/);
  });

  it("include a command's own: replay needs a filter, drop-slot a confirmation", () => {
    const replay = problems(COMMANDS.replay, { env: { ...required, OUTBOX_FORMAT: 'xml' } });
    expect(replay).toMatch(/OUTBOX_FORMAT="xml" is not an allowed value/);
    expect(replay).toMatch(/replay needs at least one of --since, --until, --event-type, --event-id/);
    expect(problems(COMMANDS.replay, { env: required, flags: { since: 'yesterday' } })).toMatch(/--since="yesterday" is not a time; expected ISO 8601, e.g. 2026-11-29T10:00:00Z\.$/);
    expect(problems(COMMANDS['drop-slot'], { env: { ...required, OUTBOX_SLOT: 'orders' } })).toMatch(/drop-slot needs --yes: dropping "orders" releases its WAL/);
    expect(load(COMMANDS['drop-slot'], { env: required, flags: { yes: '' } }).yes).toBe(true);
  });

  it('cutover needs the pending condition, handback it and the SET clause', () => {
    expect(problems(COMMANDS.cutover, { env: required })).toMatch(/cutover needs --pending: the condition of the rows the polling relay has not sent/);
    expect(load(COMMANDS.cutover, { env: required, flags: { pending: "status = 'pending'" } }).pending).toBe("status = 'pending'");
    expect(problems(COMMANDS.handback, { env: required, flags: { pending: 'NOT published' } })).toMatch(/handback needs --pending \(which rows the poller would send\) and --mark-sent/);
  });

  it('take a table without an aggregate type, and refuse a topic template that names one', () => {
    const without = { ...required, OUTBOX_COLUMN_AGGREGATE_TYPE: '' };
    expect(problems(COMMANDS.run, { env: without })).toMatch(/OUTBOX_TOPIC_TEMPLATE "outbox\.\{aggregate_type\}" uses \{aggregate_type\}, but OUTBOX_COLUMN_AGGREGATE_TYPE is empty \(the table has no aggregate type\): route by \{event_type\}/);
    expect(load(COMMANDS.run, { env: { ...without, OUTBOX_TOPIC_TEMPLATE: 'billing.{event_type}' } }).columnAggregateType).toBeNull();
  });
});

describe('status', () => {
  it('loads through the same loader, KAFKA_BROKERS optional: null when unset or empty, checked when set', () => {
    expect(load(COMMANDS.status, { env: { DATABASE_URL: required.DATABASE_URL } }).kafkaBrokers).toBeNull();
    expect(load(COMMANDS.status, { env: { ...required, KAFKA_BROKERS: '' } }).kafkaBrokers).toBeNull();
    expect(load(COMMANDS.status, { env: { DATABASE_URL: required.DATABASE_URL }, flags: { 'kafka-brokers': 'k1:9092,k2:9092' } }).kafkaBrokers).toEqual(['k1:9092', 'k2:9092']);
    const message = problems(COMMANDS.status, { env: { DATABASE_URL: 'mysql://db', KAFKA_BROKERS: ',' } });
    expect(message).toMatch(/DATABASE_URL=\(redacted\) is a mysql: URL/);
    expect(message).toMatch(/KAFKA_BROKERS="," is empty; expected comma-separated host:port pairs, e.g. kafka-1:9092,kafka-2:9092, or empty\./);
  });
});

describe('compiled options', () => {
  it('are frozen all the way down, durations in ms', () => {
    const options = compileRun(load(COMMANDS.run, { env: { ...required, OUTBOX_LINGER: '20ms', OUTBOX_SHUTDOWN_TIMEOUT: '1m' } }));
    expect(options.relay.delivery.sink.lingerMs).toBe(20);
    expect(options.relay.shutdownTimeoutMs).toBe(60_000);
    expect(Object.isFrozen(options.relay.delivery.outboxes[0])).toBe(true);
    expect(Object.isFrozen(options.relay.delivery.producer.brokers)).toBe(true);
    expect(options.http).toEqual({ host: '127.0.0.1', port: 9464 });
    expect(compileRun(load(COMMANDS.run, { env: { ...required, OUTBOX_HTTP_PORT: '0' } })).http).toBeNull();
  });
});

describe('OUTBOX_SOURCES', () => {
  it('makes each entry whole with OUTBOX_COLUMN_* and OUTBOX_TOPIC_TEMPLATE, {schema} and {table} filled in', () => {
    const sources = JSON.stringify([
      { table: 'billing.outbox' },
      { table: 'payments.outbox', columns: { eventId: 'id', aggregateType: null }, topicTemplate: '{schema}.{table}.{event_type}', format: 'avro' },
      { messages: 'outbox', topicTemplate: 'events.{aggregate_type}' },
    ]);
    const { relay, encoder } = compileRun(load(COMMANDS.run, { env: { ...required, OUTBOX_SOURCES: sources, OUTBOX_COLUMN_PAYLOAD: 'body', SCHEMA_REGISTRY_URL: 'http://registry:8081' } }));
    expect(relay.delivery.outboxes).toEqual([
      { kind: 'table', table: { schema: 'billing', name: 'outbox' }, columns: expect.objectContaining({ eventId: 'event_id', aggregateType: 'aggregate_type', payload: 'body' }), topicTemplate: 'outbox.{aggregate_type}', format: 'json' },
      { kind: 'table', table: { schema: 'payments', name: 'outbox' }, columns: expect.objectContaining({ eventId: 'id', aggregateType: null, payload: 'body' }), topicTemplate: 'payments.outbox.{event_type}', format: 'avro' },
      { kind: 'messages', prefix: 'outbox', topicTemplate: 'events.{aggregate_type}', format: 'json' },
    ]);
    // The Avro encoder is made for the Avro outbox, its subjects resolved for that outbox's topics only.
    expect(encoder.avro?.topicTemplates).toEqual(['payments.outbox.{event_type}']);
    // The stream asks for messages, and parses each table's own payload column.
    expect(relay.source.messages).toBe(true);
    expect(relay.source.tables).toEqual([{ schema: 'billing', name: 'outbox' }, { schema: 'payments', name: 'outbox' }]);
    expect(relay.source.columnParsers?.({ schema: 'payments', name: 'outbox' })?.({ name: 'body', typeOid: 3802 })).toBeDefined();
    expect(relay.source.columnParsers?.({ schema: 'public', name: 'other' })).toBeUndefined();
    // A pattern is among what each session checks for an unfinished recover (its tenants' marks).
    const tenants = compileRun(load(COMMANDS.run, { env: { ...required, OUTBOX_SOURCES: JSON.stringify([{ tables: 'tenant_*.event_outbox' }, { messages: 'outbox' }]) } }));
    expect(tenants.relay.source.tables).toEqual([{ schema: 'tenant_*', name: 'event_outbox' }]);
  });

  it('unset, streams OUTBOX_TABLE alone as before, without asking for messages', () => {
    const { relay } = compileRun(load(COMMANDS.run, { env: { ...required, OUTBOX_TABLE: 'billing.event_outbox', OUTBOX_TOPIC_TEMPLATE: '{schema}.{aggregate_type}' } }));
    expect(relay.delivery.outboxes).toEqual([{ kind: 'table', table: { schema: 'billing', name: 'event_outbox' }, columns: expect.objectContaining({ eventId: 'event_id' }), topicTemplate: 'billing.{aggregate_type}', format: 'json' }]);
    expect(relay.source.messages).toBe(false);
  });

  it('refuses each malformed entry, naming it and what was expected', () => {
    const cases: [unknown, RegExp][] = [
      ['not json', /OUTBOX_SOURCES="not json" is not JSON/],
      [[], /is not a non-empty JSON array/],
      [[{ table: 'billing.outbox', messages: 'x' }], /entry 1 has "table" and "messages" of "table", "tables" and "messages" \(exactly one of them\)/],
      [[{ topicTemplate: 'x' }], /entry 1 has none of "table", "tables" and "messages"/],
      [[{ tables: 'tenant_1.event_outbox' }], /entry 1 "tables" is not a pattern of schema-qualified table names \(schema\.table with \* for any run of characters/],
      [[{ tables: 'tenant_*.*' }], /entry 1 "tables" is not a pattern/],
      [[{ tables: 'tenant_*.event_outbox' }, { tables: 'tenant_*.event_outbox' }], /entry 2 repeats the pattern tenant_\*\.event_outbox/],
      [[{ table: 'billing.outbox', topic: 'x' }], /entry 1 has unknown keys "topic" \(expected "table", "columns", "topicTemplate", "format"\)/],
      [[{ table: 'billing.outbox', format: 'protobuf' }], /entry 1 "format" is "protobuf", expected "json" or "avro"/],
      [[{ table: 'outbox' }], /entry 1 "table" is not a schema-qualified table name/],
      [[{ table: 'billing.outbox' }, { table: 'billing.outbox' }], /entry 2 repeats the table billing\.outbox/],
      [[{ table: 'billing.outbox', columns: { id: 'x' } }], /entry 1 "columns" has an unknown role "id"/],
      [[{ table: 'billing.outbox', columns: { eventId: 'a b' } }], /entry 1 "columns"\."eventId" is not a plain SQL identifier/],
      [[{ table: 'billing.outbox', topicTemplate: 'x.{tenant}' }], /has an unknown placeholder \{tenant\}/],
      [[{ messages: 'outbox', topicTemplate: 'x.{table}' }], /entry 1: a message outbox has no table, so its "topicTemplate" cannot use \{schema\} or \{table\}/],
      [[{ messages: '' }], /entry 1 "messages" is not a non-empty string/],
      [[{ table: 'billing.outbox', columns: { aggregateType: null } }], /the entry of billing\.outbox routes by \{aggregate_type\}, but that table has no aggregate type column/],
    ];
    for (const [value, expected] of cases) expect(problems(COMMANDS.run, { env: { ...required, OUTBOX_SOURCES: typeof value === 'string' ? value : JSON.stringify(value) } })).toMatch(expected);
  });

  it('comes from OUTBOX_SOURCES_FILE, a mounted file, checked the same way', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'sources-'));
    const file = path.join(dir, 'sources.json');
    writeFileSync(file, JSON.stringify([{ table: 'billing.outbox' }, { messages: 'outbox' }]));
    expect(compileRun(load(COMMANDS.run, { env: { ...required, OUTBOX_SOURCES_FILE: file } })).relay.delivery.outboxes).toHaveLength(2);
    writeFileSync(file, JSON.stringify([{ table: 'outbox' }]));
    expect(problems(COMMANDS.run, { env: { ...required, OUTBOX_SOURCES_FILE: file } })).toContain(`OUTBOX_SOURCES_FILE="${file}": entry 1 "table" is not a schema-qualified table name`);
  });

  it('with several outboxes, replay, recover, cutover and handback work on every table', () => {
    const several = JSON.stringify([{ table: 'billing.outbox' }, { messages: 'outbox' }]);
    expect(compileRecover(load(COMMANDS.recover, { env: { ...required, OUTBOX_SOURCES: several } })).recover.delivery.outboxes).toHaveLength(2);
    expect(compileCutover(load(COMMANDS.cutover, { env: { ...required, OUTBOX_SOURCES: several }, flags: { pending: "status = 'pending'" } })).cutover.delivery.outboxes).toHaveLength(2);
    // handback reads each table's event id column, an entry's own or OUTBOX_COLUMN_EVENT_ID.
    const handback = compileHandback(load(COMMANDS.handback, { env: { ...required, OUTBOX_SOURCES: JSON.stringify([{ table: 'billing.outbox', columns: { eventId: 'id' } }, { tables: 'tenant_*.event_outbox' }]), OUTBOX_COLUMN_EVENT_ID: 'uuid' }, flags: { pending: "status = 'pending'", 'mark-sent': "status = 'sent'" } })).handback;
    expect(handback.outboxes.map((outbox) => outbox.kind !== 'messages' && outbox.columns.eventId)).toEqual(['id', 'uuid']);
    // replay's transactional id is named after the first outbox, as it was after the one table.
    const replay = compileReplay(load(COMMANDS.replay, { env: { ...required, OUTBOX_SOURCES: several, OUTBOX_DELIVERY: 'exactly-once' }, flags: { since: '2026-01-01T00:00:00Z' } }));
    expect(replay.delivery.outboxes).toHaveLength(2);
    expect(replay.delivery.exactlyOnce?.transactionalId).toBe('outbox-relay.billing.outbox.replay');
  });

  it("with the slot on a standby (OUTBOX_REPLICA_URL), refuses cutover and handback (a polling relay's table, on the primary), saying where to run them; recover and run read the standby", () => {
    const replica = { ...required, OUTBOX_REPLICA_URL: 'postgres://relay@db-standby:5432/billing' };
    expect(problems(COMMANDS.cutover, { env: replica, flags: { pending: "status = 'pending'" } })).toMatch(/cutover creates the slot under a snapshot of a polling relay's table, on the primary only, and OUTBOX_REPLICA_URL puts the slot on a standby: run cutover with OUTBOX_REPLICA_URL unset; the slot is then the primary.s, and `run` must read it there/);
    expect(problems(COMMANDS.handback, { env: replica, flags: { pending: "status = 'pending'", 'mark-sent': "status = 'sent'" } })).toMatch(/handback drops the slot/);
    expect(compileRecover(load(COMMANDS.recover, { env: replica })).recover.slotServer.standby).toBe(true);
    expect(compileRun(load(COMMANDS.run, { env: replica })).relay.source.slotServer.standby).toBe(true);
    expect(problems(COMMANDS.run, { env: { ...required, OUTBOX_REPLICA_URL: 'mysql://db-standby/billing' } })).toMatch(/OUTBOX_REPLICA_URL.*not postgres:\/\//);
  });
});

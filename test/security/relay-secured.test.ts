import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import { avroRegistryFromEnv, kafkaConfigFromEnv } from '../../src/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli } from '../harness/cli.js';
import { get } from '../harness/http.js';
import { testKafkaClients } from '../harness/kafka-clients.js';
import { TopicReader } from '../harness/kafka.js';
import { billingEvent, type OutboxRow } from '../harness/outbox.js';
import { freePort } from '../harness/ports.js';
import { RelayProcess } from '../harness/relay-process.js';
import { AclOperation, unsecuredJws, useSecureStack } from '../harness/secure-stack.js';

/**
 * The relay against services that demand TLS and authentication (scripts/stack.sh up secure):
 * Kafka over SASL_SSL (SCRAM-SHA-512, OAUTHBEARER) and mutual TLS with ACLs, Postgres with
 * verify-full (a password from a file, or a client certificate), the registry over HTTPS with
 * basic auth. Each path delivers; each refusal stops the relay (exit 1) naming its cause; no
 * secret appears in any log line, in /metrics or in `status --json`.
 */
describe('the relay on secured services', () => {
  const secure = useSecureStack();
  const id = `s${randomUUID().replaceAll('-', '').slice(0, 10)}`;
  const table = `outbox_${id}`;
  const topicPrefix = `secure-${id}`;
  const topic = `${topicPrefix}.invoice`;
  const deadLetterTopic = `${topicPrefix}.dead-letter`;
  const secrets = mkdtempSync(path.join(tmpdir(), 'outbox-creds-'));
  let admin: pg.Pool;
  let reader: TopicReader;

  const secretFile = (name: string, content: string): string => {
    const file = path.join(secrets, name);
    writeFileSync(file, `${content}\n`, { mode: 0o600 });
    return file;
  };
  const tls = (name: string) => path.join(secure.env.tlsDir, name);

  /** The relay's environment short of Kafka and Postgres credentials: its outbox, topics, fast retries. */
  const baseEnv = (slot: string): Record<string, string> => ({
    OUTBOX_TABLE: `public.${table}`,
    OUTBOX_SLOT: slot,
    OUTBOX_PUBLICATION: `pub_${id}`,
    OUTBOX_TOPIC_TEMPLATE: `${topicPrefix}.{aggregate_type}`,
    OUTBOX_DEAD_LETTER_TOPIC: deadLetterTopic,
    OUTBOX_STATUS_INTERVAL: '200ms',
    OUTBOX_RECONNECT_MIN: '200ms',
    OUTBOX_RECONNECT_MAX: '1s',
    OUTBOX_HTTP_PORT: '0',
    LOG_LEVEL: 'debug',
  });
  /** SCRAM-SHA-512 over TLS as `relay`, the password from a file. */
  const scramEnv = (password = secure.env.kafkaUser.password): Record<string, string> => ({
    KAFKA_BROKERS: secure.env.kafkaSaslSslBrokers.join(','),
    KAFKA_SSL: 'true',
    KAFKA_SSL_CA_FILE: tls('ca.crt'),
    KAFKA_SASL_MECHANISM: 'scram-sha-512',
    KAFKA_SASL_USERNAME: secure.env.kafkaUser.username,
    KAFKA_SASL_PASSWORD_FILE: secretFile(`kafka-${randomUUID()}`, password),
  });
  /** verify-full as `relay`: the URL without its password, the password from a file. */
  const passwordDatabaseEnv = (password?: string): Record<string, string> => {
    const url = new URL(secure.env.databaseUrl);
    const fromUrl = decodeURIComponent(url.password);
    url.password = '';
    return { DATABASE_URL: url.toString(), DATABASE_PASSWORD_FILE: secretFile(`pg-${randomUUID()}`, password ?? fromUrl) };
  };

  async function createSlot(slot: string): Promise<void> {
    const setup = await cli(['setup'], { ...baseEnv(slot), DATABASE_URL: secure.env.databaseAdminUrl });
    expect(setup.code, setup.stderr).toBe(0);
    // What sql/003_roles.sql grants the relay: `status` (and `replay`) read the outbox.
    await admin.query(`GRANT SELECT ON ${table} TO relay, relay_cert`);
  }

  async function insert(count: number): Promise<OutboxRow[]> {
    const rows = Array.from({ length: count }, (_, n) => billingEvent(`inv_${n % 3}`, n));
    for (const row of rows) {
      await admin.query(`INSERT INTO ${table} (event_id, aggregate_type, aggregate_id, event_type, payload, headers) VALUES ($1, $2, $3, $4, $5, $6)`, [
        row.eventId, row.aggregateType, row.aggregateId, row.eventType, JSON.stringify(row.payload), JSON.stringify(row.headers),
      ]);
    }
    return rows;
  }

  async function delivered(rows: readonly OutboxRow[], relay: RelayProcess): Promise<void> {
    await reader.until(`${rows.length} events`, (records) => rows.every((row) => records.some((record) => record.headers.event_id === row.eventId)), 60_000, () => relay.tail());
  }

  /** Starts the relay, inserts `count` events, waits for them in Kafka, stops it: exit 0. */
  async function deliversWith(env: Record<string, string>, count: number, during?: (relay: RelayProcess) => Promise<void>): Promise<RelayProcess> {
    const relay = new RelayProcess(env).start();
    try {
      await relay.waitActive();
      await delivered(await insert(count), relay);
      await during?.(relay);
    } finally {
      const code = await relay.stop();
      expect(code, relay.tail()).toBe(0);
    }
    return relay;
  }

  /** A schemas folder whose invoice.paid fits the test events (billingEvent). */
  function testSchemas(): string {
    const dir = mkdtempSync(path.join(tmpdir(), 'secure-schemas-'));
    const fields = [{ name: 'invoice_id', type: 'string' }, { name: 'sequence', type: 'int' }, { name: 'amount_cents', type: 'long' }, { name: 'currency', type: 'string' }];
    writeFileSync(path.join(dir, 'invoice.paid.avsc'), JSON.stringify({ type: 'record', name: 'InvoicePaid', namespace: `test.${id}`, fields }));
    return dir;
  }

  /** Runs the relay until it exits by itself; returns the exit code and its log. */
  async function refused(env: Record<string, string>, timeoutMs = 60_000): Promise<{ code: number | null; log: string }> {
    const relay = new RelayProcess(env).start();
    const code = await relay.waitExit(timeoutMs).catch(async (error: Error) => {
      await relay.kill9();
      throw error;
    });
    return { code, log: relay.raw.join('\n') };
  }

  beforeAll(async () => {
    admin = new pg.Pool({ ...secure.pg('postgres'), max: 2 });
    // Every test's slot before any row exists: setup refuses a new slot over retained rows.
    for (const client of testKafkaClients()) for (const name of ['scram', 'mtls', 'oauth', 'refused', 'eos']) await createSlot(`slot_${name}_${client}_${id}`);
    await createSlot(`slot_refused_${id}`);
    await secure.createTopics([topic, deadLetterTopic]);
    // What the relay's principals need on their topics (docs/security.md#kafka-acls).
    const needed = [AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS];
    await secure.allow(`User:${secure.env.kafkaUser.username}`, { topics: [topic, deadLetterTopic] }, needed);
    await secure.allow(secure.env.kafkaMtlsPrincipal, { topics: [topic, deadLetterTopic] }, needed);
    reader = await new TopicReader(secure.kafka({ listener: 'sasl_ssl', sasl: secure.sasl('scram-sha-512', secure.env.kafkaAdmin), retries: 10 })).start([topic]);
  });

  afterAll(async () => {
    await reader?.stop();
    await secure.revokeAll(`User:${secure.env.kafkaUser.username}`).catch(() => undefined);
    await secure.revokeAll(secure.env.kafkaMtlsPrincipal).catch(() => undefined);
    await admin?.query(`SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE $1 AND NOT active`, [`%${id}`]).catch(() => undefined);
    await admin?.query(`DROP PUBLICATION IF EXISTS pub_${id}`).catch(() => undefined);
    await admin?.query(`DROP TABLE IF EXISTS ${table}`).catch(() => undefined);
    await admin?.end();
  });

  describe.each(testKafkaClients())('Kafka on %s', (client) => {
    it('SCRAM-SHA-512 over TLS, Postgres verify-full with a client certificate, Avro through the registry over HTTPS with basic auth: delivered, and no secret anywhere it is written', async () => {
      const slot = `slot_scram_${client}_${id}`;
      const port = await freePort();
      const env = {
        ...baseEnv(slot),
        OUTBOX_KAFKA_CLIENT: client,
        ...scramEnv(),
        DATABASE_URL: secure.env.databaseCertUrl,
        OUTBOX_FORMAT: 'avro',
        OUTBOX_AUTO_REGISTER: 'true',
        OUTBOX_SUBJECT_STRATEGY: 'topic-record',
        OUTBOX_SCHEMAS_DIR: testSchemas(),
        SCHEMA_REGISTRY_URL: secure.env.schemaRegistryUrl,
        SCHEMA_REGISTRY_CA_FILE: tls('ca.crt'),
        SCHEMA_REGISTRY_USERNAME: secure.env.registryUser.username,
        SCHEMA_REGISTRY_PASSWORD_FILE: secretFile('registry', secure.env.registryUser.password),
        OUTBOX_HTTP_PORT: String(port),
      };
      let metrics = '';
      const relay = await deliversWith(env, 5, async () => {
        const record = reader.records.at(-1)!;
        expect(record.value![0], 'Confluent wire format: magic byte 0').toBe(0);
        metrics = (await get(port, '/metrics')).body;
        expect(metrics).toMatch(/outbox_relay_events_published_total\{[^}]*\} [1-9]/);
      });
      const status = await cli(['status', '--json'], env);
      expect(status.code, status.stderr).toBe(0);

      const written = [relay.raw.join('\n'), metrics, status.stdout, status.stderr].join('\n');
      const secretsSet = { 'the Kafka password': secure.env.kafkaUser.password, 'the registry password': secure.env.registryUser.password, "the client key's first line": secure.pem('client.key').split('\n')[1]! };
      for (const [what, value] of Object.entries(secretsSet)) {
        const at = written.indexOf(value);
        expect(at, `${what} was written to the logs, /metrics or status: ...${written.slice(Math.max(0, at - 300), at).replaceAll(value, '<secret>')}`).toBe(-1);
      }
      // The start-up line says where secrets come from, not what they are.
      expect(relay.raw.join('\n')).toContain('(redacted) from');

      // The client kit connects with the relay's own variables: a consumer (kafkaConfigFromEnv)
      // reads the events, and decodes them through the registry (avroRegistryFromEnv).
      const user = `User:${secure.env.kafkaUser.username}`;
      // The reader's group id is random: '*' is Kafka's literal wildcard for any group.
      await secure.allow(user, { topics: [topic], groups: ['*'] }, [AclOperation.READ, AclOperation.DESCRIBE]);
      const clientEnv = {
        ...scramEnv(),
        SCHEMA_REGISTRY_URL: secure.env.schemaRegistryUrl,
        SCHEMA_REGISTRY_CA_FILE: tls('ca.crt'),
        SCHEMA_REGISTRY_USERNAME: secure.env.registryUser.username,
        SCHEMA_REGISTRY_PASSWORD_FILE: secretFile('registry-reader', secure.env.registryUser.password),
      };
      const consumerReader = await new TopicReader(new Kafka({ clientId: 'secure-client-kit', ...kafkaConfigFromEnv(clientEnv), logLevel: logLevel.NOTHING })).start([topic]);
      try {
        await consumerReader.until('the Avro events', (records) => records.some((record) => record.value?.[0] === 0), 30_000);
        const avro = consumerReader.records.find((record) => record.value?.[0] === 0)!;
        const decoded = (await avroRegistryFromEnv(clientEnv).decode(avro.value!)) as { invoice_id: string };
        expect(decoded.invoice_id).toMatch(/^inv_/);
      } finally {
        await consumerReader.stop();
      }
    });

    it('exactly-once over SASL_SSL with ACLs: without WRITE on its transactional id it stops naming it; granted, it delivers', async () => {
      const slot = `slot_eos_${client}_${id}`;
      const progressTopic = `${topicPrefix}.${client}.progress`;
      const env = { ...baseEnv(slot), OUTBOX_KAFKA_CLIENT: client, ...passwordDatabaseEnv(), ...scramEnv(), OUTBOX_DELIVERY: 'exactly-once', OUTBOX_PROGRESS_TOPIC: progressTopic };
      await secure.createTopics([progressTopic]);
      const principal = `User:${secure.env.kafkaUser.username}`;
      await secure.allow(principal, { topics: [progressTopic] }, [AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS]);
      const { code, log } = await refused(env);
      expect(code).toBe(1);
      expect(log).toMatch(/"code":"SINK_NOT_AUTHORIZED"/);
      expect(log).toContain(`transactional id outbox-relay.${slot}`);
      await secure.allow(principal, { transactionalIds: [`outbox-relay.${slot}`] });
      const relay = await deliversWith(env, 3);
      expect(relay.logs.some((line) => /^exactly-once: /.test(line.msg))).toBe(true);
    });

    it('mutual TLS to Kafka, and a Postgres password from DATABASE_PASSWORD_FILE (JSON payloads): delivered', async () => {
      const slot = `slot_mtls_${client}_${id}`;
      const env = {
        ...baseEnv(slot),
        OUTBOX_KAFKA_CLIENT: client,
        ...passwordDatabaseEnv(),
        KAFKA_BROKERS: secure.env.kafkaMtlsBrokers.join(','),
        KAFKA_SSL: 'true',
        KAFKA_SSL_CA_FILE: tls('ca.crt'),
        KAFKA_SSL_CERT_FILE: tls('client.crt'),
        KAFKA_SSL_KEY_FILE: tls('client.key'),
      };
      await deliversWith(env, 3);
    });

    it('OAUTHBEARER with a token file (re-read at each authentication): delivered; an expired token stops the relay naming it', async () => {
      const slot = `slot_oauth_${client}_${id}`;
      const tokenFile = secretFile('token', unsecuredJws(secure.env.kafkaUser.username));
      const env = {
        ...baseEnv(slot),
        OUTBOX_KAFKA_CLIENT: client,
        ...passwordDatabaseEnv(),
        KAFKA_BROKERS: secure.env.kafkaSaslSslBrokers.join(','),
        KAFKA_SSL: 'true',
        KAFKA_SSL_CA_FILE: tls('ca.crt'),
        KAFKA_SASL_MECHANISM: 'oauthbearer',
        KAFKA_SASL_OAUTHBEARER_TOKEN_FILE: tokenFile,
      };
      await deliversWith(env, 3);
      writeFileSync(tokenFile, unsecuredJws(secure.env.kafkaUser.username, -60));
      const expired = await refused(env);
      expect(expired.code, expired.log).toBe(1);
      expect(expired.log).toMatch(/SINK_AUTHENTICATION.*OAUTHBEARER token from .*token expired at/);
    });
  });

  describe('each refusal stops the relay with exit 1, naming its cause (never a retry loop)', () => {
    const slot = `slot_refused_${id}`;
    const working = () => ({ ...baseEnv(slot), ...passwordDatabaseEnv(), ...scramEnv() });

    describe.each(testKafkaClients())('Kafka refusals on %s', (client) => {
      const clientSlot = `slot_refused_${client}_${id}`;
      const working = () => ({ ...baseEnv(clientSlot), OUTBOX_KAFKA_CLIENT: client, ...passwordDatabaseEnv(), ...scramEnv() });

      it('a wrong Kafka password: SINK_AUTHENTICATION', async () => {
        // 90 s: librdkafka takes about 30 s to close its client after the refusal (docs/kafka-clients.md).
        const { code, log } = await refused({ ...working(), ...scramEnv('not-the-password') }, 90_000);
        expect(code, log).toBe(1);
        expect(log).toMatch(/SINK_AUTHENTICATION/);
        expect(log).not.toContain('not-the-password');
      });

      it('a broker certificate signed by a CA the relay does not trust: SINK_TLS, naming KAFKA_SSL_CA_FILE', async () => {
        const { code, log } = await refused({ ...working(), KAFKA_SSL_CA_FILE: tls('rogue-ca.crt') }, 90_000);
        expect(code, log).toBe(1);
        expect(log).toMatch(/SINK_TLS.*KAFKA_SSL_CA_FILE/);
      });

      it('a principal with no WRITE at all: SINK_NOT_AUTHORIZED at start (an idempotent producer needs WRITE on some topic)', async () => {
        const principal = 'User:relay_cert';
        await secure.revokeAll(principal);
        await secure.allow(principal, { topics: [topic, deadLetterTopic] }, [AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS]);
        try {
          const env = { ...working(), KAFKA_BROKERS: secure.env.kafkaMtlsBrokers.join(','), KAFKA_SASL_MECHANISM: '', KAFKA_SSL_CERT_FILE: tls('client.crt'), KAFKA_SSL_KEY_FILE: tls('client.key') };
          const { code, log } = await refused(env, 90_000);
          expect(code, log).toBe(1);
          expect(log).toMatch(/SINK_NOT_AUTHORIZED.*CLUSTER_AUTHORIZATION_FAILED/);
        } finally {
          await secure.revokeAll(principal);
          await secure.allow(principal, { topics: [topic, deadLetterTopic] }, [AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS]);
        }
      });

      it('a principal without WRITE on its events topic (one ACL fewer than needed): SINK_NOT_AUTHORIZED at the first event, which stays in the slot', async () => {
        const principal = 'User:relay_cert';
        await secure.revokeAll(principal);
        await secure.allow(principal, { topics: [deadLetterTopic] }, [AclOperation.WRITE, AclOperation.DESCRIBE]);
        await secure.allow(principal, { topics: [topic] }, [AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS]);
        try {
          const env = { ...working(), KAFKA_BROKERS: secure.env.kafkaMtlsBrokers.join(','), KAFKA_SASL_MECHANISM: '', KAFKA_SSL_CERT_FILE: tls('client.crt'), KAFKA_SSL_KEY_FILE: tls('client.key') };
          const relay = new RelayProcess(env).start();
          await relay.waitActive();
          const { rows } = await admin.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
          await insert(1);
          const code = await relay.waitExit(60_000);
          expect(code, relay.tail()).toBe(1);
          expect(relay.raw.join('\n')).toMatch(/SINK_NOT_AUTHORIZED.*TOPIC_AUTHORIZATION_FAILED/);
          const { rows: held } = await admin.query<{ held: boolean }>('SELECT confirmed_flush_lsn <= $2::pg_lsn AS held FROM pg_replication_slots WHERE slot_name = $1', [clientSlot, rows[0]!.lsn]);
          expect(held[0]?.held, 'nothing confirmed past the refused event').toBe(true);
        } finally {
          await secure.revokeAll(principal);
          await secure.allow(principal, { topics: [topic, deadLetterTopic] }, [AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS]);
        }
      });
    });

    it('a wrong Postgres password: SOURCE_AUTHENTICATION', async () => {
      const { code, log } = await refused({ ...working(), ...passwordDatabaseEnv('not-the-password') });
      expect(code, log).toBe(1);
      expect(log).toMatch(/SOURCE_AUTHENTICATION.*28P01/);
      expect(log).not.toContain('not-the-password');
    });

    it("Postgres's certificate checked against the wrong CA: SOURCE_TLS", async () => {
      const env = working();
      const url = new URL(env.DATABASE_URL!);
      url.searchParams.set('sslrootcert', tls('rogue-ca.crt'));
      const { code, log } = await refused({ ...env, DATABASE_URL: url.toString() });
      expect(code, log).toBe(1);
      expect(log).toMatch(/SOURCE_TLS/);
    });

    it('a wrong registry password: ENCODE_REGISTRY_REFUSED at start', async () => {
      const env = {
        ...working(),
        OUTBOX_FORMAT: 'avro',
        OUTBOX_AUTO_REGISTER: 'true',
        // Subjects named by record are all known at start: the refusal comes before streaming.
        OUTBOX_SUBJECT_STRATEGY: 'record',
        SCHEMA_REGISTRY_URL: secure.env.schemaRegistryUrl,
        SCHEMA_REGISTRY_CA_FILE: tls('ca.crt'),
        SCHEMA_REGISTRY_USERNAME: secure.env.registryUser.username,
        SCHEMA_REGISTRY_PASSWORD: 'not-the-password',
      };
      const { code, log } = await refused(env);
      expect(code, log).toBe(1);
      expect(log).toMatch(/ENCODE_REGISTRY_REFUSED[\s\S]*answered 401/);
      expect(log).not.toContain('not-the-password');
    });
  });

});

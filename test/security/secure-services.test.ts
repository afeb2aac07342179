// vitest: runs alone (the secure stack's fixed ports, which relay-secured.test.ts starts too)
import { randomUUID } from 'node:crypto';
import { SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import type { Kafka } from 'kafkajs';
import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { useSecureStack } from '../harness/secure-stack.js';

/** A TLS alert's code: OpenSSL 3 (Node 24) names it ERR_SSL_SSL/TLS_ALERT_..., older ones SSLV3_ or TLSV1_. */
const TLS_ALERT = (alert: string) => new RegExp(`^ERR_SSL_(SSLV3|TLSV1|SSL/TLS)_ALERT_${alert}$`);

/**
 * The secure stack behaves as the relay's production connectivity needs it to, seen from Node
 * with the project's own client libraries: each path works with the right credentials and is
 * refused, with a recognisable error, without them. Checks of the services, not of the relay.
 */
const stack = useSecureStack();

/** Produces one record, as the relay's producer does (idempotent, one request in flight, acks=all). */
async function produceOne(kafka: Kafka, topic: string, { idempotent = true } = {}): Promise<void> {
  const producer = kafka.producer({ idempotent, maxInFlightRequests: 1 });
  await producer.connect();
  try {
    await producer.send({ topic, acks: -1, messages: [{ key: 'k', value: 'v' }] });
  } finally {
    await producer.disconnect();
  }
}

/** The error kafkajs throws, flattened: its name, protocol error type, message, and those of its cause. */
async function kafkaFailure(attempt: Promise<unknown>): Promise<string> {
  try {
    await attempt;
  } catch (error) {
    const e = error as { name?: string; type?: string; message?: string; cause?: { name?: string; type?: string; code?: string } };
    return [e.name, e.type, e.message, e.cause?.name, e.cause?.type, e.cause?.code].filter(Boolean).join(' | ');
  }
  throw new Error('expected the Kafka call to fail, but it succeeded');
}

async function pgQuery<T extends pg.QueryResultRow>(config: pg.ClientConfig, sql: string): Promise<T[]> {
  const client = new pg.Client(config);
  await client.connect();
  try {
    return (await client.query<T>(sql)).rows;
  } finally {
    await client.end();
  }
}

async function pgFailure(config: pg.ClientConfig): Promise<{ code?: string; message: string }> {
  const client = new pg.Client(config);
  // node-postgres also emits the failure as 'error'; the rejected connect() is what we check.
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (error) {
    const { code, message } = error as { code?: string; message: string };
    return { code, message };
  }
  await client.end();
  throw new Error('expected the Postgres connection to be refused, but it was accepted');
}

describe('secure stack: Kafka (SASL_SSL, mTLS, ACLs)', () => {
  const id = randomUUID().slice(0, 8);
  const granted = `secure-granted-${id}`;
  const forbidden = `secure-forbidden-${id}`;

  beforeAll(async () => {
    await stack.createTopics([granted, forbidden]);
    await stack.allow(`User:${stack.env.kafkaUser.username}`, { topics: [granted] });
    await stack.allow(stack.env.kafkaMtlsPrincipal, { topics: [granted] });
  });

  it('SCRAM-SHA-512 over TLS: the relay user produces where an ACL allows it, and gets TOPIC_AUTHORIZATION_FAILED where none does', async () => {
    const kafka = stack.kafka({ listener: 'sasl_ssl', sasl: stack.sasl('scram-sha-512') });
    await produceOne(kafka, granted);
    const offsets = await stack.asAdmin((admin) => admin.fetchTopicOffsets(granted));
    expect(Number(offsets[0]!.high)).toBeGreaterThanOrEqual(1);

    expect(await kafkaFailure(produceOne(kafka, forbidden))).toContain('TOPIC_AUTHORIZATION_FAILED');
  });

  it('SCRAM-SHA-256 and PLAIN authenticate the same user over TLS', async () => {
    await produceOne(stack.kafka({ listener: 'sasl_ssl', sasl: stack.sasl('scram-sha-256') }), granted);
    await produceOne(stack.kafka({ listener: 'sasl_ssl', sasl: stack.sasl('plain') }), granted);
  });

  it('a wrong password is a SASL authentication error, for SCRAM and PLAIN', async () => {
    const wrong = { username: stack.env.kafkaUser.username, password: 'not-the-password' };
    const scram = await kafkaFailure(produceOne(stack.kafka({ listener: 'sasl_ssl', sasl: stack.sasl('scram-sha-512', wrong) }), granted));
    expect(scram).toMatch(/KafkaJSSASLAuthenticationError \| SASL SCRAM SHA512 authentication failed: .*invalid credentials/);
    const plain = await kafkaFailure(produceOne(stack.kafka({ listener: 'sasl_ssl', sasl: stack.sasl('plain', wrong) }), granted));
    expect(plain).toMatch(/KafkaJSSASLAuthenticationError \| SASL PLAIN authentication failed: .*Invalid username or password/);
  });

  it('mTLS: the client certificate is the principal (User:relay_cert) and its ACLs apply', async () => {
    const kafka = stack.kafka({ listener: 'mtls', ssl: stack.tls({ cert: 'client.crt', key: 'client.key' }) });
    await produceOne(kafka, granted);
    expect(await kafkaFailure(produceOne(kafka, forbidden))).toContain('TOPIC_AUTHORIZATION_FAILED');
  });

  it('mTLS refuses a client without a certificate, with an expired one, or with one of another CA (TLS alert)', async () => {
    const attempt = (client?: { cert: string; key: string }) =>
      kafkaFailure(produceOne(stack.kafka({ listener: 'mtls', ssl: stack.tls(client), retries: 0 }), granted, { idempotent: false }));
    expect(await attempt()).toMatch(/Connection error: .*alert (bad certificate|certificate required)/);
    expect(await attempt({ cert: 'client-expired.crt', key: 'client-expired.key' })).toMatch(/Connection error: .*alert (certificate unknown|certificate expired|bad certificate)/);
    expect(await attempt({ cert: 'rogue-client.crt', key: 'rogue-client.key' })).toMatch(/Connection error: .*alert (certificate unknown|unknown ca|bad certificate)/);
  });

  it('OAUTHBEARER: an unsecured JWT with sub=relay authenticates as User:relay; a principal without ACLs cannot even start an idempotent producer', async () => {
    await produceOne(stack.kafka({ listener: 'sasl_ssl', sasl: stack.oauthbearer(stack.env.kafkaUser.username) }), granted);
    // InitProducerId needs IDEMPOTENT_WRITE on the cluster, implied by WRITE on any topic.
    const nobody = await kafkaFailure(produceOne(stack.kafka({ listener: 'sasl_ssl', sasl: stack.oauthbearer(`nobody-${id}`) }), granted));
    expect(nobody).toContain('CLUSTER_AUTHORIZATION_FAILED');
  });

  it('OAUTHBEARER: an expired token is refused, though kafkajs does not report it as an authentication error', async () => {
    // The broker answers a bad token with an error challenge (RFC 7628) that kafkajs 2.2.4 takes
    // for success; its next request then fails with ILLEGAL_SASL_STATE or a closed connection.
    const expired = await kafkaFailure(produceOne(stack.kafka({ listener: 'sasl_ssl', sasl: stack.oauthbearer(stack.env.kafkaUser.username, -60) }), granted, { idempotent: false }));
    expect(expired).toMatch(/ILLEGAL_SASL_STATE|Closed connection/);
  });

  it('clients verify the broker: trusting another CA fails the handshake, and the TLS port does not speak plaintext', async () => {
    const wrongCa = await kafkaFailure(produceOne(stack.kafka({ listener: 'sasl_ssl', sasl: stack.sasl(), ssl: stack.tls(undefined, 'rogue-ca.crt'), retries: 0 }), granted, { idempotent: false }));
    expect(wrongCa).toContain('UNABLE_TO_VERIFY_LEAF_SIGNATURE');
    const plaintext = await kafkaFailure(produceOne(stack.kafka({ listener: 'sasl_ssl', sasl: stack.sasl(), ssl: false, retries: 0 }), granted, { idempotent: false }));
    expect(plaintext).toMatch(/Closed connection/);
  });
});

describe('secure stack: Postgres (TLS only, verify-full)', () => {
  it('verify-full with the CA and a password: TLS 1.3, and wal_level is logical', async () => {
    const [row] = await pgQuery<{ user: string; ssl: boolean; version: string; wal_level: string }>(
      stack.pg('relay'),
      "SELECT current_user AS user, ssl, version, current_setting('wal_level') AS wal_level FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
    );
    expect(row).toEqual({ user: 'relay', ssl: true, version: 'TLSv1.3', wal_level: 'logical' });
  });

  it('verify-full with a client certificate and no password (cert auth, CN=relay_cert), as options or as a URL', async () => {
    const sql = 'SELECT current_user AS user, client_dn FROM pg_stat_ssl WHERE pid = pg_backend_pid()';
    expect(await pgQuery(stack.pg('relay_cert'), sql)).toEqual([{ user: 'relay_cert', client_dn: '/CN=relay_cert' }]);
    // sslmode=verify-full&sslrootcert=…&sslcert=…&sslkey=… (pg-connection-string reads the files)
    expect(await pgQuery({ connectionString: stack.env.databaseCertUrl }, sql)).toEqual([{ user: 'relay_cert', client_dn: '/CN=relay_cert' }]);
    expect(await pgQuery({ connectionString: stack.env.databaseUrl }, 'SELECT current_user AS user')).toEqual([{ user: 'relay' }]);
  });

  it('a connection without TLS is refused (no pg_hba.conf entry), also for replication', async () => {
    const plain = await pgFailure({ ...stack.pg('relay'), ssl: false });
    expect(plain).toEqual({ code: '28000', message: 'no pg_hba.conf entry for host "127.0.0.1", user "relay", database "outbox", no encryption' });
    const replication = await pgFailure({ ...stack.pg('relay', { replication: 'database' } as pg.ClientConfig), ssl: false });
    expect(replication.code).toBe('28000');
  });

  it('the certificate user is refused without a certificate, with an expired one, or with one of another CA', async () => {
    expect(await pgFailure({ ...stack.pg('relay_cert'), ssl: stack.tls() })).toEqual({ code: '28000', message: 'connection requires a valid client certificate' });
    expect((await pgFailure({ ...stack.pg('relay_cert'), ssl: stack.tls({ cert: 'client-expired.crt', key: 'client-expired.key' }) })).code).toMatch(TLS_ALERT('CERTIFICATE_EXPIRED'));
    expect((await pgFailure({ ...stack.pg('relay_cert'), ssl: stack.tls({ cert: 'rogue-client.crt', key: 'rogue-client.key' }) })).code).toMatch(TLS_ALERT('UNKNOWN_CA'));
  });

  it('a client trusting another CA refuses the server; a wrong password is 28P01', async () => {
    expect((await pgFailure({ ...stack.pg('relay'), ssl: stack.tls(undefined, 'rogue-ca.crt') })).code).toBe('SELF_SIGNED_CERT_IN_CHAIN');
    expect(await pgFailure({ ...stack.pg('relay'), password: 'not-the-password' })).toEqual({ code: '28P01', message: 'password authentication failed for user "relay"' });
  });

  it('replication connections over TLS: IDENTIFY_SYSTEM with the password, a temporary logical slot with the certificate', async () => {
    const [system] = await pgQuery<{ dbname: string }>(stack.pg('relay', { replication: 'database' } as pg.ClientConfig), 'IDENTIFY_SYSTEM');
    expect(system!.dbname).toBe('outbox');
    const slot = `secure_${randomUUID().replaceAll('-', '').slice(0, 8)}`;
    const [created] = await pgQuery<{ slot_name: string; output_plugin: string }>(
      stack.pg('relay_cert', { replication: 'database' } as pg.ClientConfig),
      `CREATE_REPLICATION_SLOT ${slot} TEMPORARY LOGICAL pgoutput`,
    );
    expect(created).toMatchObject({ slot_name: slot, output_plugin: 'pgoutput' });
  });
});

describe('secure stack: schema registry (HTTPS, basic auth)', () => {
  const schema = (name: string) => JSON.stringify({ type: 'record', name, namespace: 'outbox.secure', fields: [{ name: 'id', type: 'string' }] });
  const registry = (options: { auth?: { username: string; password: string }; ca?: string | null; host?: string }) =>
    new SchemaRegistry({
      host: options.host ?? stack.env.schemaRegistryUrl,
      retry: { retries: 0 },
      ...(options.auth ? { auth: options.auth } : {}),
      ...(options.ca === null ? {} : { agent: stack.registryAgent(options.ca ?? 'ca.crt') }),
    });
  const subject = `secure-${randomUUID().slice(0, 8)}-value`;

  it('with the CA and the relay user: registers an Avro schema and reads it back', async () => {
    const client = registry({ auth: stack.env.registryUser });
    const { id } = await client.register({ type: SchemaType.AVRO, schema: schema('Registered') }, { subject });
    expect(id).toBeGreaterThan(0);
    expect(await client.getLatestSchemaId(subject)).toBe(id);
  });

  it('without credentials or with a wrong password: 401; the read-only user: 403 on register, reads allowed', async () => {
    const register = (client: SchemaRegistry) => client.register({ type: SchemaType.AVRO, schema: schema('Refused') }, { subject });
    await expect(register(registry({}))).rejects.toMatchObject({ status: 401 });
    await expect(register(registry({ auth: { username: stack.env.registryUser.username, password: 'not-the-password' } }))).rejects.toMatchObject({ status: 401 });
    await expect(register(registry({ auth: stack.env.registryReader }))).rejects.toMatchObject({ status: 403 });
    expect(await registry({ auth: stack.env.registryReader }).getLatestSchemaId(subject)).toBeGreaterThan(0);
  });

  it('HTTPS only: the server is not trusted without the CA, and plain HTTP gets no answer', async () => {
    // The registry client reports transport errors as "status 400" with the cause in the message.
    await expect(registry({ auth: stack.env.registryUser, ca: null }).getLatestSchemaId(subject)).rejects.toThrow(/unable to verify the first certificate/);
    await expect(registry({ auth: stack.env.registryUser, ca: 'rogue-ca.crt' }).getLatestSchemaId(subject)).rejects.toThrow(/unable to verify the first certificate/);
    await expect(registry({ auth: stack.env.registryUser, ca: null, host: stack.env.schemaRegistryUrl.replace('https:', 'http:') }).getLatestSchemaId(subject)).rejects.toThrow(/socket hang up/);
  });
});

import { execFile, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Agent } from 'node:https';
import { join } from 'node:path';
import type { ConnectionOptions } from 'node:tls';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import kafkajs, { Kafka, logLevel, type AclEntry, type AclOperationTypes, type AclResourceTypes, type Admin, type SASLOptions } from 'kafkajs';
import type { ClientConfig } from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { waitForLeaders } from './kafka.js';

// kafkajs is CommonJS and Node's ESM loader does not see its enums as named exports.
const { AclPermissionTypes, AclResourceTypes: AclResource, ResourcePatternTypes } = kafkajs;
/** kafkajs's AclOperationTypes (WRITE, READ, DESCRIBE, ...), for `allow`. */
export const AclOperation = kafkajs.AclOperationTypes;

const run = promisify(execFile);
const STACK_SCRIPT = fileURLToPath(new URL('../../scripts/stack.sh', import.meta.url));
const SERVICES = ['secure_kafka', 'secure_pg', 'secure_registry'] as const;

export interface Credentials {
  readonly username: string;
  readonly password: string;
}

/** What `scripts/stack.sh env` prints about the secure stack (SECURE_*). */
export interface SecureEndpoints {
  /** SASL_SSL: SCRAM-SHA-512, SCRAM-SHA-256, PLAIN, OAUTHBEARER (unsecured JWS). */
  readonly kafkaSaslSslBrokers: readonly string[];
  /** SSL with a required client certificate. */
  readonly kafkaMtlsBrokers: readonly string[];
  /** Super user (SCRAM and PLAIN). */
  readonly kafkaAdmin: Credentials;
  /** No rights but those granted by ACLs (SCRAM and PLAIN; also OAUTHBEARER with sub=relay). */
  readonly kafkaUser: Credentials;
  /** The Kafka principal of client.crt on the mTLS listener, e.g. User:relay_cert. */
  readonly kafkaMtlsPrincipal: string;
  /** Properties file for Kafka's command-line tools (admin over SASL_SSL, SCRAM-SHA-512). */
  readonly kafkaAdminConfig: string;
  /** postgres://relay:…@…/outbox?sslmode=verify-full&sslrootcert=… */
  readonly databaseUrl: string;
  /** postgres://relay_cert@…/outbox?sslmode=verify-full&sslrootcert=…&sslcert=…&sslkey=… */
  readonly databaseCertUrl: string;
  /** The superuser, over TLS with a password: for setting up tables and publications. */
  readonly databaseAdminUrl: string;
  /** https://127.0.0.1:…/apis/ccompat/v7 */
  readonly schemaRegistryUrl: string;
  /** May register schemas (sr-developer). */
  readonly registryUser: Credentials;
  /** May only read (sr-readonly). */
  readonly registryReader: Credentials;
  /** PEM files: ca.crt, client.crt/.key, client-expired.crt/.key, rogue-ca.crt, rogue-client.crt/.key, ... */
  readonly tlsDir: string;
}

/**
 * The secure stack of the local stack (`scripts/stack.sh up secure`): Kafka with SASL_SSL, mTLS
 * and ACLs, Postgres with TLS only, the registry over HTTPS with basic auth, and a test CA. Like
 * the three-broker cluster it always comes from the stack script, whatever provides the other
 * services. Started for the test file unless already running, and stopped after it in that case
 * (OUTBOX_KEEP_STACK=true keeps it).
 */
export class SecureStack {
  private endpoints: SecureEndpoints | null = null;
  private startedHere = false;

  get env(): SecureEndpoints {
    if (!this.endpoints) throw new Error('the secure stack is not started (useSecureStack() starts it in beforeAll)');
    return this.endpoints;
  }

  async start(): Promise<void> {
    const status = spawnSync(STACK_SCRIPT, ['status'], { encoding: 'utf8' }).stdout.split('\n');
    const running = SERVICES.every((service) => status.some((line) => line.startsWith(`${service} `) && line.includes(' up ')));
    if (!running) {
      process.stdout.write('starting the secure stack (scripts/stack.sh up secure)\n');
      const started = spawnSync(STACK_SCRIPT, ['up', 'secure'], { stdio: 'inherit' });
      if (started.status !== 0) throw new Error(`could not start the secure stack with ${STACK_SCRIPT} up secure (exit ${started.status}); see .stack/logs/secure_*.log`);
      this.startedHere = true;
    }
    const { stdout } = await run(STACK_SCRIPT, ['env']);
    this.endpoints = parseEndpoints(stdout);
  }

  async stop(): Promise<void> {
    if (!this.startedHere || process.env.OUTBOX_KEEP_STACK === 'true') return;
    spawnSync(STACK_SCRIPT, ['down', 'secure'], { stdio: 'inherit' });
  }

  /** A PEM file of the stack's test PKI, e.g. pem('ca.crt'). */
  pem(name: string): string {
    return readFileSync(join(this.env.tlsDir, name), 'utf8');
  }

  /** TLS options that verify the broker against the stack's CA (and, given, present a client certificate). */
  tls(client?: { cert: string; key: string }, ca = 'ca.crt'): ConnectionOptions {
    return { ca: [this.pem(ca)], ...(client ? { cert: this.pem(client.cert), key: this.pem(client.key) } : {}) };
  }

  /**
   * A kafkajs client of the SASL_SSL listener (with `sasl`) or of the mTLS one; TLS verifies
   * the broker against the stack's CA unless `ssl` says otherwise (false: plaintext). Quick to
   * give up by default: the tests want the first error, not kafkajs's retries of it.
   */
  kafka(options: { listener: 'sasl_ssl' | 'mtls'; sasl?: SASLOptions; ssl?: ConnectionOptions | false; retries?: number; clientId?: string }): Kafka {
    const brokers = options.listener === 'mtls' ? this.env.kafkaMtlsBrokers : this.env.kafkaSaslSslBrokers;
    const ssl = options.ssl ?? this.tls();
    return new Kafka({
      clientId: options.clientId ?? 'outbox-relay-secure-tests',
      brokers: [...brokers],
      ...(ssl ? { ssl } : {}),
      ...(options.sasl ? { sasl: options.sasl } : {}),
      connectionTimeout: 5_000,
      retry: { retries: options.retries ?? 2, initialRetryTime: 100, maxRetryTime: 1_000 },
      logLevel: logLevel.NOTHING,
    });
  }

  /** SASL options for `user` (default: the relay user) with SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN. */
  sasl(mechanism: 'scram-sha-512' | 'scram-sha-256' | 'plain' = 'scram-sha-512', user: Credentials = this.env.kafkaUser): SASLOptions {
    return { mechanism, username: user.username, password: user.password };
  }

  /** OAUTHBEARER with an unsigned token whose principal is `sub` (what the broker's unsecured validator accepts). */
  oauthbearer(sub: string, lifetimeSeconds = 3_600): SASLOptions {
    return { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: unsecuredJws(sub, lifetimeSeconds) }) };
  }

  /** Runs `fn` with an admin client (super user, SCRAM-SHA-512 over TLS). */
  async asAdmin<T>(fn: (admin: Admin) => Promise<T>): Promise<T> {
    const admin = this.kafka({ listener: 'sasl_ssl', sasl: this.sasl('scram-sha-512', this.env.kafkaAdmin), retries: 5 }).admin();
    await admin.connect();
    try {
      return await fn(admin);
    } finally {
      await admin.disconnect();
    }
  }

  async createTopics(topics: readonly string[], partitions = 1): Promise<void> {
    await this.asAdmin(async (admin) => {
      await admin.createTopics({ topics: topics.map((topic) => ({ topic, numPartitions: partitions, replicationFactor: 1 })), waitForLeaders: false });
      await waitForLeaders(admin, topics);
    });
  }

  /**
   * ALLOW ACLs for `principal` (e.g. User:relay) on literal topics (and groups), and waits until
   * the broker's authorizer has them: the controller acknowledges an ACL before the broker
   * applies it.
   */
  async allow(principal: string, resources: { topics?: readonly string[]; groups?: readonly string[]; transactionalIds?: readonly string[] }, operations: readonly AclOperationTypes[] = [AclOperation.WRITE, AclOperation.DESCRIBE]): Promise<void> {
    const entries: AclEntry[] = [];
    const add = (resourceType: AclResourceTypes, names: readonly string[] = []) => {
      for (const resourceName of names) {
        for (const operation of operations) {
          entries.push({ resourceType, resourceName, resourcePatternType: ResourcePatternTypes.LITERAL, principal, host: '*', operation, permissionType: AclPermissionTypes.ALLOW });
        }
      }
    };
    add(AclResource.TOPIC, resources.topics);
    add(AclResource.GROUP, resources.groups);
    add(AclResource.TRANSACTIONAL_ID, resources.transactionalIds);
    await this.asAdmin(async (admin) => {
      await admin.createAcls({ acl: entries });
      const deadline = Date.now() + 10_000;
      for (;;) {
        const { resources: found } = await admin.describeAcls({
          resourceType: AclResource.ANY, resourcePatternType: ResourcePatternTypes.ANY, principal,
          operation: AclOperation.ANY, permissionType: AclPermissionTypes.ALLOW,
        });
        const have = new Set(found.flatMap((resource) => resource.acls.map((acl) => `${resource.resourceType}/${resource.resourceName}/${acl.operation}`)));
        if (entries.every((entry) => have.has(`${entry.resourceType}/${entry.resourceName}/${entry.operation}`))) return;
        if (Date.now() > deadline) throw new Error(`ACLs for ${principal} not in effect after 10 s`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    });
  }

  /** Removes every ACL of `principal`. */
  async revokeAll(principal: string): Promise<void> {
    await this.asAdmin((admin) => admin.deleteAcls({
      filters: [{ resourceType: AclResource.ANY, resourcePatternType: ResourcePatternTypes.ANY, principal, operation: AclOperation.ANY, permissionType: AclPermissionTypes.ANY }],
    }));
  }

  /**
   * node-postgres settings for sslmode=verify-full: the server's certificate must chain to the
   * stack's CA and name 127.0.0.1. `relay` logs in with its password, `relay_cert` with the
   * client certificate, `postgres` is the superuser.
   */
  pg(user: 'relay' | 'relay_cert' | 'postgres' = 'relay', extra: Partial<ClientConfig> = {}): ClientConfig {
    const url = new URL(user === 'relay' ? this.env.databaseUrl : user === 'relay_cert' ? this.env.databaseCertUrl : this.env.databaseAdminUrl);
    return {
      host: url.hostname,
      port: Number(url.port),
      database: url.pathname.slice(1),
      user: decodeURIComponent(url.username),
      ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
      ssl: { ...this.tls(user === 'relay_cert' ? { cert: 'client.crt', key: 'client.key' } : undefined), rejectUnauthorized: true },
      connectionTimeoutMillis: 5_000,
      ...extra,
    };
  }

  /** An https.Agent trusting the stack's CA (for @kafkajs/confluent-schema-registry's `agent`). */
  registryAgent(ca = 'ca.crt'): Agent {
    return new Agent({ ca: this.pem(ca), keepAlive: false });
  }
}

/** The secure stack, started before the file's tests and stopped after them. */
export function useSecureStack(): SecureStack {
  const stack = new SecureStack();
  beforeAll(() => stack.start());
  afterAll(() => stack.stop());
  return stack;
}

/**
 * An unsecured JWS (RFC 7515 with alg "none", empty signature) as Kafka's
 * OAuthBearerUnsecuredValidatorCallbackHandler expects it: `sub` is the principal, `exp` is
 * required. A negative lifetime makes an expired token.
 */
export function unsecuredJws(sub: string, lifetimeSeconds = 3_600): string {
  const now = Math.floor(Date.now() / 1000);
  const part = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
  return `${part({ alg: 'none' })}.${part({ sub, iat: Math.min(now, now + lifetimeSeconds - 1), exp: now + lifetimeSeconds })}.`;
}

function parseEndpoints(stdout: string): SecureEndpoints {
  const vars = new Map(
    stdout.split('\n').filter((line) => line.includes('=')).map((line) => {
      const [name, ...value] = line.replace(/^export /, '').split('=');
      return [name!.trim(), value.join('=').replace(/^'(.*)'$/, '$1')] as const;
    }),
  );
  const get = (name: string): string => {
    const value = vars.get(name);
    if (!value) throw new Error(`scripts/stack.sh env did not print ${name}`);
    return value;
  };
  return {
    kafkaSaslSslBrokers: get('SECURE_KAFKA_SASL_SSL_BROKERS').split(','),
    kafkaMtlsBrokers: get('SECURE_KAFKA_MTLS_BROKERS').split(','),
    kafkaAdmin: { username: get('SECURE_KAFKA_ADMIN_USER'), password: get('SECURE_KAFKA_ADMIN_PASSWORD') },
    kafkaUser: { username: get('SECURE_KAFKA_USER'), password: get('SECURE_KAFKA_PASSWORD') },
    kafkaMtlsPrincipal: get('SECURE_KAFKA_MTLS_PRINCIPAL'),
    kafkaAdminConfig: get('SECURE_KAFKA_ADMIN_CONFIG'),
    databaseUrl: get('SECURE_DATABASE_URL'),
    databaseCertUrl: get('SECURE_DATABASE_CERT_URL'),
    databaseAdminUrl: get('SECURE_DATABASE_ADMIN_URL'),
    schemaRegistryUrl: get('SECURE_SCHEMA_REGISTRY_URL'),
    registryUser: { username: get('SECURE_SCHEMA_REGISTRY_USER'), password: get('SECURE_SCHEMA_REGISTRY_PASSWORD') },
    registryReader: { username: get('SECURE_SCHEMA_REGISTRY_READER'), password: get('SECURE_SCHEMA_REGISTRY_READER_PASSWORD') },
    tlsDir: get('SECURE_TLS_DIR'),
  };
}

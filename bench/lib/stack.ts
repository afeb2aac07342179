import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { fileURLToPath } from 'node:url';
import kafkajs from 'kafkajs';
import { kafkaConfigFromEnv } from '../../src/client/connections.js';
import { OPTIONS } from '../../src/config/options.js';
import { KafkaTools } from './kafka.js';
import { TOPIC_ROOT } from './load.js';
import { progress, run, sleep } from './proc.js';

// kafkajs is CommonJS and Node's ESM loader does not see its enums as named exports.
const { AclOperationTypes: Operation, AclPermissionTypes, AclResourceTypes, ResourcePatternTypes } = kafkajs;

export const STACK_SCRIPT = fileURLToPath(new URL('../../scripts/stack.sh', import.meta.url));
const REPO = fileURLToPath(new URL('../..', import.meta.url));

/**
 * A bench on a stack of its own: `defaults` (OUTBOX_STACK_DIR and ports apart from the test
 * stack's) fill what the environment leaves unset, Postgres runs with fsync on unless
 * OUTBOX_PG_FSYNC=off (commits cost what they cost on a real disk; scripts/stack/pg.sh: off for
 * the tests), its brokers with the JVM's optimizing compiler (OUTBOX_KAFKA_FULL_JIT: the test
 * stack's brokers start quicker without it, a bench's run long enough for it to pay), the relay
 * (dist/, unless `buildRelay` is false: a bench given a build of its own leaves the shared
 * checkout's dist/ alone, which `npm run build` removes first) and the bench's child processes
 * (bench/tsconfig.json) are built, and `services` started. Returns the stack's variables.
 */
export async function upBenchStack(defaults: Readonly<Record<string, string>>, services: readonly string[], { buildRelay = true } = {}): Promise<Record<string, string>> {
  for (const [key, value] of Object.entries(defaults)) process.env[key] ??= value;
  process.env.OUTBOX_PG_FSYNC ??= 'on';
  process.env.OUTBOX_KAFKA_FULL_JIT ??= 'true';
  if (!['on', 'off'].includes(process.env.OUTBOX_PG_FSYNC)) throw new Error(`OUTBOX_PG_FSYNC=${process.env.OUTBOX_PG_FSYNC}: expected on or off`);
  progress(buildRelay ? 'building the relay (npm run build) and the bench processes' : 'building the bench processes (the relay: a build of its own)');
  if (buildRelay) await run('npm', ['run', 'build'], { cwd: REPO });
  await run(process.execPath, [join(REPO, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(REPO, 'bench', 'tsconfig.json')], { cwd: REPO });
  progress(`starting the stack (${services.join(', ')}) in ${process.env.OUTBOX_STACK_DIR}`);
  await run(STACK_SCRIPT, ['up', ...services], { cwd: REPO });
  return stackEnv();
}

/** `scripts/stack.sh env` as a record (the secure stack's values come in single quotes). */
export async function stackEnv(): Promise<Record<string, string>> {
  const lines = (await run(STACK_SCRIPT, ['env'])).trim().split('\n');
  return Object.fromEntries(lines.map((line) => line.split(/=(.*)/s, 2)).map(([name, value]) => [name!, value!.replace(/^'(.*)'$/s, '$1')]));
}

/** What the relay's user needs on its topics (README: Security, Kafka ACLs). */
const RELAY_OPERATIONS = [Operation.WRITE, Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS];

/**
 * The secured broker of the stack (`scripts/stack.sh up secure_kafka`, scripts/stack/secure.sh):
 * one KRaft node like the plain one, with clients on SASL_SSL only and ACLs enforced. `up` starts
 * it unless it runs and grants the relay's user its ACLs on the bench's topics; `down` removes
 * them and stops the broker again if `up` started it (removes it if `up` created it).
 */
export class SecureKafka {
  private constructor(
    /** The relay's variables: SASL_SSL to the broker (the stack's CA), SCRAM-SHA-512 as the ACL-bound user. */
    readonly relayEnv: Record<string, string>,
    /** The same connection as the super user, for the bench's topics, ACLs and counts. */
    readonly kafka: KafkaTools,
    /** TLS version and cipher suite a Node client negotiates with the broker, e.g. "TLSv1.3 TLS_AES_256_GCM_SHA384". */
    readonly tls: string,
    private readonly principal: string,
    private readonly restore: 'stop' | 'down' | null,
  ) {}

  static async up(stackDir: string): Promise<SecureKafka> {
    const status = spawnSync(STACK_SCRIPT, ['status'], { encoding: 'utf8' }).stdout;
    const running = status.split('\n').some((line) => /^secure_kafka\s+up\s/.test(line));
    // secure.sh keeps the broker's state in $OUTBOX_STACK_DIR/secure/kafka (secure_kafka_dir).
    const existed = existsSync(join(stackDir, 'secure', 'kafka'));
    const restore = running ? null : existed ? 'stop' : 'down';
    if (running) progress('the secured broker (secure_kafka) is already running: using it, leaving it up');
    else {
      progress(`starting the secured broker (scripts/stack.sh up secure_kafka); the bench will ${restore} it afterwards`);
      await run(STACK_SCRIPT, ['up', 'secure_kafka']);
    }
    try {
      const env = await stackEnv();
      const connection = (username: string, password: string): Record<string, string> => ({
        [OPTIONS.kafkaBrokers.env]: env.SECURE_KAFKA_SASL_SSL_BROKERS!,
        [OPTIONS.kafkaSsl.env]: 'true',
        [OPTIONS.kafkaSslCaFile.env]: env.SECURE_TLS_CA!,
        [OPTIONS.kafkaSaslMechanism.env]: 'scram-sha-512',
        [OPTIONS.kafkaSaslUsername.env]: username,
        [OPTIONS.kafkaSaslPassword.env]: password,
      });
      const kafka = new KafkaTools(kafkaConfigFromEnv(connection(env.SECURE_KAFKA_ADMIN_USER!, env.SECURE_KAFKA_ADMIN_PASSWORD!)));
      const tls = await tlsSession(env.SECURE_KAFKA_SASL_SSL_BROKERS!.split(',')[0]!, env.SECURE_TLS_CA!);
      const secure = new SecureKafka(connection(env.SECURE_KAFKA_USER!, env.SECURE_KAFKA_PASSWORD!), kafka, tls, `User:${env.SECURE_KAFKA_USER}`, restore);
      await secure.grant();
      return secure;
    } catch (error) {
      if (restore) await run(STACK_SCRIPT, [restore, 'secure_kafka']);
      throw error;
    }
  }

  async down(): Promise<void> {
    const admin = await this.kafka.connected();
    await admin.deleteAcls({ filters: [{ ...this.acl(), operation: Operation.ANY }] }).catch((error: Error) => progress(`could not remove the bench's ACLs of ${this.principal}: ${error.message}`));
    await this.kafka.close();
    if (this.restore) {
      progress(`${this.restore === 'stop' ? 'stopping' : 'removing'} the secured broker again (scripts/stack.sh ${this.restore} secure_kafka)`);
      await run(STACK_SCRIPT, [this.restore, 'secure_kafka']);
    }
  }

  /** ALLOW for the relay's user on every topic starting with TOPIC_ROOT. */
  private acl() {
    return { resourceType: AclResourceTypes.TOPIC, resourceName: TOPIC_ROOT, resourcePatternType: ResourcePatternTypes.PREFIXED, principal: this.principal, host: '*', permissionType: AclPermissionTypes.ALLOW };
  }

  /** Grants the ACLs and waits until the broker has them (the controller acknowledges them first). */
  private async grant(): Promise<void> {
    const admin = await this.kafka.connected();
    await admin.createAcls({ acl: RELAY_OPERATIONS.map((operation) => ({ ...this.acl(), operation })) });
    const deadline = Date.now() + 10_000;
    for (;;) {
      const { resources } = await admin.describeAcls({ ...this.acl(), operation: Operation.ANY });
      const granted = resources.flatMap((resource) => resource.acls.map((acl) => acl.operation));
      if (RELAY_OPERATIONS.every((operation) => granted.includes(operation))) return;
      if (Date.now() > deadline) throw new Error(`the ACLs of ${this.principal} on ${TOPIC_ROOT}* were not in effect after 10 s`);
      await sleep(100);
    }
  }
}

/** Connects as the relay's kafkajs does (Node's TLS defaults, the CA) and says what was negotiated. */
function tlsSession(broker: string, caFile: string): Promise<string> {
  const [host, port] = broker.split(':');
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port: Number(port), ca: readFileSync(caFile) }, () => {
      resolve(`${socket.getProtocol() ?? '?'} ${socket.getCipher().standardName}`);
      socket.end();
    });
    socket.once('error', reject);
  });
}

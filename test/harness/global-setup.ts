import { execFile, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { TestProject } from 'vitest/node';
import type { ServiceEndpoints } from './services.js';
import { startContainers } from './containers.js';
import type { KafkaClientName } from '../../src/kafka/ports.js';
import { chooseTestKafkaClients } from './kafka-clients.js';

const run = promisify(execFile);
const STACK_SCRIPT = fileURLToPath(new URL('../../scripts/stack.sh', import.meta.url));

/** Majors the stack serves besides its own 15 (scripts/stack/pg-embedded.sh: pg14 ... pg18). */
const OTHER_POSTGRES = ['14', '16', '17', '18'];

/**
 * Finds the services, in this order: connection settings in the environment; else
 * testcontainers when a Docker engine answers; else the local stack (scripts/stack.sh),
 * started for the run and stopped after — unless it was already running, then left as found.
 * Nothing is skipped for want of a service: if none can be had, the run fails saying how.
 *
 * OUTBOX_TEST_POSTGRES=<major> (the version matrix, scripts/test-postgres-versions.sh): the
 * local stack, with that major's server (`scripts/stack.sh up pg<major>`) as the Postgres;
 * 15 is the stack's own.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // Both integration projects (vitest.config.ts) run this setup in the same process: the services
  // are found or started once, and stopped once, after the last project's files.
  const shared = globalThis as { [SHARED]?: SharedServices };
  // The clients first: a run that names one that does not load stops before any service starts.
  const services = (shared[SHARED] ??= { kafkaClients: chooseTestKafkaClients(), ready: findServices(), users: 0 });
  services.users += 1;
  const { endpoints, stop } = await services.ready;
  provide(project, endpoints);
  project.provide('kafkaClients', services.kafkaClients);
  return async () => {
    services.users -= 1;
    if (services.users > 0) return;
    delete shared[SHARED];
    await stop();
  };
}

const SHARED = Symbol.for('outbox-relay.integration-services');

/** The services of the run, and how to stop what was started for it. */
interface RunServices {
  readonly endpoints: ServiceEndpoints;
  readonly stop: () => Promise<void>;
}

interface SharedServices {
  readonly kafkaClients: readonly KafkaClientName[];
  readonly ready: Promise<RunServices>;
  users: number;
}

async function findServices(): Promise<RunServices> {
  const env = process.env;
  const postgres = testPostgres();
  if (postgres !== 'pg') return useLocalStack(postgres);
  if (env.DATABASE_URL && env.KAFKA_BROKERS && env.SCHEMA_REGISTRY_URL) {
    const endpoints: ServiceEndpoints = {
      databaseUrl: env.DATABASE_URL,
      kafkaBrokers: env.KAFKA_BROKERS,
      schemaRegistryUrl: env.SCHEMA_REGISTRY_URL,
      control: { kind: 'none', reason: 'services come from DATABASE_URL, KAFKA_BROKERS and SCHEMA_REGISTRY_URL' },
    };
    return { endpoints, stop: async () => undefined };
  }
  if (dockerAnswers()) return startContainers();
  return useLocalStack();
}

function provide(project: TestProject, endpoints: ServiceEndpoints): void {
  process.stdout.write(`integration services: postgres ${endpoints.databaseUrl}, kafka ${endpoints.kafkaBrokers}, registry ${endpoints.schemaRegistryUrl} (control: ${endpoints.control.kind})\n`);
  project.provide('services', endpoints);
}

function dockerAnswers(): boolean {
  if (process.env.OUTBOX_TEST_DOCKER === 'false') return false;
  const probe = spawnSync('docker', ['info', '--format', '{{.ServerVersion}}'], { timeout: 5_000, stdio: 'ignore' });
  return probe.status === 0;
}

/**
 * The stack's service that is the run's Postgres: `pg` (15), or `pg<major>` for
 * OUTBOX_TEST_POSTGRES's. Those come from the stack script only: services given in the
 * environment would be of a version nobody chose.
 */
function testPostgres(): string {
  const major = process.env.OUTBOX_TEST_POSTGRES;
  if (major === undefined || major === '' || major === '15') return 'pg';
  if (!OTHER_POSTGRES.includes(major)) throw new Error(`OUTBOX_TEST_POSTGRES=${major}: expected one of 15 (the stack's own), ${OTHER_POSTGRES.join(', ')}`);
  if (process.env.DATABASE_URL) throw new Error(`OUTBOX_TEST_POSTGRES=${major} runs on the local stack's Postgres ${major} (scripts/stack.sh up pg${major}): unset DATABASE_URL, KAFKA_BROKERS and SCHEMA_REGISTRY_URL`);
  return `pg${major}`;
}

async function useLocalStack(postgres = 'pg'): Promise<RunServices> {
  const alreadyUp = spawnSync(STACK_SCRIPT, ['status'], { stdio: 'ignore' }).status === 0;
  if (!alreadyUp) {
    process.stdout.write('starting the local stack (scripts/stack.sh up): Postgres, Kafka, schema registry\n');
    stackUp([]);
  }
  const postgresUp = postgres === 'pg' || serviceRunning(postgres);
  if (!postgresUp) {
    process.stdout.write(`starting Postgres ${postgres.slice(2)} (scripts/stack.sh up ${postgres})\n`);
    stackUp([postgres], alreadyUp ? [postgres] : []);
  }
  const { stdout } = await run(STACK_SCRIPT, ['env']);
  const vars = Object.fromEntries(
    stdout.split('\n').filter((line) => line.includes('=')).map((line) => {
      const [name, ...value] = line.replace(/^export /, '').split('=');
      return [name!.trim(), value.join('=').replace(/^['"]|['"]$/g, '')];
    }),
  );
  const endpoints: ServiceEndpoints = {
    databaseUrl: required(vars, postgres === 'pg' ? 'DATABASE_URL' : `${postgres.toUpperCase()}_DATABASE_URL`),
    kafkaBrokers: required(vars, 'KAFKA_BROKERS'),
    schemaRegistryUrl: required(vars, 'SCHEMA_REGISTRY_URL'),
    control: { kind: 'stack', script: STACK_SCRIPT, stackDir: required(vars, 'OUTBOX_STACK_DIR'), postgres },
  };
  const stop = async () => {
    if (process.env.OUTBOX_KEEP_STACK === 'true') return;
    if (!alreadyUp) spawnSync(STACK_SCRIPT, ['down'], { stdio: 'inherit' });
    else if (!postgresUp) spawnSync(STACK_SCRIPT, ['down', postgres], { stdio: 'inherit' });
  };
  return { endpoints, stop };
}

/**
 * `scripts/stack.sh up SERVICES`; on failure takes down what it started (`undo`, or the whole
 * stack), which would otherwise outlive the run and hold its ports for the next one.
 */
function stackUp(services: string[], undo: string[] = []): void {
  const started = spawnSync(STACK_SCRIPT, ['up', ...services], { stdio: 'inherit' });
  if (started.status === 0) return;
  spawnSync(STACK_SCRIPT, ['down', ...undo], { stdio: 'inherit' });
  const own = services.length === 0 ? ', or set DATABASE_URL, KAFKA_BROKERS and SCHEMA_REGISTRY_URL to services you run' : '';
  throw new Error(`could not start the local services with ${STACK_SCRIPT} up ${services.join(' ')} (exit ${started.status}); see .stack/logs/${own}`);
}

function serviceRunning(service: string): boolean {
  const status = spawnSync(STACK_SCRIPT, ['status'], { encoding: 'utf8' }).stdout.split('\n');
  return status.some((line) => line.startsWith(`${service} `) && line.includes(' up '));
}

function required(vars: Record<string, string>, name: string): string {
  const value = vars[name];
  if (!value) throw new Error(`scripts/stack.sh env did not print ${name}`);
  return value;
}

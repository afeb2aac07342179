import { execFile, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { TestProject } from 'vitest/node';
import type { ServiceEndpoints } from './services.js';
import { startContainers } from './containers.js';

const run = promisify(execFile);
const STACK_SCRIPT = fileURLToPath(new URL('../../scripts/stack.sh', import.meta.url));

/**
 * Finds the services, in this order: connection settings in the environment; else
 * testcontainers when a Docker engine answers; else the local stack (scripts/stack.sh),
 * started for the run and stopped after — unless it was already running, then left as found.
 * Nothing is skipped for want of a service: if none can be had, the run fails saying how.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  requireLibrdkafka();
  const env = process.env;
  if (env.DATABASE_URL && env.KAFKA_BROKERS && env.SCHEMA_REGISTRY_URL) {
    provide(project, {
      databaseUrl: env.DATABASE_URL,
      kafkaBrokers: env.KAFKA_BROKERS,
      schemaRegistryUrl: env.SCHEMA_REGISTRY_URL,
      control: { kind: 'none', reason: 'services come from DATABASE_URL, KAFKA_BROKERS and SCHEMA_REGISTRY_URL' },
    });
    return async () => undefined;
  }
  if (dockerAnswers()) {
    const containers = await startContainers();
    provide(project, containers.endpoints);
    return containers.stop;
  }
  return useLocalStack(project);
}

/**
 * The guarantee suites run on both Kafka clients: without the librdkafka binding built, half of
 * them would fail one by one with the same SINK_CLIENT. Said once, with the fix, instead.
 */
function requireLibrdkafka(): void {
  try {
    createRequire(import.meta.url)('@confluentinc/kafka-javascript');
  } catch (error) {
    throw new Error(`the librdkafka client (@confluentinc/kafka-javascript) does not load: ${(error as Error).message.split('\n')[0]}; the tests run every guarantee suite on it too: build it with scripts/librdkafka.sh (npm ci runs it, and says why when it cannot)`);
  }
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

async function useLocalStack(project: TestProject): Promise<() => Promise<void>> {
  const alreadyUp = spawnSync(STACK_SCRIPT, ['status'], { stdio: 'ignore' }).status === 0;
  if (!alreadyUp) {
    process.stdout.write('starting the local stack (scripts/stack.sh up): Postgres, Kafka, schema registry\n');
    const started = spawnSync(STACK_SCRIPT, ['up'], { stdio: 'inherit' });
    if (started.status !== 0) {
      // What did start would outlive the run and hold its ports for the next one.
      spawnSync(STACK_SCRIPT, ['down'], { stdio: 'inherit' });
      throw new Error(`could not start the local services with ${STACK_SCRIPT} up (exit ${started.status}); see .stack/logs/, or set DATABASE_URL, KAFKA_BROKERS and SCHEMA_REGISTRY_URL to services you run`);
    }
  }
  const { stdout } = await run(STACK_SCRIPT, ['env']);
  const vars = Object.fromEntries(
    stdout.split('\n').filter((line) => line.includes('=')).map((line) => {
      const [name, ...value] = line.replace(/^export /, '').split('=');
      return [name!.trim(), value.join('=').replace(/^['"]|['"]$/g, '')];
    }),
  );
  provide(project, {
    databaseUrl: required(vars, 'DATABASE_URL'),
    kafkaBrokers: required(vars, 'KAFKA_BROKERS'),
    schemaRegistryUrl: required(vars, 'SCHEMA_REGISTRY_URL'),
    control: { kind: 'stack', script: STACK_SCRIPT, stackDir: required(vars, 'OUTBOX_STACK_DIR') },
  });
  return async () => {
    if (alreadyUp || process.env.OUTBOX_KEEP_STACK === 'true') return;
    spawnSync(STACK_SCRIPT, ['down'], { stdio: 'inherit' });
  };
}

function required(vars: Record<string, string>, name: string): string {
  const value = vars[name];
  if (!value) throw new Error(`scripts/stack.sh env did not print ${name}`);
  return value;
}

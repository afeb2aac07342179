import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

export interface DemoServices {
  readonly databaseUrl: string;
  readonly kafkaBrokers: string;
  readonly schemaRegistryUrl: string;
}

const STACK_SCRIPT = fileURLToPath(new URL('../../scripts/stack.sh', import.meta.url));

/**
 * DATABASE_URL, KAFKA_BROKERS and SCHEMA_REGISTRY_URL from the environment; else what the local
 * stack (`scripts/stack.sh env`) prints. Fails saying how to start it.
 */
export async function demoServices(env: NodeJS.ProcessEnv = process.env): Promise<DemoServices> {
  if (env.DATABASE_URL && env.KAFKA_BROKERS && env.SCHEMA_REGISTRY_URL) {
    return { databaseUrl: env.DATABASE_URL, kafkaBrokers: env.KAFKA_BROKERS, schemaRegistryUrl: env.SCHEMA_REGISTRY_URL };
  }
  let stdout: string;
  try {
    await promisify(execFile)(STACK_SCRIPT, ['status']);
    ({ stdout } = await promisify(execFile)(STACK_SCRIPT, ['env']));
  } catch {
    throw new Error('the local services are not running: start them with `npm run stack up` (or set DATABASE_URL, KAFKA_BROKERS and SCHEMA_REGISTRY_URL)');
  }
  const vars = new Map(
    stdout.split('\n').filter((line) => line.includes('=')).map((line) => {
      const [name, ...value] = line.replace(/^export /, '').split('=');
      return [name!.trim(), value.join('=').replace(/^['"]|['"]$/g, '')] as const;
    }),
  );
  const get = (name: string) => {
    const value = vars.get(name);
    if (!value) throw new Error(`${STACK_SCRIPT} env did not print ${name}`);
    return value;
  };
  return { databaseUrl: get('DATABASE_URL'), kafkaBrokers: get('KAFKA_BROKERS'), schemaRegistryUrl: get('SCHEMA_REGISTRY_URL') };
}

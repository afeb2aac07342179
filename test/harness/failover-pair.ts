import { execFile, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll } from 'vitest';

const run = promisify(execFile);
const STACK_SCRIPT = fileURLToPath(new URL('../../scripts/stack.sh', import.meta.url));

export type FailoverNode = 'pg17_primary' | 'pg17_standby';

/**
 * The Postgres 17 failover pair of the local stack (`scripts/stack.sh up failover`: a primary
 * and a physical standby synchronizing its failover slots). It always comes from the stack
 * script, whatever provides the other services: the test kills the primary and promotes the
 * standby, after which the pair is spent, so it is made afresh for the test file and removed
 * after it (OUTBOX_KEEP_STACK=true keeps it for a look).
 */
export class FailoverPair {
  /** Both hosts, primary first, as the relay takes them. */
  databaseUrl = '';
  primaryUrl = '';
  standbyUrl = '';

  async start(): Promise<void> {
    spawnSync(STACK_SCRIPT, ['down', 'failover'], { stdio: 'inherit' });
    process.stdout.write('starting the Postgres 17 failover pair (scripts/stack.sh up failover)\n');
    const started = spawnSync(STACK_SCRIPT, ['up', 'failover'], { stdio: 'inherit' });
    if (started.status !== 0) throw new Error(`could not start the failover pair with ${STACK_SCRIPT} up failover (exit ${started.status}); see .stack/logs/pg17_*.log`);
    const { stdout } = await run(STACK_SCRIPT, ['env']);
    const value = (name: string) => {
      const line = stdout.split('\n').find((entry) => entry.startsWith(`${name}=`));
      if (!line) throw new Error(`scripts/stack.sh env did not print ${name}`);
      return line.slice(name.length + 1).replace(/^'|'$/g, '');
    };
    this.databaseUrl = value('FAILOVER_DATABASE_URL');
    this.primaryUrl = value('FAILOVER_PRIMARY_URL');
    this.standbyUrl = value('FAILOVER_STANDBY_URL');
  }

  async stop(): Promise<void> {
    if (process.env.OUTBOX_KEEP_STACK === 'true') return;
    spawnSync(STACK_SCRIPT, ['down', 'failover'], { stdio: 'inherit' });
  }

  /** kill -9 (the server dies), stop (a clean shutdown) or start a node. */
  async node(action: 'kill' | 'stop' | 'start', node: FailoverNode): Promise<void> {
    await run(STACK_SCRIPT, [action, node], { timeout: 180_000 });
  }

  /** Promotes the standby; resolves once it is a primary. */
  async promote(): Promise<void> {
    await run(STACK_SCRIPT, ['promote', 'pg17_standby'], { timeout: 120_000 });
  }
}

/** The pair, made before the file's tests and removed after them. */
export function useFailoverPair(): FailoverPair {
  const pair = new FailoverPair();
  beforeAll(() => pair.start());
  afterAll(() => pair.stop());
  return pair;
}

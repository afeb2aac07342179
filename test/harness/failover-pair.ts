import { execFile, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll } from 'vitest';

const run = promisify(execFile);
const STACK_SCRIPT = fileURLToPath(new URL('../../scripts/stack.sh', import.meta.url));

/** The majors the pair runs: failover slots are 17+; on 16 the standby is a plain physical one. */
export type FailoverMajor = 16 | 17 | 18;
export type FailoverNode = 'primary' | 'standby';

/**
 * The failover pair of the local stack (`scripts/stack.sh up failover`: a primary and a
 * physical standby, on 17+ synchronizing its failover slots), of one major. It always comes
 * from the stack script, whatever provides the other services: a test kills the primary and
 * promotes the standby, after which the pair is spent, so it is made afresh for the test file
 * and removed after it (OUTBOX_KEEP_STACK=true keeps it for a look).
 */
export class FailoverPair {
  /** Both hosts, primary first, as the relay takes them. */
  databaseUrl = '';
  primaryUrl = '';
  standbyUrl = '';

  readonly major: number;

  constructor(major: FailoverMajor = 17) {
    this.major = major;
  }

  async start(): Promise<void> {
    spawnSync(STACK_SCRIPT, ['down', 'failover'], { stdio: 'inherit' });
    process.stdout.write(`starting the Postgres ${this.major} failover pair (scripts/stack.sh up failover)\n`);
    const started = spawnSync(STACK_SCRIPT, ['up', 'failover'], { stdio: 'inherit', env: { ...process.env, OUTBOX_FAILOVER_POSTGRES: String(this.major) } });
    if (started.status !== 0) throw new Error(`could not start the Postgres ${this.major} failover pair with ${STACK_SCRIPT} up failover (exit ${started.status}); see .stack/logs/failover_*.log`);
    const { stdout } = await run(STACK_SCRIPT, ['env']);
    const value = (name: string) => {
      const line = stdout.split('\n').find((entry) => entry.startsWith(`${name}=`));
      if (!line) throw new Error(`scripts/stack.sh env did not print ${name}`);
      return line.slice(name.length + 1).replace(/^'|'$/g, '');
    };
    if (value('FAILOVER_POSTGRES') !== String(this.major)) throw new Error(`scripts/stack.sh made a Postgres ${value('FAILOVER_POSTGRES')} failover pair, not ${this.major}`);
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
    await run(STACK_SCRIPT, [action, `failover_${node}`], { timeout: 180_000 });
  }

  /** Promotes the standby; resolves once it is a primary. */
  async promote(): Promise<void> {
    await run(STACK_SCRIPT, ['promote', 'failover_standby'], { timeout: 120_000 });
  }
}

/** The pair (Postgres 17 unless told), made before the file's tests and removed after them. */
export function useFailoverPair(major: FailoverMajor = 17): FailoverPair {
  const pair = new FailoverPair(major);
  beforeAll(() => pair.start());
  afterAll(() => pair.stop());
  return pair;
}

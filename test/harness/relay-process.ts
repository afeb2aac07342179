import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll } from 'vitest';
import { fileURLToPath } from 'node:url';

// OUTBOX_TEST_CLI: a build of one's own (a dist made beside dist/), which others' builds of the shared checkout do not replace mid-run.
const CLI = process.env.OUTBOX_TEST_CLI ?? fileURLToPath(new URL('../../dist/cli.js', import.meta.url));

export interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly [field: string]: unknown;
}

/**
 * Every child a RelayProcess of this test file started that has not exited. Killed after the
 * file's own hooks (registered first, so it runs last): a test or hook that failed before
 * stopping its processes (an assertion, a service that would not start) leaves none running to
 * retry a stopped stack for the rest of the run.
 */
const running = new Set<ChildProcess>();
afterAll(async () => {
  const left = [...running];
  for (const child of left) child.kill('SIGKILL');
  await Promise.all(left.map((child) => new Promise((resolve) => (running.has(child) ? child.once('exit', resolve) : resolve(undefined)))));
});

/**
 * The relay as a real process (`node dist/cli.js run`, or the `prune` loop), so tests can SIGTERM it and kill -9
 * it. Its JSON log lines are parsed and kept for assertions and for the failure message.
 */
export class RelayProcess {
  readonly logs: LogLine[] = [];
  readonly raw: string[] = [];
  private child: ChildProcess | null = null;
  private exit: Promise<number | null> = Promise.resolve(null);
  private exited = false;

  constructor(
    private readonly env: Record<string, string>,
    private readonly args: readonly string[] = [],
    private readonly command: 'run' | 'prune' | 'recover' | 'cutover' | 'webhooks' = 'run',
  ) {}

  start(): this {
    const child = spawn(process.execPath, [CLI, this.command, ...this.args], {
      env: { PATH: process.env.PATH ?? '', ...this.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    running.add(child);
    this.exit = new Promise((resolve) =>
      child.once('exit', (code) => {
        running.delete(child);
        this.exited = true;
        resolve(code);
      }),
    );
    let pending = '';
    const onData = (chunk: Buffer) => {
      pending += chunk.toString('utf8');
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) this.record(line);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    return this;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Started and not exited (a sidecar that must stay up through a failover). */
  get alive(): boolean {
    return this.child !== null && !this.exited;
  }

  async waitForLog(pattern: RegExp, timeoutMs = 60_000): Promise<LogLine> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.logs.find((line) => pattern.test(line.msg));
      if (found) return found;
      if (this.exited) throw new Error(`relay exited before logging ${pattern}; last lines:\n${this.tail()}`);
      if (Date.now() > deadline) throw new Error(`relay did not log ${pattern} within ${timeoutMs}ms; last lines:\n${this.tail()}`);
      await delay(50);
    }
  }

  async waitActive(timeoutMs = 60_000): Promise<void> {
    await this.waitForLog(/^active:/, timeoutMs);
  }

  /** SIGTERM and wait for the exit code. */
  async stop(timeoutMs = 60_000): Promise<number | null> {
    this.child?.kill('SIGTERM');
    return this.waitExit(timeoutMs);
  }

  async kill9(): Promise<void> {
    this.child?.kill('SIGKILL');
    await this.exit;
  }

  async waitExit(timeoutMs = 60_000): Promise<number | null> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`relay did not exit within ${timeoutMs}ms; last lines:\n${this.tail()}`)), timeoutMs)));
    try {
      return await Promise.race([this.exit, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  tail(lines = 30): string {
    return this.raw.slice(-lines).join('\n');
  }

  private record(line: string): void {
    if (line.trim() === '') return;
    this.raw.push(line);
    try {
      this.logs.push(JSON.parse(line) as LogLine);
    } catch {
      this.logs.push({ level: 50, msg: line });
    }
  }
}

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls until `check` returns a value other than undefined, or fails with `what`. */
export async function eventually<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 60_000, everyMs = 200): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await delay(everyMs);
  }
}

import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';

/** Linux clock ticks per second for /proc/<pid>/stat (USER_HZ, 100 on every mainstream arch). */
const CLOCK_TICKS = 100;

export interface ProcessUsage {
  /** Peak resident set (VmHWM), MB. */
  readonly peakRssMb: number;
  /** User + system CPU seconds since the process started. */
  readonly cpuSeconds: number;
}

/** Reads peak RSS and CPU time of a live process from /proc; null once it is gone. */
export function processUsage(pid: number): ProcessUsage | null {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const hwm = /^VmHWM:\s+(\d+)\s+kB/m.exec(status);
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which is in parentheses and may contain spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    return { peakRssMb: hwm ? Number(hwm[1]) / 1024 : NaN, cpuSeconds: (utime + stime) / CLOCK_TICKS };
  } catch {
    return null;
  }
}

/** The machine, as the reports head their figures with. */
export function machineDescription(): string {
  return `${cpus().length} × ${cpus()[0]?.model.trim() ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
}

/** Jiffies of the whole machine (all cores) from /proc/stat: busy and total. */
export function machineCpu(): { busy: number; total: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = fields.reduce((a, b) => a + b, 0);
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
  return { busy: total - idle, total };
}

/** Share of all cores that were busy (anything, not only the bench) since `since`. */
export function machineBusyPercent(since: { busy: number; total: number }): number {
  const now = machineCpu();
  return now.total > since.total ? (100 * (now.busy - since.busy)) / (now.total - since.total) : NaN;
}

/** A long-running contender process whose output goes to a log buffer (kept for failures). */
export class Child {
  readonly output: string[] = [];
  readonly process: ChildProcess;
  readonly exited: Promise<number | null>;
  private done = false;
  /** How it ended, e.g. "exit code 1" or "signal SIGKILL" (null while it runs). */
  ended: string | null = null;

  constructor(readonly name: string, command: string, args: readonly string[], env: Record<string, string | undefined>, cwd?: string) {
    this.process = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], cwd });
    this.exited = new Promise((resolve) =>
      this.process.once('exit', (code, signal) => {
        this.done = true;
        this.ended = signal ? `signal ${signal}` : `exit code ${code}`;
        resolve(code);
      }),
    );
    const keep = (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim() !== '') this.output.push(line);
      if (this.output.length > 2_000) this.output.splice(0, this.output.length - 1_000);
    };
    this.process.stdout!.on('data', keep);
    this.process.stderr!.on('data', keep);
  }

  get pid(): number {
    return this.process.pid!;
  }

  get running(): boolean {
    return !this.done;
  }

  usage(): ProcessUsage | null {
    return processUsage(this.pid);
  }

  tail(lines = 25): string {
    return this.output.slice(-lines).join('\n');
  }

  async waitFor(pattern: RegExp, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.output.some((line) => pattern.test(line))) return;
      if (this.done) throw new Error(`${this.name} exited before printing ${pattern}:\n${this.tail()}`);
      if (Date.now() > deadline) throw new Error(`${this.name} did not print ${pattern} within ${timeoutMs} ms:\n${this.tail()}`);
      await sleep(50);
    }
  }

  /** SIGTERM, then SIGKILL after `graceMs`. */
  async stop(graceMs = 20_000): Promise<void> {
    if (this.done) return;
    this.process.kill('SIGTERM');
    const timer = setTimeout(() => this.process.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

/** Runs a command to completion; rejects with its output if it fails. */
export function run(command: string, args: readonly string[], options: { env?: Record<string, string | undefined>; cwd?: string } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: { ...process.env, ...options.env }, cwd: options.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => out.push(chunk));
    child.once('error', reject);
    child.once('exit', (code) => {
      const text = Buffer.concat(out).toString('utf8');
      if (code === 0) resolve(text);
      else reject(new Error(`${command} ${args.join(' ')} exited with ${code}:\n${text.slice(-4_000)}`));
    });
  });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export function progress(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

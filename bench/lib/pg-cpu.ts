/**
 * The database's CPU from /proc (the bench runs on the database's machine): every process of
 * the Postgres server, split into the bench's own sessions (the load's INSERTs, the same for
 * every contender), the walsenders, the contender's other sessions (the polling relay's, the
 * relay's queries) and the rest (autovacuum, checkpointer, WAL writer, exited processes).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { BENCH_APPLICATION, type Database } from './db.js';

/** Linux clock ticks per second for /proc/<pid>/stat (USER_HZ). */
const CLOCK_TICKS = 100;

export type CpuGroup = 'load' | 'walsender' | 'contender' | 'other';

export interface PgCpuSample {
  /** CPU seconds of the whole server so far (see PostgresCpu). */
  readonly totalSeconds: number;
  /** CPU seconds of each live session process (its own lifetime), with its group. */
  readonly sessions: ReadonlyMap<number, { readonly group: Exclude<CpuGroup, 'other'>; readonly seconds: number }>;
}

/** utime+stime, cutime+cstime and ppid of a process, or null once it is gone. */
function stat(pid: number): { ppid: number; own: number; children: number } | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which is in parentheses and may contain spaces.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(fields[1]), own: (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS, children: (Number(fields[13]) + Number(fields[14])) / CLOCK_TICKS };
  } catch {
    return null;
  }
}

/**
 * The server's CPU as the postmaster's own time, plus the time of its exited children (which
 * the postmaster reaped: cutime + cstime), plus the time of its live children: exact across
 * processes that come and go between two samples (autovacuum workers, a reconnecting relay).
 */
export class PostgresCpu {
  private constructor(
    private readonly db: Database,
    readonly postmaster: number,
  ) {}

  /** The postmaster is the parent of any backend, e.g. this pool's. */
  static async find(db: Database): Promise<PostgresCpu> {
    const [row] = await db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const backend = stat(row!.pid);
    if (!backend) throw new Error(`cannot read /proc/${row!.pid}/stat of a Postgres backend: is the database on another machine?`);
    return new PostgresCpu(db, backend.ppid);
  }

  async sample(): Promise<PgCpuSample> {
    const activity = await this.db.query<{ pid: number; backend_type: string; application_name: string }>(
      "SELECT pid, backend_type, application_name FROM pg_stat_activity WHERE backend_type IN ('client backend', 'walsender')",
    );
    const postmaster = stat(this.postmaster);
    if (!postmaster) throw new Error(`the postmaster (pid ${this.postmaster}) is gone`);
    let total = postmaster.own + postmaster.children;
    const live = new Map<number, number>();
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      const child = stat(Number(entry));
      if (child?.ppid !== this.postmaster) continue;
      total += child.own;
      live.set(Number(entry), child.own);
    }
    const sessions = new Map<number, { group: Exclude<CpuGroup, 'other'>; seconds: number }>();
    for (const row of activity) {
      const seconds = live.get(row.pid);
      if (seconds === undefined) continue;
      sessions.set(row.pid, { group: row.backend_type === 'walsender' ? 'walsender' : row.application_name === BENCH_APPLICATION ? 'load' : 'contender', seconds });
    }
    return { totalSeconds: total, sessions };
  }
}

/** CPU seconds per group between two samples; a session new since `before` counts from zero. */
export function cpuBetween(before: PgCpuSample, after: PgCpuSample): Record<CpuGroup | 'total', number> {
  const result = { total: after.totalSeconds - before.totalSeconds, load: 0, walsender: 0, contender: 0, other: 0 };
  for (const [pid, session] of after.sessions) result[session.group] += session.seconds - (before.sessions.get(pid)?.seconds ?? 0);
  result.other = result.total - result.load - result.walsender - result.contender;
  return result;
}

/**
 * The server's CPU over an interval, sampled every `everyMs` on the way: a session that ends
 * before the interval does (pg_recvlogical's walsender, gone at its end LSN) keeps the time it
 * had when last seen, instead of falling into "other" with the exited processes.
 */
export class CpuWatch {
  private last: PgCpuSample;
  private readonly lastSeen = new Map<number, { group: Exclude<CpuGroup, 'other'>; seconds: number }>();
  private readonly timer: NodeJS.Timeout;
  private sampling: Promise<void> = Promise.resolve();

  private constructor(
    private readonly cpu: PostgresCpu,
    private readonly first: PgCpuSample,
    everyMs: number,
  ) {
    this.last = first;
    this.timer = setInterval(() => {
      this.sampling = this.sampling.then(() => this.sample());
    }, everyMs).unref();
  }

  static async start(cpu: PostgresCpu, everyMs = 100): Promise<CpuWatch> {
    return new CpuWatch(cpu, await cpu.sample(), everyMs);
  }

  /** Stops sampling, for an interval whose CPU is not wanted after all. */
  cancel(): void {
    clearInterval(this.timer);
  }

  /** CPU seconds per group from the start to now. */
  async stop(): Promise<Record<CpuGroup | 'total', number>> {
    this.cancel();
    await this.sampling;
    await this.sample();
    const sessions = new Map(this.lastSeen);
    for (const [pid, session] of this.last.sessions) sessions.set(pid, session);
    return cpuBetween(this.first, { totalSeconds: this.last.totalSeconds, sessions });
  }

  private async sample(): Promise<void> {
    const next = await this.cpu.sample();
    for (const [pid, session] of this.last.sessions) if (!next.sessions.has(pid)) this.lastSeen.set(pid, session);
    this.last = next;
  }
}

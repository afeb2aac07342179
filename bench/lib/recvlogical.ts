/**
 * The ceiling: Postgres's own logical replication client, pg_recvlogical, reading the
 * backlog through pgoutput (the plugin the relay and Debezium use) from its own slot into
 * /dev/null, until the backlog's end LSN: no code of ours is in it. It is what a plain pgoutput
 * client reaches: its walsender is nearly always busy and spends more CPU per event than the
 * relay's (the drain's server CPU), so the relay can and does drain faster.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Child, processUsage, type ProcessUsage } from './proc.js';

/**
 * pg_recvlogical of the server's major version: the Debian package's
 * /usr/lib/postgresql/<major>/bin first (the stack's server comes from there unless
 * OUTBOX_PG_BIN says otherwise), then OUTBOX_PG_BIN, then PATH (Debian's wrapper).
 */
export function findRecvlogical(serverMajor: number): { path: string; version: string } | null {
  const candidates = [
    join('/usr/lib/postgresql', String(serverMajor), 'bin', 'pg_recvlogical'),
    ...(process.env.OUTBOX_PG_BIN ? [join(process.env.OUTBOX_PG_BIN, 'pg_recvlogical')] : []),
    'pg_recvlogical',
  ];
  for (const path of candidates) {
    if (path.includes('/') && !existsSync(path)) continue;
    const result = spawnSync(path, ['--version'], { encoding: 'utf8' });
    if (result.status === 0) return { path, version: result.stdout.trim() };
  }
  return null;
}

/**
 * One pg_recvlogical run: `--start` on `slot` with pgoutput (proto_version 1, the bench's
 * publication), output to /dev/null without fsync (-F 0), exiting at `endLsn` (--endpos),
 * which it reaches with the last transaction of the backlog or with the walsender's next
 * keepalive past it. `-v` prints "streaming initiated" once START_REPLICATION succeeded:
 * the time of that line splits start-up (connection, slot, snapshot) from the stream.
 */
export class Recvlogical extends Child {
  /** When "streaming initiated" was printed (null until then). */
  streamingAt: number | null = null;
  private lastUsage: ProcessUsage | null = null;
  private readonly sampler: NodeJS.Timeout;

  constructor(binary: string, databaseUrl: string, slot: string, publication: string, endLsn: string) {
    super('pg-recvlogical', binary, [
      '-v', '--no-loop', '-d', databaseUrl, '--slot', slot, '--start',
      '-P', 'pgoutput', '-o', 'proto_version=1', '-o', `publication_names=${publication}`,
      '-f', '/dev/null', '-F', '0', '--endpos', endLsn,
    ], {});
    this.process.stderr!.on('data', (chunk: Buffer) => {
      if (this.streamingAt === null && chunk.toString('utf8').includes('streaming initiated')) this.streamingAt = Date.now();
    });
    // Its /proc entry is gone once it exits, and its memory figures once it is a zombie (exited,
    // not yet reaped): keep the last reading that had them.
    this.sampler = setInterval(() => {
      const now = processUsage(this.pid);
      if (now && !Number.isNaN(now.peakRssMb)) this.lastUsage = now;
    }, 20);
    void this.exited.then(() => clearInterval(this.sampler));
  }

  /** A zombie's CPU time is final; its peak RSS is the last one read while it ran. */
  override usage(): ProcessUsage | null {
    const now = processUsage(this.pid);
    if (!now) return this.lastUsage;
    return Number.isNaN(now.peakRssMb) ? { ...now, peakRssMb: this.lastUsage?.peakRssMb ?? NaN } : now;
  }

  /** Waits for the exit at --endpos: the stream's start and end, or an error with its output. */
  async finished(timeoutMs: number): Promise<{ streamingAt: number; doneAt: number }> {
    const timer = setTimeout(() => this.process.kill('SIGTERM'), timeoutMs);
    const code = await this.exited;
    const doneAt = Date.now();
    clearTimeout(timer);
    if (code !== 0) throw new Error(`pg_recvlogical exited with ${code}:\n${this.tail()}`);
    if (!this.output.some((line) => line.includes('end position'))) throw new Error(`pg_recvlogical exited before its end position:\n${this.tail()}`);
    if (this.streamingAt === null) throw new Error(`pg_recvlogical never printed "streaming initiated":\n${this.tail()}`);
    return { streamingAt: this.streamingAt, doneAt };
  }
}

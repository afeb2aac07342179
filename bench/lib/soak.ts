/**
 * The soak: a steady load for many minutes against one contender, the outbox never pruned
 * (as an operator who prunes nightly runs it), sampled every minute: latency, the contender's
 * and the database's CPU, WAL and rows written per event, and the outbox's table, indexes,
 * dead tuples and autovacuum runs. What it shows is whether a contender's cost stays flat while
 * the outbox grows: a polling relay's UPDATEs leave a dead tuple per event for autovacuum, and
 * its queries walk an index that bloats; the CDC relay only reads the WAL.
 */
import { label, type ContenderName, type Services } from './contenders.js';
import type { Database } from './db.js';
import { percentile } from './kafka.js';
import { LoadRig } from './load.js';
import { cpuBetween, PostgresCpu, type PgCpuSample } from './pg-cpu.js';
import { progress, sleep } from './proc.js';
import type { KafkaFor } from './measure.js';

export interface SoakMinute {
  /** 1 for the first minute of load. */
  readonly minute: number;
  /** Events committed in this minute. */
  readonly events: number;
  /** Commit-to-consumer latency of the events committed in this minute, ms. */
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  readonly contenderCpuSeconds: number;
  /** The whole server's CPU in this minute (PostgresCpu), and its parts (pg-cpu.ts). */
  readonly dbCpuSeconds: number;
  /** The load's sessions: its INSERTs and COMMITs, the same work for every contender. */
  readonly loadCpuSeconds: number;
  readonly walsenderCpuSeconds: number;
  /** The contender's own sessions besides a walsender (the polling relay's queries). */
  readonly contenderSessionsCpuSeconds: number;
  /** Autovacuum, checkpointer, WAL writer, background writer, exited processes. */
  readonly otherDbCpuSeconds: number;
  readonly walBytesPerEvent: number;
  /** Rows inserted, updated and deleted in the outbox per event. */
  readonly rowsWrittenPerEvent: number;
  /** At the end of the minute (pg_stat_user_tables: estimates). */
  readonly liveTuples: number;
  readonly deadTuples: number;
  readonly tableBytes: number;
  readonly indexBytes: number;
  /** Autovacuum and autoanalyze runs on the outbox since the soak began. */
  readonly autovacuums: number;
  readonly autoanalyzes: number;
}

export interface SoakResult {
  readonly contender: ContenderName;
  readonly offeredPerSecond: number;
  readonly minutes: readonly SoakMinute[];
  /** Events committed over the whole soak (fewer than offered if the database fell behind). */
  readonly events: number;
  readonly matched: number;
  readonly peakRssMb: number;
  readonly error?: string;
}

interface TableSample {
  readonly walLsn: bigint;
  readonly written: number;
  readonly live: number;
  readonly dead: number;
  readonly tableBytes: number;
  readonly indexBytes: number;
  readonly autovacuums: number;
  readonly autoanalyzes: number;
}

async function tableSample(db: Database, table: string): Promise<TableSample> {
  const [row] = await db.query<{ lsn: string; written: string; live: string; dead: string; table_bytes: string; index_bytes: string; autovacuums: string; autoanalyzes: string }>(
    `SELECT pg_current_wal_lsn()::text AS lsn, n_tup_ins + n_tup_upd + n_tup_del AS written, n_live_tup AS live, n_dead_tup AS dead,
            pg_relation_size(relid) AS table_bytes, pg_indexes_size(relid) AS index_bytes, autovacuum_count AS autovacuums, autoanalyze_count AS autoanalyzes
       FROM pg_stat_user_tables WHERE relname = $1`,
    [table],
  );
  const [high, low] = row!.lsn.split('/');
  return {
    walLsn: (BigInt(`0x${high}`) << 32n) + BigInt(`0x${low}`),
    written: Number(row!.written),
    live: Number(row!.live),
    dead: Number(row!.dead),
    tableBytes: Number(row!.table_bytes),
    indexBytes: Number(row!.index_bytes),
    autovacuums: Number(row!.autovacuums),
    autoanalyzes: Number(row!.autoanalyzes),
  };
}

/** One contender under `rate` events/s for `minutes`, sampled at each minute's end. */
export async function soak(db: Database, kafkaFor: KafkaFor, services: Services, contender: ContenderName, rate: number, minutes: number): Promise<SoakResult> {
  const rig = new LoadRig(db, kafkaFor(contender), contender);
  const title = `soak ${rate}/s`;
  const rows: SoakMinute[] = [];
  let load: Promise<unknown> | null = null;
  try {
    const child = await rig.start(services, title);
    const pgCpu = await PostgresCpu.find(db);
    progress(`${title}: ${label(contender)} for ${minutes} min, the outbox never pruned`);
    let table = await tableSample(db, rig.table);
    let cpu: PgCpuSample = await pgCpu.sample();
    let contenderCpu = child.usage()?.cpuSeconds ?? NaN;
    const first = { autovacuums: table.autovacuums, autoanalyzes: table.autoanalyzes };
    const start = Date.now();
    // Time-bound: a database that falls behind shows as fewer events per minute, not as a longer run.
    const offered = rig.offer(rate, minutes * 60, { idPrefix: 'k', timeBound: true });
    load = offered;
    let loadDone = false;
    void offered.then(
      () => (loadDone = true),
      () => (loadDone = true),
    );
    for (let minute = 1; minute <= minutes; minute += 1) {
      const end = start + minute * 60_000;
      while (Date.now() < end && !loadDone) await sleep(Math.min(200, end - Date.now()));
      if (Date.now() < end) break;
      if (!child.running) throw new Error(`${label(contender)} ended (${child.ended}) in minute ${minute}`);
      // Table statistics reach the shared counters up to a second after a commit; read them
      // at the boundary anyway: a second's lag is the same for every minute.
      const [nextTable, nextCpu] = await Promise.all([tableSample(db, rig.table), pgCpu.sample()]);
      const nextContenderCpu = child.usage()?.cpuSeconds ?? NaN;
      const events = rig.committedBetween(end - 60_000, end);
      const dbCpu = cpuBetween(cpu, nextCpu);
      rows.push({
        minute,
        events,
        p50: NaN,
        p99: NaN,
        max: NaN,
        contenderCpuSeconds: nextContenderCpu - contenderCpu,
        dbCpuSeconds: dbCpu.total,
        loadCpuSeconds: dbCpu.load,
        walsenderCpuSeconds: dbCpu.walsender,
        contenderSessionsCpuSeconds: dbCpu.contender,
        otherDbCpuSeconds: dbCpu.other,
        walBytesPerEvent: Number(nextTable.walLsn - table.walLsn) / events,
        rowsWrittenPerEvent: (nextTable.written - table.written) / events,
        liveTuples: nextTable.live,
        deadTuples: nextTable.dead,
        tableBytes: nextTable.tableBytes,
        indexBytes: nextTable.indexBytes,
        autovacuums: nextTable.autovacuums - first.autovacuums,
        autoanalyzes: nextTable.autoanalyzes - first.autoanalyzes,
      });
      const latency = minuteLatency(rig, end - 60_000, end);
      const row = rows.at(-1)!;
      progress(
        `${title}: ${label(contender)} minute ${minute}: ${events} events, p50 ${latency.p50} / p99 ${latency.p99} ms (so far), ` +
          `contender CPU ${row.contenderCpuSeconds.toFixed(1)} s, DB CPU ${row.dbCpuSeconds.toFixed(1)} s (${perEvent(row.dbCpuSeconds, events)} µs/event; without the load's sessions ${perEvent(row.dbCpuSeconds - row.loadCpuSeconds, events)} µs/event), ` +
          `WAL ${row.walBytesPerEvent.toFixed(0)} B/event, ${row.deadTuples} dead tuples, table ${mb(row.tableBytes)} + indexes ${mb(row.indexBytes)} MB, ${row.autovacuums} autovacuums`,
      );
      table = nextTable;
      cpu = nextCpu;
      contenderCpu = nextContenderCpu;
    }
    const { events: total } = await offered;
    await rig.matched(total, 60_000);
    const minutesWithLatency = rows.map((row) => ({ ...row, ...minuteLatency(rig, start + (row.minute - 1) * 60_000, start + row.minute * 60_000) }));
    const usage = child.usage();
    if (rig.consumer.latencies.length < total) progress(`${title}: only ${rig.consumer.latencies.length}/${total} matched; contender ${child.running ? 'running' : `ended (${child.ended})`}:\n${child.tail(10)}`);
    if (!child.running) throw new Error(`${label(contender)} ended (${child.ended}) before the soak's end`);
    return { contender, offeredPerSecond: rate, minutes: minutesWithLatency, events: total, matched: rig.consumer.latencies.length, peakRssMb: usage?.peakRssMb ?? NaN };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    progress(`${title}: ${label(contender)} FAILED: ${message}\n${rig.child?.tail() ?? ''}`);
    return { contender, offeredPerSecond: rate, minutes: rows, events: 0, matched: 0, peakRssMb: NaN, error: message.split('\n')[0]! };
  } finally {
    await rig.stop();
    // A soak that failed early: its load stops issuing (rig.stop) and finishes what it issued.
    await load?.catch(() => undefined);
  }
}

/** Latency of the events committed in [from, to). */
function minuteLatency(rig: LoadRig, from: number, to: number): { p50: number; p99: number; max: number } {
  const { latencies, commitAts } = rig.consumer;
  const sample: number[] = [];
  for (let i = 0; i < latencies.length; i += 1) if (commitAts[i]! >= from && commitAts[i]! < to) sample.push(latencies[i]!);
  sample.sort((a, b) => a - b);
  return { p50: percentile(sample, 50), p99: percentile(sample, 99), max: sample.at(-1) ?? NaN };
}

function perEvent(seconds: number, events: number): string {
  return events > 0 ? ((seconds * 1e6) / events).toFixed(0) : '–';
}

function mb(bytes: number): string {
  return (bytes / 2 ** 20).toFixed(1);
}

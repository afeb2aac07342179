/**
 * `npm run bench:standby [-- --rate 1000] [-- --seconds 60] [-- --rounds 3] [-- --postgres 16|17|18] [-- --synchronous on|off] [-- --keep-stack] [-- --pin-primary] [-- --render <report>.json]`
 *
 * Issue 49, OUTBOX_REPLICA_URL: what the relay costs the primary when it reads the WAL from a
 * physical standby instead of from the primary, and what it costs in latency. Three cases under
 * the same offered load, side by side in one run, alternating in rounds:
 *   baseline   no relay at all: what the application's own inserts cost the primary (backends,
 *              WAL writer, the standby's physical walsender, autovacuum...)
 *   primary    the relay reading from the primary (DATABASE_URL, OUTBOX_REPLICA_URL unset)
 *   standby    the relay reading from the standby (OUTBOX_REPLICA_URL)
 * Each case: a fresh outbox table, publication and slot by `outbox-relay setup` (the slot on the
 * standby in `standby`; `baseline` drops its slot at once), a CHECKPOINT on both servers, the relay
 * (`node dist/cli.js run`, default options: JSON, at-least-once) started and warmed up, then
 * single-row transactions at --rate for --seconds from a pool on the primary (application_name
 * 'bench'), each commit timed, and a read_committed consumer matching each record's event_id to
 * its commit. Measured over the load (until every record was matched): the primary's and the
 * standby's whole-server CPU from /proc (bench/lib/pg-cpu.ts), per event; commit-to-consumer
 * latency; the relay's CPU; WAL per event; how busy the machine was.
 *
 * Starts its own stack (kafka and the failover pair) in a temp OUTBOX_STACK_DIR on ports apart
 * from the tests' and the other benches', with fsync on unless OUTBOX_PG_FSYNC=off, and takes it
 * down at the end (unless --keep-stack, or a stack named by OUTBOX_STACK_DIR). Writes
 * bench/results/<date>-standby[-N].md and .json; `--render bench/results/<file>.json` writes a
 * report's .md again from its .json (after a change to the report), with no stack.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import * as p from '../src/config/parsers.js';
import { SEMI_SPACE_FLAG } from '../src/observe/runtime-flags.js';
import { CDC_TABLE, Database, parseLsn } from './lib/db.js';
import { flag } from './lib/flags.js';
import { KafkaTools, percentile } from './lib/kafka.js';
import { LoadRig } from './lib/load.js';
import { CpuWatch, PostgresCpu } from './lib/pg-cpu.js';
import { Child, machineBusyPercent, machineCpu, machineDescription, progress, run, sleep } from './lib/proc.js';
import { STACK_SCRIPT, upBenchStack } from './lib/stack.js';
import { CASES, renderStandbyReport, type CaseName, type Measured, type StandbyRun } from './lib/standby-report.js';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const CLI = join(REPO, 'dist', 'cli.js');
/** As the Dockerfile and `npm start` run the relay. */
const RELAY_NODE_FLAGS = [SEMI_SPACE_FLAG];
const SERVICES = ['kafka', 'failover'];
const STACK_DEFAULTS: Record<string, string> = {
  OUTBOX_STACK_DIR: join(tmpdir(), 'outbox-relay-bench-standby-stack'),
  OUTBOX_KAFKA_PORT: '61292',
  OUTBOX_KAFKA_CONTROLLER_PORT: '61293',
  // The tests' pair is on 59610/59611.
  OUTBOX_FAILOVER_PRIMARY_PORT: '57610',
  OUTBOX_FAILOVER_STANDBY_PORT: '57611',
};
/** The load's sessions on the primary, all opened before the first case. */
const POOL_SIZE = 12;
/** How often the servers' sessions are sampled during the load (pg_stat_activity and /proc). */
const CPU_SAMPLE_MS = 200;
/** Every name this bench gives a slot, table or publication starts with it. */
const NAME_ROOT = 'bench_standby';

const { values } = parseArgs({
  options: {
    rate: { type: 'string', default: '1000' },
    seconds: { type: 'string', default: '60' },
    rounds: { type: 'string', default: '3' },
    postgres: { type: 'string', default: '17' },
    synchronous: { type: 'string', default: 'on' },
    'keep-stack': { type: 'boolean', default: false },
    'pin-primary': { type: 'boolean', default: false },
    render: { type: 'string' },
  },
});
const rate = flag('rate', values.rate, p.integer(10, 20_000));
const seconds = flag('seconds', values.seconds, p.integer(5, 3_600));
const rounds = flag('rounds', values.rounds, p.integer(1, 20));
const major = flag('postgres', values.postgres, p.oneOf('16', '17', '18'));
const synchronous = flag('synchronous', values.synchronous, p.oneOf('on', 'off'));

interface Servers {
  readonly env: Record<string, string>;
  readonly primary: Database;
  readonly standby: Database;
  readonly primaryCpu: PostgresCpu;
  readonly standbyCpu: PostgresCpu;
  readonly kafka: KafkaTools;
}

/**
 * --pin-primary: the primary's server alone on the first core, everything else (the standby,
 * Kafka, this bench with its load and consumer, and the relays it starts, which inherit its
 * affinity) on the others. On a shared 2-core machine the relay's work elsewhere otherwise slows
 * the primary's own backends, and the floor's difference counts that as the relay's cost.
 * Processes the postmasters fork later inherit their affinity.
 */
async function pinPrimary(servers: Servers): Promise<void> {
  const count = cpus().length;
  if (count < 2) throw new Error('--pin-primary needs at least 2 cores');
  const rest = count === 2 ? '1' : `1-${count - 1}`;
  const kafkaPid = Number(readFileSync(join(process.env.OUTBOX_STACK_DIR!, 'kafka.pid'), 'utf8').trim());
  const pin = (cores: string, pids: readonly number[]) => Promise.all(pids.map((pid) => run('taskset', ['-a', '-p', '-c', cores, String(pid)]).catch(() => undefined)));
  await pin('0', withChildren(servers.primaryCpu.postmaster));
  await pin(rest, [process.pid, kafkaPid, ...withChildren(servers.standbyCpu.postmaster)]);
  progress(`pinned the primary (postmaster ${servers.primaryCpu.postmaster} and its processes) to core 0, everything else to ${rest}`);
}

/** A process and its children (a postmaster's backends and workers), from /proc. */
function withChildren(pid: number): number[] {
  const children = readdirSync('/proc').filter((entry) => /^\d+$/.test(entry)).filter((entry) => {
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid;
    } catch {
      return false;
    }
  });
  return [pid, ...children.map(Number)];
}

async function main(): Promise<void> {
  if (values.render !== undefined) {
    const markdown = values.render.replace(/\.json$/, '.md');
    writeFileSync(markdown, renderStandbyReport(JSON.parse(readFileSync(values.render, 'utf8')) as StandbyRun));
    progress(`wrote ${markdown}`);
    return;
  }
  const started = Date.now();
  const ownStack = process.env.OUTBOX_STACK_DIR === undefined;
  process.env.OUTBOX_FAILOVER_POSTGRES = major;
  const env = await upBenchStack(STACK_DEFAULTS, SERVICES);
  // Its sessions stay for the whole run (pg.Pool closes one idle for 10 s by default): a
  // session opened during a load would charge the inserts with a backend's start.
  const primary = new Database(env.FAILOVER_PRIMARY_URL!, { max: POOL_SIZE, idleTimeoutMillis: 0 });
  const standby = new Database(env.FAILOVER_STANDBY_URL!);
  const kafka = new KafkaTools({ brokers: env.KAFKA_BROKERS!.split(',') });
  const restores: (() => Promise<void>)[] = [];
  try {
    // The pair is made with fsync off (a test stack); the bench's commits cost what they cost on a disk.
    restores.push(await primary.setForRun('fsync', process.env.OUTBOX_PG_FSYNC!), await standby.setForRun('fsync', process.env.OUTBOX_PG_FSYNC!));
    const [walReceiver] = await primary.query<{ name: string }>("SELECT application_name AS name FROM pg_stat_replication WHERE state = 'streaming'");
    if (!walReceiver) throw new Error(`no standby streams from the primary (${env.FAILOVER_PRIMARY_URL})`);
    restores.push(await primary.setForRun('synchronous_standby_names', synchronous === 'on' ? walReceiver.name : ''));
    await clearLeftovers(primary, standby);
    const sessions = await Promise.all(Array.from({ length: POOL_SIZE }, () => primary.pool.connect()));
    for (const session of sessions) session.release();
    const servers: Servers = { env, primary, standby, primaryCpu: await PostgresCpu.find(primary), standbyCpu: await PostgresCpu.find(standby), kafka };
    if (values['pin-primary']) await pinPrimary(servers);
    const measured: Measured[] = [];
    for (let round = 1; round <= rounds; round += 1) {
      // Alternated, so that no case always runs on a warmer (or busier) machine.
      for (const each of round % 2 === 1 ? CASES : [...CASES].reverse()) {
        measured.push(await runCase(servers, each, round));
      }
    }
    writeReport({
      date: new Date().toISOString().slice(0, 10),
      command: `npm run bench:standby${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
      minutes: (Date.now() - started) / 60_000,
      machine: machineDescription(),
      source: source(),
      postgres: await primary.description(),
      standbyPostgres: await standby.description(),
      synchronousStandbyNames: await primary.setting('synchronous_standby_names'),
      synchronizedStandbySlots: Number(major) >= 17 ? await primary.setting('synchronized_standby_slots') : null,
      pinnedPrimary: values['pin-primary'],
      rate,
      seconds,
      rounds,
      measured,
    });
  } finally {
    for (const restore of restores.reverse()) await restore().catch(() => undefined);
    await kafka.close();
    await primary.close();
    await standby.close();
    const down = `OUTBOX_STACK_DIR=${process.env.OUTBOX_STACK_DIR} scripts/stack.sh down ${SERVICES.join(' ')}`;
    if (ownStack && !values['keep-stack']) {
      progress(`taking the bench's stack down (${down})`);
      await run(STACK_SCRIPT, ['down', ...SERVICES], { cwd: REPO });
    } else progress(`the stack is still up; take it down with: ${down}`);
  }
}

/** Slots, tables and publications of a run that did not finish; the load's helpers (bench_payloads). */
async function clearLeftovers(primary: Database, standby: Database): Promise<void> {
  for (const db of [standby, primary]) {
    // A slot the standby synchronized from the primary (17+: synced) is dropped by dropping the primary's.
    const slots = await db.query<{ slot_name: string; active_pid: number | null }>(
      "SELECT slot_name, active_pid FROM pg_replication_slots s WHERE starts_with(slot_name, $1) AND NOT coalesce((to_jsonb(s) ->> 'synced')::boolean, false)",
      [NAME_ROOT],
    );
    for (const slot of slots) {
      if (slot.active_pid) await db.query('SELECT pg_terminate_backend($1)', [slot.active_pid]);
      await db.dropSlot(slot.slot_name);
    }
  }
  for (const each of CASES) await primary.query(`DROP PUBLICATION IF EXISTS ${NAME_ROOT}_${each}`);
  await primary.reset();
  await primary.query(`DROP TABLE IF EXISTS ${CDC_TABLE}_prune_marks`);
  // The load's ~300 B payloads (bench_payloads), made without loading a row.
  await primary.query(`CALL bench_load($1, 'warm', 1, 0, 1, 300)`, [CDC_TABLE]);
}

/** The relay's variables for a case: its own slot and publication; the standby only in `standby`. */
function relayEnv(servers: Servers, each: CaseName, topicPrefix: string): Record<string, string | undefined> {
  const name = `${NAME_ROOT}_${each}`;
  return {
    DATABASE_URL: servers.env.FAILOVER_PRIMARY_URL,
    OUTBOX_REPLICA_URL: each === 'standby' ? servers.env.FAILOVER_STANDBY_URL : undefined,
    KAFKA_BROKERS: servers.env.KAFKA_BROKERS,
    OUTBOX_TABLE: `public.${CDC_TABLE}`,
    OUTBOX_SLOT: name,
    OUTBOX_PUBLICATION: name,
    OUTBOX_TOPIC_TEMPLATE: `${topicPrefix}.{aggregate_type}`,
    OUTBOX_DEAD_LETTER_TOPIC: `${topicPrefix}.dead-letter`,
    OUTBOX_HTTP_PORT: '0',
  };
}

async function runCase(servers: Servers, each: CaseName, round: number): Promise<Measured> {
  const title = `round ${round}/${rounds}: ${each}`;
  const rig = new LoadRig(servers.primary, servers.kafka, 'relay-json');
  const topicPrefix = rig.topic.slice(0, rig.topic.lastIndexOf('.'));
  const env = relayEnv(servers, each, topicPrefix);
  const cli = (...args: string[]) => run(process.execPath, [CLI, ...args], { env, cwd: REPO });
  let child: Child | null = null;
  const watches: CpuWatch[] = [];
  try {
    await cli('setup');
    if (each === 'baseline') await cli('drop-slot', '--yes');
    // Each case's load starts at the same point of the checkpoint cycle (none falls in it).
    await servers.primary.checkpoint();
    await servers.standby.checkpoint();
    if (each !== 'baseline') {
      await servers.kafka.createTopic(rig.topic);
      child = new Child(`relay (${each})`, process.execPath, [...RELAY_NODE_FLAGS, CLI, 'run'], env, REPO);
      rig.child = child;
      await rig.consumer.start();
    }
    progress(`${title}: warming up`);
    await servers.primary.query(`INSERT INTO ${CDC_TABLE} (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES ('warm-${round}-${each}', 'payment', 'acct-0', 'PaymentRecorded', '{}')`);
    if (child) {
      const relay = child;
      await servers.kafka.waitForRecords(rig.topic, 1, { timeoutMs: 120_000, stallMs: 120_000, alive: () => relay.running, onProgress: () => undefined });
      for (const deadline = Date.now() + 60_000; rig.consumer.received < 1; await sleep(50)) {
        if (Date.now() > deadline) throw new Error(`${title}: the consumer saw no warm-up record within 60 s`);
      }
    }
    await sleep(2_000);

    progress(`${title}: ${rate} events/s for ${seconds} s`);
    const machine = machineCpu();
    // Sampled on the way: a session that ends within the window (the pool closes a connection
    // idle for 10 s) keeps its CPU in its group instead of falling into "the rest".
    watches.push(await CpuWatch.start(servers.primaryCpu, CPU_SAMPLE_MS), await CpuWatch.start(servers.standbyCpu, CPU_SAMPLE_MS));
    const [walBefore, syncsBefore, sessionsBefore] = [await servers.primary.currentLsn(), await walSyncs(servers.primary), await sessionsOpened(servers.primary)];
    const relayBefore = child?.usage()?.cpuSeconds ?? NaN;
    const windowStart = Date.now();
    const offered = await rig.offer(rate, seconds, { idPrefix: `${each}-r${round}` });
    // The same 2 s after the load in every case; with a relay, until every record was matched too.
    await sleep(2_000);
    if (child) await rig.matched(offered.events, 60_000);
    const [primaryCpu, standbyCpu, walAfter, syncsAfter, sessionsAfter] = [await watches[0]!.stop(), await watches[1]!.stop(), await servers.primary.currentLsn(), await walSyncs(servers.primary), await sessionsOpened(servers.primary)];
    const relayCpuSeconds = (child?.usage()?.cpuSeconds ?? NaN) - relayBefore;
    const busyPercent = machineBusyPercent(machine);
    const windowSeconds = (Date.now() - windowStart) / 1000;
    if (child && !child.running) throw new Error(`${title}: the relay exited (${child.ended}):\n${child.tail()}`);

    const latencies = [...rig.consumer.latencies].sort((a, b) => a - b);
    const toProduce = [...rig.consumer.toProduce].sort((a, b) => a - b);
    const result: Measured = {
      case: each,
      round,
      events: offered.events,
      offerSeconds: offered.seconds,
      windowSeconds,
      primaryCpu,
      standbyCpu,
      walBytes: Number(parseLsn(walAfter) - parseLsn(walBefore)),
      walSyncs: syncsBefore === null || syncsAfter === null ? null : syncsAfter - syncsBefore,
      sessionsOpened: sessionsAfter - sessionsBefore,
      relayCpuSeconds: child ? relayCpuSeconds : null,
      latency: child ? { matched: latencies.length, p50: percentile(latencies, 50), p99: percentile(latencies, 99), max: latencies.at(-1) ?? NaN, toProduceP99: percentile(toProduce, 99) } : null,
      busyPercent,
    };
    const perEvent = (cpu: number) => ((cpu * 1e6) / result.events).toFixed(1);
    progress(
      `${title}: primary ${perEvent(result.primaryCpu.total)} µs/event, standby ${perEvent(result.standbyCpu.total)} µs/event` +
        (result.latency ? `, p50 ${result.latency.p50} / p99 ${result.latency.p99} / max ${result.latency.max} ms (${result.latency.matched}/${result.events} matched)` : '') +
        `, ${Math.round(result.events / result.offerSeconds)}/s achieved, machine ${busyPercent.toFixed(0)}% busy`,
    );
    if (result.latency && result.latency.matched < result.events) progress(`${title}: only ${result.latency.matched}/${result.events} matched; consumer ${rig.consumer.crash ?? 'running'}; relay:\n${child!.tail(10)}`);
    return result;
  } finally {
    for (const watch of watches) watch.cancel();
    // baseline: no relay, consumer, topic or slot left.
    if (each !== 'baseline') {
      await rig.stop();
      await dropSlot(() => cli('drop-slot', '--yes'), title);
    }
    await servers.primary.query(`DROP PUBLICATION IF EXISTS ${env.OUTBOX_PUBLICATION}; DROP TABLE IF EXISTS ${CDC_TABLE}, ${CDC_TABLE}_prune_marks`);
  }
}

/**
 * The primary's WAL flushes to disk so far (pg_stat_wal.wal_sync, up to Postgres 17; null on 18,
 * which counts them in pg_stat_io): fewer per commit when commits are grouped.
 */
async function walSyncs(db: Database): Promise<number | null> {
  const [row] = await db.query<{ syncs: string | null }>("SELECT to_jsonb(w) ->> 'wal_sync' AS syncs FROM pg_stat_wal w");
  return row?.syncs == null ? null : Number(row.syncs);
}

/** Sessions opened on the primary's database so far (pg_stat_database.sessions, Postgres 14+). */
async function sessionsOpened(db: Database): Promise<number> {
  const [row] = await db.query<{ sessions: string }>('SELECT sessions::text FROM pg_stat_database WHERE datname = current_database()');
  return Number(row!.sessions);
}

/** `drop-slot` where the case's slot lives; its walsender may take a moment to let go of it after the relay stopped. */
async function dropSlot(drop: () => Promise<string>, title: string): Promise<void> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      await drop();
      return;
    } catch (error) {
      if (attempt >= 40) throw new Error(`${title}: drop-slot failed 40 times`, { cause: error });
      await sleep(250);
    }
  }
}

/** The commit the relay was built from, and whether src/ differed from it. */
function source(): string {
  const git = (...args: string[]) => execFileSync('git', args, { cwd: REPO, encoding: 'utf8' }).trim();
  try {
    return `${git('rev-parse', '--short', 'HEAD')}${git('status', '--porcelain', '--', 'src') === '' ? '' : ' (src/ with uncommitted changes)'}`;
  } catch {
    return 'unknown';
  }
}

function writeReport(result: StandbyRun): void {
  const dir = join(REPO, 'bench', 'results');
  if (!existsSync(dir)) mkdirSync(dir, { recursive: true });
  let stem = `${result.date}-standby`;
  for (let n = 2; existsSync(join(dir, `${stem}.md`)) || existsSync(join(dir, `${stem}.json`)); n += 1) stem = `${result.date}-standby-${n}`;
  const report = renderStandbyReport(result);
  writeFileSync(join(dir, `${stem}.json`), `${JSON.stringify(result, null, 2)}\n`);
  writeFileSync(join(dir, `${stem}.md`), report);
  process.stdout.write(`${report}\nwritten to bench/results/${stem}.md and .json\n`);
}

await main();

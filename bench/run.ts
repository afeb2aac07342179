/**
 * `npm run bench [-- --quick] [-- --only relay-json,ceiling] [-- --no-debezium] [-- --profile]
 * [-- --events N] [-- --payload BYTES] [-- --note TEXT] [-- --render bench/results/<stem>.json]`
 *
 * Starts its own stack (scripts/stack.sh up; by default in a temp dir on ports apart from the
 * test stack's, overridable with the OUTBOX_STACK_DIR / OUTBOX_*_PORT variables), builds the
 * relay, runs every contender against the same Postgres and Kafka, and writes
 * bench/results/<date>.md, .png and .json (raw figures; `--render <json>` redraws the others).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { OPTIONS } from '../src/config/options.js';
import * as p from '../src/config/parsers.js';
import { BUILD_DIR, type ContenderName, type Services } from './lib/contenders.js';
import { Database } from './lib/db.js';
import { fetchDebezium } from './lib/debezium.js';
import { KafkaTools } from './lib/kafka.js';
import { drain, steady, type DrainResult, type DrainWorkload, type SteadyResult } from './lib/measure.js';
import { progress, run } from './lib/proc.js';
import { renderChart } from './lib/chart.js';
import { renderReport, type BenchRun } from './lib/report.js';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const STACK_DEFAULTS: Record<string, string> = {
  OUTBOX_STACK_DIR: join(tmpdir(), 'outbox-relay-bench-stack'),
  OUTBOX_PG_PORT: '57432',
  OUTBOX_KAFKA_PORT: '61092',
  OUTBOX_KAFKA_CONTROLLER_PORT: '61093',
  OUTBOX_REGISTRY_PORT: '60081',
  OUTBOX_REGISTRY_MGMT_PORT: '60082',
};

const CONTENDERS = ['ceiling', 'relay-json', 'relay-avro', 'polling', 'debezium'] as const satisfies readonly ContenderName[];

/** The command line: a mistyped flag or a bad value stops the bench before it builds anything. */
function benchFlags() {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      'no-debezium': { type: 'boolean', default: false },
      profile: { type: 'boolean', default: false },
      only: { type: 'string' },
      note: { type: 'string', default: '' },
      events: { type: 'string' },
      payload: { type: 'string' },
      render: { type: 'string' },
    },
    strict: true,
    allowPositionals: false,
  });
  const only = values.only === undefined ? null : new Set(flag('only', values.only, p.commaList('relay-json,ceiling')));
  for (const name of only ?? []) if (!(CONTENDERS as readonly string[]).includes(name)) throw new Error(`--only ${name}: no such contender (${CONTENDERS.join(', ')})`);
  return {
    quick: values.quick,
    noDebezium: values['no-debezium'],
    profile: values.profile,
    note: values.note,
    render: values.render,
    only,
    /** Backlog size of the small drains (default 200k, 20k with --quick). */
    events: values.events === undefined ? null : flag('events', values.events, p.integer(1, 100_000_000)),
    /** Payload bytes of the --quick drains (default 300). */
    payload: values.payload === undefined ? 300 : flag('payload', values.payload, p.integer(1, 1_000_000)),
  };
}

/** A flag's value through the relay's own parsers, or an error naming the flag. */
function flag<T>(name: string, raw: string, parser: p.Parser<T>): T {
  try {
    return parser.parse(raw);
  } catch (error) {
    throw new Error(`--${name}=${JSON.stringify(raw)} ${(error as Error).message}; expected ${parser.expected}`);
  }
}

let flags: ReturnType<typeof benchFlags>;
try {
  flags = benchFlags();
} catch (error) {
  progress(`usage: ${(error as Error).message}`);
  process.exit(2);
}
const { quick, noDebezium, profile, note, only, events: eventsOverride, payload: quickPayload } = flags;

async function main(): Promise<void> {
  if (flags.render !== undefined) return render(flags.render);
  const began = Date.now();
  for (const [key, value] of Object.entries(STACK_DEFAULTS)) process.env[key] ??= value;

  progress('building the relay (npm run build) and the bench processes');
  await run('npm', ['run', 'build'], { cwd: REPO });
  await run(process.execPath, [join(REPO, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(REPO, 'bench', 'tsconfig.json')], { cwd: REPO });

  const stackServices = ['pg', 'kafka', 'registry'];
  progress(`starting the stack (${stackServices.join(', ')}) in ${process.env.OUTBOX_STACK_DIR}`);
  await run(join(REPO, 'scripts', 'stack.sh'), ['up', ...stackServices], { cwd: REPO });
  const env = Object.fromEntries(
    (await run(join(REPO, 'scripts', 'stack.sh'), ['env'])).trim().split('\n').map((line) => line.split(/=(.*)/s, 2) as [string, string]),
  );

  let debeziumHome: string | null = null;
  let debeziumNote = '';
  if (!noDebezium && want('debezium')) {
    try {
      debeziumHome = await fetchDebezium();
    } catch (error) {
      debeziumNote = `Debezium could not be fetched: ${(error as Error).message.split('\n')[0]}`;
      progress(debeziumNote);
    }
  } else debeziumNote = 'Debezium skipped (--no-debezium or --only).';

  const contenders = CONTENDERS.filter((c) => want(c) && (c !== 'debezium' || debeziumHome));
  const db = new Database(env.DATABASE_URL!);
  const kafka = new KafkaTools(env.KAFKA_BROKERS!);
  const workDir = join(process.env.OUTBOX_STACK_DIR!, 'bench');
  mkdirSync(workDir, { recursive: true });
  const profileDir = join(BUILD_DIR, 'profiles');
  const baseServices: Services = {
    databaseUrl: env.DATABASE_URL!,
    kafkaBrokers: env.KAFKA_BROKERS!,
    schemaRegistryUrl: env.SCHEMA_REGISTRY_URL!,
    pgPort: Number(new URL(env.DATABASE_URL!).port),
    workDir,
    debeziumHome,
    pollingBatch: 1000,
    pollingIdleMs: 10,
    relayNodeArgs: profile ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [],
    avroEnv: avroEnv(),
  };

  // Polling relay: pick its best batch size on a small backlog first (it drains fastest with
  // big batches; the interval only matters when idle).
  let services = baseServices;
  const tuning: { batch: number; eventsPerSecond: number }[] = [];
  if (contenders.includes('polling')) {
    const events = eventsOverride ? Math.max(1000, Math.round(eventsOverride / 2)) : quick ? 10_000 : 40_000;
    for (const batch of [100, 500, 1000, 2000, 5000]) {
      const [result] = await drain(db, kafka, { ...baseServices, pollingBatch: batch }, { events, rowsPerTx: 1, payloadBytes: 300, contenders: ['polling'] });
      tuning.push({ batch, eventsPerSecond: result!.eventsPerSecond });
      progress(`polling tuning: batch ${batch}: ${Math.round(result!.eventsPerSecond)} events/s`);
    }
    const best = tuning.reduce((a, b) => (b.eventsPerSecond > a.eventsPerSecond ? b : a));
    services = { ...baseServices, pollingBatch: best.batch };
    progress(`polling relay: batch ${best.batch} rows per poll, ${baseServices.pollingIdleMs} ms sleep after a short poll`);
  }

  const small = eventsOverride ?? (quick ? 20_000 : 200_000);
  const all = contenders;
  const cdcOnly = contenders.filter((c) => c === 'ceiling' || c === 'relay-json' || c === 'relay-avro');
  const workloads: DrainWorkload[] = [
    { events: small, rowsPerTx: 1, payloadBytes: quickPayload, contenders: all },
    { events: small, rowsPerTx: 100, payloadBytes: quickPayload, contenders: all },
    ...(quick
      ? []
      : [
          { events: small, rowsPerTx: 1, payloadBytes: 2000, contenders: all },
          { events: small, rowsPerTx: 100, payloadBytes: 2000, contenders: all },
          { events: 1_000_000, rowsPerTx: 1, payloadBytes: 300, contenders: cdcOnly },
        ]),
  ];
  const drains: DrainResult[] = [];
  for (const workload of workloads) drains.push(...(await drain(db, kafka, services, workload)));

  const steadyResults: SteadyResult[] = [];
  const rates = quick ? [1000] : [1000, 5000];
  const seconds = quick ? 8 : 20;
  for (const rate of rates) {
    for (const contender of contenders.filter((c) => c !== 'ceiling')) {
      steadyResults.push(await steady(db, kafka, services, contender as ContenderName, rate, seconds));
    }
  }

  const date = new Date().toISOString().slice(0, 10);
  const results: BenchRun = {
    date,
    quick,
    minutes: (Date.now() - began) / 60_000,
    machine: `${cpus().length} × ${cpus()[0]?.model.trim() ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`,
    postgres: `${(await db.setting('server_version')).split(' ')[0]}, fsync=${await db.setting('fsync')}, synchronous_commit=${await db.setting('synchronous_commit')}, wal_level=${await db.setting('wal_level')}`,
    // This build has the Avro format (the report of an older run may say otherwise).
    avro: true,
    debeziumNote,
    note,
    polling: { batch: services.pollingBatch, idleMs: services.pollingIdleMs, tuning },
    drains,
    steady: steadyResults,
  };
  await db.reset();
  await db.close();
  await kafka.close();

  const outDir = join(REPO, 'bench', 'results');
  mkdirSync(outDir, { recursive: true });
  // A second run on the same day gets -2, -3...: earlier results stay for comparison.
  const base = `${date}${quick ? '-quick' : ''}`;
  let stem = base;
  for (let n = 2; existsSync(join(outDir, `${stem}.json`)); n++) stem = `${base}-${n}`;
  writeFileSync(join(outDir, `${stem}.json`), JSON.stringify(results, null, 2));
  writeResults(outDir, stem, results);
  progress(`wrote bench/results/${stem}.md and .png in ${results.minutes.toFixed(1)} min${profile ? `; CPU profiles in ${profileDir}` : ''}`);
  progress(`the stack is still up; stop it with: OUTBOX_STACK_DIR=${process.env.OUTBOX_STACK_DIR} scripts/stack.sh down`);
}

function writeResults(outDir: string, stem: string, results: BenchRun): void {
  writeFileSync(join(outDir, `${stem}.png`), renderChart(results));
  writeFileSync(join(outDir, `${stem}.md`), renderReport(results, `${stem}.png`));
}

/** `--render bench/results/<stem>.json`: the report and chart again from a run's raw results. */
function render(file: string): void {
  const results = JSON.parse(readFileSync(file, 'utf8')) as BenchRun;
  writeResults(dirname(file), basename(file, '.json'), results);
  progress(`wrote ${file.replace(/\.json$/, '')}.md and .png`);
}

function want(contender: string): boolean {
  return !only || only.has(contender);
}

/** What the Avro mode needs besides OUTBOX_FORMAT: the bench's schema directory. */
function avroEnv(): Record<string, string> {
  const env: Record<string, string> = {
    [OPTIONS.schemasDir.env]: join(REPO, 'bench', 'schemas'),
    // Each run writes to fresh topics, so their subjects are registered on first use.
    [OPTIONS.autoRegister.env]: 'true',
  };
  for (const pair of (process.env.BENCH_AVRO_ENV ?? '').split(',').filter(Boolean)) {
    const [key, value] = pair.split(/=(.*)/s, 2) as [string, string];
    env[key] = value;
  }
  return env;
}

main().catch((error: unknown) => {
  progress(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exitCode = 1;
});

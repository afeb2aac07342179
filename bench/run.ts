/**
 * `npm run bench [-- --quick] [-- --only relay-json,pg-recvlogical] [-- --no-debezium] [-- --profile]
 * [-- --secure] [-- --compression] [-- --events N] [-- --payload BYTES] [-- --note TEXT] [-- --render bench/results/<stem>.json]
 * [-- --soak] [-- --soak-minutes N] [-- --no-soak] [-- --relay-node-flags="--flag ..."]`
 *
 * Starts its own stack (scripts/stack.sh up; by default in a temp dir on ports apart from the
 * test stack's, overridable with the OUTBOX_STACK_DIR / OUTBOX_*_PORT variables), builds the
 * relay, runs every contender against the same Postgres and Kafka, and writes
 * bench/results/<date>.md, .png and .json (raw figures; `--render <json>` redraws the others).
 * `--secure` adds relay-json-sasl-ssl: the relay JSON against the stack's secured broker
 * (secure_kafka: SASL_SSL, SCRAM-SHA-512, ACLs), started for the run unless it runs already.
 * `--compression` adds the relay JSON with each codec (OUTBOX_KAFKA_COMPRESSION) on both clients, in
 * the drains only: events/s, CPU and the bytes each event takes on the broker's disk.
 * The full run ends with the soak (SOAK_RATE events/s for --soak-minutes, default 10, for the
 * relay JSON and then the polling relay); `--soak` runs only the soak, `--no-soak` skips it.
 * Postgres runs with fsync on (OUTBOX_PG_FSYNC=off for quick runs; the report says which).
 * `--relay-node-flags="..."` (with "=": the value starts with a dash) adds Node flags to the relays' processes only (e.g. a V8 heap setting to
 * measure side by side), not to the bench's own build and runner as NODE_OPTIONS would.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { OPTIONS } from '../src/config/options.js';
import * as p from '../src/config/parsers.js';
import { dropKafkajsTimerWarning } from '../src/observe/process-warnings.js';
import { BUILD_DIR, CONTENDERS as REGISTRY, isCeiling, isOptIn, isRelay, RENAMED, type ContenderName, type Services } from './lib/contenders.js';
import { Database } from './lib/db.js';
import { flag, nodeFlags } from './lib/flags.js';
import { fetchDebezium } from './lib/debezium.js';
import { KafkaTools } from './lib/kafka.js';
import { drain, steady, type DrainResult, type DrainWorkload, type KafkaFor, type SteadyResult } from './lib/measure.js';
import { machineDescription, progress } from './lib/proc.js';
import { findRecvlogical } from './lib/recvlogical.js';
import { soak, type SoakResult } from './lib/soak.js';
import { SecureKafka, upBenchStack } from './lib/stack.js';
import { renderChart, renderSoakChart } from './lib/chart.js';
import { renderReport, type BenchRun } from './lib/report.js';

// The bench's own Kafka clients are kafkajs too: its harmless timer warning stays off the progress lines, as in the relay.
dropKafkajsTimerWarning();

const REPO = fileURLToPath(new URL('..', import.meta.url));
const STACK_DEFAULTS: Record<string, string> = {
  OUTBOX_STACK_DIR: join(tmpdir(), 'outbox-relay-bench-stack'),
  OUTBOX_PG_PORT: '57432',
  OUTBOX_KAFKA_PORT: '61092',
  OUTBOX_KAFKA_CONTROLLER_PORT: '61093',
  OUTBOX_REGISTRY_PORT: '60081',
  OUTBOX_REGISTRY_MGMT_PORT: '60082',
};
/**
 * The secured broker's (--secure), only in the bench's own stack dir: `scripts/stack.sh env`
 * prints its ports from these variables, so a stack named by OUTBOX_STACK_DIR keeps its own.
 */
const OWN_STACK_SECURE_PORTS: Record<string, string> = {
  OUTBOX_SECURE_KAFKA_SASL_PORT: '61501',
  OUTBOX_SECURE_KAFKA_MTLS_PORT: '61502',
  OUTBOX_SECURE_KAFKA_INTERNAL_PORT: '61503',
  OUTBOX_SECURE_KAFKA_CONTROLLER_PORT: '61504',
};

const SECURE = 'relay-json-sasl-ssl';
const CONTENDERS = Object.keys(REGISTRY) as ContenderName[];
/** The soak's contenders and offered rate. */
const SOAK_CONTENDERS: readonly ContenderName[] = ['relay-json', 'polling'];
const SOAK_RATE = 2000;

/** The command line: a mistyped flag or a bad value stops the bench before it builds anything. */
function benchFlags() {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      'no-debezium': { type: 'boolean', default: false },
      profile: { type: 'boolean', default: false },
      secure: { type: 'boolean', default: false },
      compression: { type: 'boolean', default: false },
      only: { type: 'string' },
      note: { type: 'string', default: '' },
      events: { type: 'string' },
      payload: { type: 'string' },
      render: { type: 'string' },
      soak: { type: 'boolean', default: false },
      'soak-minutes': { type: 'string' },
      'no-soak': { type: 'boolean', default: false },
      'relay-node-flags': { type: 'string', default: '' },
      repeat: { type: 'string' },
    },
    strict: true,
    allowPositionals: false,
  });
  const only = values.only === undefined ? null : new Set(flag('only', values.only, p.commaList('relay-json,pg-recvlogical')));
  for (const name of only ?? []) if (!(CONTENDERS as readonly string[]).includes(name)) throw new Error(`--only ${name}: no such contender (${CONTENDERS.join(', ')})`);
  if (only?.has(SECURE) && !values.secure) throw new Error(`--only ${SECURE} needs --secure (which starts the secured broker)`);
  if (only && !only.has(SECURE) && values.secure) throw new Error(`--secure runs ${SECURE}, which --only leaves out`);
  if (values.soak && values['no-soak']) throw new Error('--soak and --no-soak contradict each other');
  if (values.soak && values.quick) throw new Error('--soak runs only the soak: leave out --quick (shorten it with --soak-minutes)');
  return {
    quick: values.quick,
    noDebezium: values['no-debezium'],
    profile: values.profile,
    secure: values.secure,
    compression: values.compression,
    note: values.note,
    render: values.render,
    only,
    /** Backlog size of the small drains (default 200k, 20k with --quick). */
    events: values.events === undefined ? null : flag('events', values.events, p.integer(1, 100_000_000)),
    /** Payload bytes of the --quick drains (default 300). */
    payload: values.payload === undefined ? 300 : flag('payload', values.payload, p.integer(1, 1_000_000)),
    /** Only the soak (--soak); the full run ends with it (not --quick, not --no-soak). */
    soakOnly: values.soak,
    soak: values.soak || (!values.quick && !values['no-soak']),
    soakMinutes: values['soak-minutes'] === undefined ? 10 : flag('soak-minutes', values['soak-minutes'], p.integer(1, 24 * 60)),
    relayNodeFlags: nodeFlags('relay-node-flags', values['relay-node-flags']),
    /** Drains of each CDC contender per load (Debezium: one), the median reported (default 3, 1 with --quick). */
    repeat: values.repeat === undefined ? (values.quick ? 1 : 3) : flag('repeat', values.repeat, p.integer(1, 9)),
  };
}

let flags: ReturnType<typeof benchFlags>;
try {
  flags = benchFlags();
} catch (error) {
  progress(`usage: ${(error as Error).message}`);
  process.exit(2);
}
const { quick, noDebezium, profile, secure, compression, note, only, events: eventsOverride, payload: quickPayload, soakOnly, soakMinutes, repeat } = flags;

async function main(): Promise<void> {
  if (flags.render !== undefined) return render(flags.render);
  const began = Date.now();
  const ownStack = process.env.OUTBOX_STACK_DIR === undefined;
  const env = await upBenchStack({ ...STACK_DEFAULTS, ...(ownStack ? OWN_STACK_SECURE_PORTS : {}) }, ['pg', 'kafka', 'registry']);
  const secureKafka = secure ? await SecureKafka.up(process.env.OUTBOX_STACK_DIR!) : null;
  let results: BenchRun;
  try {
    results = await measure(env, secureKafka, began);
  } finally {
    await secureKafka?.down();
  }

  const outDir = join(REPO, 'bench', 'results');
  mkdirSync(outDir, { recursive: true });
  // A second run on the same day gets -2, -3...: earlier results stay for comparison.
  const base = `${results.date}${quick ? '-quick' : soakOnly ? '-soak' : ''}`;
  let stem = base;
  for (let n = 2; existsSync(join(outDir, `${stem}.json`)); n++) stem = `${base}-${n}`;
  writeFileSync(join(outDir, `${stem}.json`), JSON.stringify(results, null, 2));
  writeResults(outDir, stem, results);
  progress(`wrote bench/results/${stem}.md and its charts in ${results.minutes.toFixed(1)} min${profile ? `; CPU profiles in ${join(BUILD_DIR, 'profiles')}` : ''}`);
  progress(`the stack is still up; stop it with: OUTBOX_STACK_DIR=${process.env.OUTBOX_STACK_DIR} scripts/stack.sh down`);
}

/** Every contender on every workload, against the stack of `env` (and the secured broker with --secure). */
async function measure(env: Record<string, string>, secureKafka: SecureKafka | null, began: number): Promise<BenchRun> {
  let debeziumHome: string | null = null;
  let debeziumNote = '';
  if (!soakOnly && !noDebezium && want('debezium')) {
    try {
      debeziumHome = await fetchDebezium();
    } catch (error) {
      debeziumNote = `Debezium could not be fetched: ${(error as Error).message.split('\n')[0]}`;
      progress(debeziumNote);
    }
  } else debeziumNote = 'Debezium skipped (--no-debezium or --only).';

  const contenders = soakOnly ? [] : CONTENDERS.filter((c) => want(c) && (c !== 'debezium' || debeziumHome));
  const db = new Database(env.DATABASE_URL!);
  // The stack's cluster keeps the fsync it was created with (initdb): set the run's for the run.
  const restoreFsync = await db.setForRun('fsync', process.env.OUTBOX_PG_FSYNC!);
  const serverMajor = Math.floor(Number(await db.setting('server_version_num')) / 10_000);
  const recvlogical = contenders.includes('pg-recvlogical') ? findRecvlogical(serverMajor) : null;
  if (contenders.includes('pg-recvlogical')) progress(recvlogical ? `ceiling: ${recvlogical.path} (${recvlogical.version})` : 'ceiling: no pg_recvlogical found: the × ceiling column stays empty');
  const kafka = new KafkaTools({ brokers: env.KAFKA_BROKERS!.split(',') });
  const kafkaFor: KafkaFor = (contender) => (contender === SECURE && secureKafka ? secureKafka.kafka : kafka);
  // Made by the contender that needs it (Debezium), not here: the stack dir may be shared.
  const workDir = join(process.env.OUTBOX_STACK_DIR!, 'bench');
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
    relayNodeArgs: [...(profile ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []), ...flags.relayNodeFlags],
    recvlogical: recvlogical?.path ?? null,
    avroEnv: avroEnv(),
    secureKafkaEnv: secureKafka?.relayEnv ?? null,
    // scripts/stack/kafka.sh's log.dirs: the bench reads what each drained topic takes there.
    kafkaLogDir: join(process.env.OUTBOX_STACK_DIR!, 'kafka', 'data'),
  };

  // Polling relay: pick its best batch size on a small backlog first (it drains fastest with
  // big batches; the interval only matters when idle).
  let services = baseServices;
  const tuning: { batch: number; eventsPerSecond: number }[] = [];
  if (contenders.includes('polling')) {
    const events = eventsOverride ? Math.max(1000, Math.round(eventsOverride / 2)) : quick ? 10_000 : 40_000;
    for (const batch of [100, 500, 1000, 2000, 5000]) {
      const [result] = await drain(db, kafkaFor, { ...baseServices, pollingBatch: batch }, { events, rowsPerTx: 1, payloadBytes: 300, contenders: ['polling'], repeat: 1 });
      tuning.push({ batch, eventsPerSecond: result!.eventsPerSecond });
      progress(`polling tuning: batch ${batch}: ${Math.round(result!.eventsPerSecond)} events/s`);
    }
    const best = tuning.reduce((a, b) => (b.eventsPerSecond > a.eventsPerSecond ? b : a));
    services = { ...baseServices, pollingBatch: best.batch };
    progress(`polling relay: batch ${best.batch} rows per poll, ${baseServices.pollingIdleMs} ms sleep after a short poll`);
  }

  const small = eventsOverride ?? (quick ? 20_000 : 200_000);
  const all = contenders;
  const cdcOnly = contenders.filter((c) => isCeiling(c) || isRelay(c));
  const workloads: DrainWorkload[] = contenders.length === 0 ? [] : [
    { events: small, rowsPerTx: 1, payloadBytes: quickPayload, contenders: all, repeat },
    { events: small, rowsPerTx: 100, payloadBytes: quickPayload, contenders: all, repeat },
    ...(quick
      ? []
      : [
          { events: small, rowsPerTx: 1, payloadBytes: 2000, contenders: all, repeat },
          { events: small, rowsPerTx: 100, payloadBytes: 2000, contenders: all, repeat },
          { events: 1_000_000, rowsPerTx: 1, payloadBytes: 300, contenders: cdcOnly, repeat },
        ]),
  ];
  const drains: DrainResult[] = [];
  for (const workload of workloads) drains.push(...(await drain(db, kafkaFor, services, workload)));

  const steadyResults: SteadyResult[] = [];
  const rates = quick ? [1000] : [1000, 5000];
  const seconds = quick ? 8 : 20;
  for (const rate of rates) {
    for (const contender of contenders.filter((c) => !isCeiling(c) && !isOptIn(c))) {
      steadyResults.push(await steady(db, kafkaFor, services, contender, rate, seconds));
    }
  }

  const soakResults: SoakResult[] = [];
  if (flags.soak) for (const contender of SOAK_CONTENDERS.filter(want)) soakResults.push(await soak(db, kafkaFor, services, contender, SOAK_RATE, soakMinutes));

  const results: BenchRun = {
    date: new Date().toISOString().slice(0, 10),
    quick,
    args: process.argv.slice(2).join(' '),
    minutes: (Date.now() - began) / 60_000,
    machine: machineDescription(),
    postgres: await db.description(),
    ...(recvlogical ? { ceiling: recvlogical.version } : {}),
    // This build has the Avro format (the report of an older run may say otherwise).
    avro: true,
    debeziumNote,
    note,
    polling: { batch: services.pollingBatch, idleMs: services.pollingIdleMs, tuning },
    drains,
    steady: steadyResults,
    settled: true,
    ...(soakResults.length > 0 ? { soak: soakResults } : {}),
    ...(secureKafka ? { secureTls: secureKafka.tls } : {}),
  };
  await db.clear(true);
  await restoreFsync();
  await db.close();
  await kafka.close();
  return results;
}

function writeResults(outDir: string, stem: string, results: BenchRun): void {
  const main = results.drains.length + results.steady.length > 0;
  const charts = { main: main ? `${stem}.png` : null, soak: results.soak?.length ? `${stem}${main ? '-soak' : ''}.png` : null };
  if (charts.main) writeFileSync(join(outDir, charts.main), renderChart(results));
  if (charts.soak) writeFileSync(join(outDir, charts.soak), renderSoakChart(results));
  writeFileSync(join(outDir, `${stem}.md`), renderReport(results, charts));
}

/** `--render bench/results/<stem>.json`: the report and chart again from a run's raw results. */
function render(file: string): void {
  // Runs before the pg_recvlogical ceiling called the relay-stages contender `ceiling`.
  const raw = JSON.parse(readFileSync(file, 'utf8'), (key, value: unknown) => (key === 'contender' && typeof value === 'string' ? (RENAMED[value] ?? value) : value)) as BenchRun;
  const results: BenchRun = { ...raw, drains: raw.drains ?? [], steady: raw.steady ?? [] };
  writeResults(dirname(file), basename(file, '.json'), results);
  progress(`wrote ${file.replace(/\.json$/, '')}.md and its charts`);
}

function want(contender: string): boolean {
  if (only) return only.has(contender);
  return (contender !== SECURE || secure) && (!isOptIn(contender as ContenderName) || compression);
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

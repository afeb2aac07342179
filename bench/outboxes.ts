/**
 * `npm run bench:outboxes [-- --events N] [-- --tenants 1000,4000] [-- --rounds R] [-- --cli PATH] [-- --against PATH] [-- --keep-stack] [-- --profile]`
 *
 * Several outboxes through one slot, side by side in one run: the relay's drain of the same
 * backlog of N events written
 *   table         as rows of one outbox table (OUTBOX_TABLE alone, as before)
 *   messages      as transactional pg_logical_emit_message (a message outbox)
 *   tenants-K     as rows spread over K tenant schemas' tables ({"tables": "bench_tenant_*.event_outbox"})
 * Each round writes the backlog with the relay stopped, checkpoints, starts the relay and times it from its
 * start until the slot confirmed the end of the backlog (every event acknowledged by Kafka);
 * the case's slot moved to the WAL's end before its backlog is written (it decodes that backlog
 * alone); the cases alternate in each round. Reports events/s and the relay's CPU per event, and each
 * case against `table`; also how long setup took to find and publish the K tenants' tables.
 * Then the start alone, R times a case with nothing to drain: the relay's CPU (/proc) and time
 * until its session held the slot, each case against `table` (issue 62's floor: 10,000 tenant
 * tables within 2x of one table's CPU).
 *
 * The relay is `--cli` (default dist/cli.js, built first by `npm run build`; another build is
 * run as it is, and dist/ left alone: on a checkout others test from, make one's own with
 * `npx tsc -p tsconfig.build.json --outDir <dir>/dist`, <dir> under the repository, e.g.
 * node_modules/.cache/<name>, with `sql` linked into <dir>).
 * `--against` another build's cli.js: its starts are measured too, alternated with --cli's, in
 * the same run (before and after a change, side by side on the same machine's load).
 *
 * Starts its own stack (pg, kafka) in a temp OUTBOX_STACK_DIR on ports apart from the test
 * stack's and the other benches', and takes it down at the end (unless --keep-stack, or a stack
 * named by OUTBOX_STACK_DIR). Writes bench/results/<date>-outboxes.md. `--profile` runs each drain's
 * relay with --cpu-prof, a file per case and round in node_modules/.cache/outbox-relay-bench/
 * profiles/outboxes (read them with `npx tsx bench/profile-summary.ts <file>`).
 */
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import * as p from '../src/config/parsers.js';
import { SEMI_SPACE_FLAG } from '../src/observe/runtime-flags.js';
import { flag } from './lib/flags.js';
import { Child, machineBusyPercent, machineCpu, machineDescription, progress, run, sleep } from './lib/proc.js';
import { BUILD_DIR } from './lib/contenders.js';
import { STACK_SCRIPT, upBenchStack } from './lib/stack.js';
import { median } from './lib/stats.js';
import { writeMarkdownResult } from './lib/results.js';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const STACK_DEFAULTS: Record<string, string> = {
  OUTBOX_STACK_DIR: join(tmpdir(), 'outbox-relay-bench-outboxes-stack'),
  OUTBOX_PG_PORT: '57632',
  OUTBOX_KAFKA_PORT: '61392',
  OUTBOX_KAFKA_CONTROLLER_PORT: '61393',
};
const PAYLOAD = '{"invoice_id":"inv_000000000042","customer_id":"cus_0000000000001234","amount_cents":125000,"currency":"EUR","lines":[{"sku":"plan-pro","qty":1,"unit_cents":125000}],"period":{"start":"2026-11-01","end":"2026-11-30"}}';
const TENANT_PREFIX = 'bench_tenant';
const ROWS_PER_TRANSACTION = 100;
const PROFILE_DIR = join(BUILD_DIR, 'profiles', 'outboxes');
/** The shared checkout's build, made again (`npm run build`) by the bench unless --cli names another. */
const DIST_CLI = join(REPO, 'dist', 'cli.js');

const { values } = parseArgs({
  options: {
    events: { type: 'string', default: '100000' },
    tenants: { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '2' },
    cli: { type: 'string', default: DIST_CLI },
    against: { type: 'string' },
    'keep-stack': { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
  },
});
const events = flag('--events', values.events, p.integer(1_000, 10_000_000));
const tenantCounts = flag('--tenants', values.tenants, p.commaList('1000,4000')).map((each) => flag('--tenants', each, p.integer(1, 10_000)));
const rounds = flag('--rounds', values.rounds, p.integer(1, 10));
const CLI = resolve(values.cli);
/** The builds whose starts are measured: --cli's, and --against's when given. */
const builds = [{ name: 'cli', cli: CLI }, ...(values.against ? [{ name: 'against', cli: resolve(values.against) }] : [])];

interface Case {
  readonly name: string;
  /** The relay's outbox configuration for it. */
  readonly env: Record<string, string>;
  /** Writes the backlog: `events` events, ROWS_PER_TRANSACTION per transaction. */
  readonly write: (client: pg.ClientBase, round: string) => Promise<void>;
}

interface Drain {
  readonly seconds: number;
  /** From the relay's start until its session held the slot: its checks of every outbox table, then START_REPLICATION. */
  readonly startSeconds: number;
  readonly relayCpuSeconds: number;
  readonly busyPercent: number;
}

/** A start with nothing to drain, until the relay's session held the slot. */
interface Start {
  readonly seconds: number;
  readonly relayCpuSeconds: number;
}

async function main(): Promise<void> {
  const ownStack = process.env.OUTBOX_STACK_DIR === undefined;
  const env = await upBenchStack(STACK_DEFAULTS, ['pg', 'kafka'], { buildRelay: CLI === DIST_CLI });
  const pool = new pg.Pool({ connectionString: env.DATABASE_URL, max: 4 });
  try {
    const cases = [tableCase(), messageCase(), ...tenantCounts.map((count) => tenantCase(count))];
    // The table the tenants' tables are made like; then the tenants, before their setup finds them.
    await run(process.execPath, [CLI, 'setup'], { env: relayEnv(env, cases[0]!), cwd: REPO });
    for (const count of tenantCounts) await makeTenants(pool, `${TENANT_PREFIX}${count}`, count);
    const setupSeconds = new Map<string, number>();
    for (const each of cases) setupSeconds.set(each.name, await setUp(env, each));
    const drains = new Map<string, Drain[]>(cases.map((each) => [each.name, []]));
    for (let round = 1; round <= rounds; round += 1) {
      // Alternated, so that no case always runs on a warmer (or busier) machine.
      for (const each of round % 2 === 1 ? cases : [...cases].reverse()) {
        progress(`round ${round}/${rounds}: ${each.name}, writing ${events} events`);
        // Every slot decodes all the WAL after its position: moved to the end first, the case's
        // drain decodes its own backlog, not the other cases' written since its last round.
        await advanceSlot(pool, relayEnv(env, each).OUTBOX_SLOT!);
        const client = await pool.connect();
        try {
          await each.write(client, `r${round}`);
        } finally {
          client.release();
        }
        // The backlog's WAL flushed to the data files before the clock starts: 300,000 rows are a
        // few hundred MB of WAL, and no drain should pay for the checkpoint an earlier one's
        // writing made due.
        await pool.query('CHECKPOINT');
        const drain = await drainOnce(pool, env, each, `r${round}`);
        progress(`round ${round}/${rounds}: ${each.name} drained ${events} events in ${drain.seconds.toFixed(1)} s (${Math.round(events / drain.seconds)}/s)`);
        drains.get(each.name)!.push(drain);
      }
    }
    const starts = new Map<string, Start[]>(cases.flatMap((each) => builds.map((build) => [startKey(each, build.name), []] as const)));
    for (let round = 1; round <= rounds; round += 1) {
      for (const each of round % 2 === 1 ? cases : [...cases].reverse()) {
        for (const build of round % 2 === 1 ? builds : [...builds].reverse()) {
          await advanceSlot(pool, relayEnv(env, each).OUTBOX_SLOT!);
          const start = await startOnce(pool, env, each, build.cli);
          progress(`starts ${round}/${rounds}: ${each.name} (${build.name}) ${start.seconds.toFixed(2)} s, relay CPU ${(start.relayCpuSeconds * 1000).toFixed(0)} ms`);
          starts.get(startKey(each, build.name))!.push(start);
        }
      }
    }
    writeReport(cases, drains, setupSeconds, starts);
  } finally {
    await pool.end();
    if (ownStack && !values['keep-stack']) {
      progress(`taking the bench's stack down (OUTBOX_STACK_DIR=${process.env.OUTBOX_STACK_DIR} scripts/stack.sh down pg kafka)`);
      await run(STACK_SCRIPT, ['down', 'pg', 'kafka'], { cwd: REPO });
    }
  }
}

function relayEnv(env: Record<string, string>, each: Case): Record<string, string> {
  const slot = `bench_${each.name.replaceAll('-', '_')}`;
  return {
    DATABASE_URL: env.DATABASE_URL!,
    KAFKA_BROKERS: env.KAFKA_BROKERS!,
    OUTBOX_SLOT: slot,
    OUTBOX_PUBLICATION: slot,
    OUTBOX_TOPIC_TEMPLATE: `bench-outboxes.{aggregate_type}`,
    OUTBOX_DEAD_LETTER_TOPIC: 'bench-outboxes.dead-letter',
    OUTBOX_HTTP_PORT: '0',
    LOG_LEVEL: 'warn',
    ...each.env,
  };
}

/** Publication and slot (for tenants, finding and publishing each one's table): timed, as an operator's first setup is. */
async function setUp(env: Record<string, string>, each: Case): Promise<number> {
  const started = performance.now();
  await run(process.execPath, [CLI, 'setup'], { env: relayEnv(env, each), cwd: REPO });
  const seconds = (performance.now() - started) / 1000;
  progress(`${each.name}: setup took ${seconds.toFixed(1)} s`);
  return seconds;
}

function tableCase(): Case {
  return {
    name: 'table',
    env: { OUTBOX_TABLE: 'public.bench_outbox' },
    write: (client, round) => insertRows(client, round, () => 'public.bench_outbox'),
  };
}

function messageCase(): Case {
  return {
    name: 'messages',
    env: { OUTBOX_SOURCES: JSON.stringify([{ messages: 'outbox' }]) },
    write: async (client, round) => {
      for (let start = 0; start < events; start += ROWS_PER_TRANSACTION) {
        const count = Math.min(ROWS_PER_TRANSACTION, events - start);
        await client.query(
          `SELECT count(pg_logical_emit_message(true, 'outbox', json_build_object('event_id', $1::text || g, 'aggregate_type', 'invoice', 'aggregate_id', 'inv_' || (g % 1000),
             'event_type', 'invoice.paid', 'payload', $2::json)::text)) FROM generate_series($3::int, $4::int) g`,
          [`${round}-`, PAYLOAD, start, start + count - 1],
        );
      }
    },
  };
}

function tenantCase(tenants: number): Case {
  const prefix = `${TENANT_PREFIX}${tenants}`;
  return {
    name: `tenants-${tenants}`,
    env: { OUTBOX_SOURCES: JSON.stringify([{ tables: `${prefix}_*.event_outbox` }]) },
    write: async (client, round) => {
      // Each transaction writes to one tenant, the tenants taken in turn.
      let batch = 0;
      await insertRows(client, round, () => `${prefix}_${String((batch++ % tenants) + 1).padStart(5, '0')}.event_outbox`);
    },
  };
}

async function makeTenants(pool: pg.Pool, prefix: string, tenants: number): Promise<void> {
  progress(`${prefix}: making ${tenants} tenant schemas`);
  const client = await pool.connect();
  try {
    for (let tenant = 1; tenant <= tenants; tenant += 1) {
      const schema = `${prefix}_${String(tenant).padStart(5, '0')}`;
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}; CREATE TABLE IF NOT EXISTS ${schema}.event_outbox (LIKE public.bench_outbox INCLUDING ALL)`);
    }
  } finally {
    client.release();
  }
}

async function insertRows(client: pg.ClientBase, round: string, tableOf: () => string): Promise<void> {
  for (let start = 0; start < events; start += ROWS_PER_TRANSACTION) {
    const count = Math.min(ROWS_PER_TRANSACTION, events - start);
    await client.query(
      `INSERT INTO ${tableOf()} (event_id, aggregate_type, aggregate_id, event_type, payload)
       SELECT $1::text || g, 'invoice', 'inv_' || (g % 1000), 'invoice.paid', $2::jsonb FROM generate_series($3::int, $4::int) g`,
      [`${round}-`, PAYLOAD, start, start + count - 1],
    );
  }
}

/** Moves the slot to the WAL's end once the last relay's session has let it go (a slot held by a walsender cannot be moved). */
async function advanceSlot(pool: pg.Pool, slot: string): Promise<void> {
  const deadline = performance.now() + 120_000;
  for (;;) {
    const { rows } = await pool.query<{ active: boolean }>('SELECT active FROM pg_replication_slots WHERE slot_name = $1', [slot]);
    if (rows[0] && !rows[0].active) break;
    if (performance.now() > deadline) throw new Error(`slot ${slot} is still held by a session after 2 minutes`);
    await sleep(100);
  }
  await pool.query('SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())', [slot]);
}

/** Starts the relay on the backlog and times it until the slot confirmed the WAL written before it started. */
async function drainOnce(pool: pg.Pool, env: Record<string, string>, each: Case, round: string): Promise<Drain> {
  const relay = relayEnv(env, each);
  const { rows } = await pool.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
  const target = rows[0]!.lsn;
  const machine = machineCpu();
  const started = performance.now();
  const profile = values.profile ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`, `--cpu-prof-name=${each.name}-${round}.cpuprofile`] : [];
  // As `outbox-relay` and the Dockerfile run it (without the flag the relay warns at start).
  const child = new Child(`relay ${each.name}`, process.execPath, [SEMI_SPACE_FLAG, ...profile, CLI, 'run'], relay, REPO);
  let cpu = 0;
  let startSeconds: number | null = null;
  try {
    for (;;) {
      const { rows: slot } = await pool.query<{ done: boolean; active: boolean }>('SELECT confirmed_flush_lsn >= $2::pg_lsn AS done, active FROM pg_replication_slots WHERE slot_name = $1', [relay.OUTBOX_SLOT, target]);
      cpu = child.usage()?.cpuSeconds ?? cpu;
      if (startSeconds === null && slot[0]?.active) startSeconds = (performance.now() - started) / 1000;
      if (slot[0]?.done) break;
      if (!child.running) throw new Error(`the relay (${each.name}) exited (${child.ended}):\n${child.tail()}`);
      if (performance.now() - started > 600_000) throw new Error(`the relay (${each.name}) did not drain within 10 minutes:\n${child.tail()}`);
      await sleep(50);
    }
    const seconds = (performance.now() - started) / 1000;
    return { seconds, startSeconds: startSeconds ?? seconds, relayCpuSeconds: cpu, busyPercent: machineBusyPercent(machine) };
  } finally {
    await child.stop();
  }
}

function startKey(each: Case, build: string): string {
  return `${each.name} ${build}`;
}

/**
 * Starts `cli`'s relay on the case's slot with nothing to drain and stops it once its session
 * holds the slot: the CPU it took until then (/proc, read as the slot turns active: nothing
 * after the start is counted, there is nothing to stream) and the time.
 */
async function startOnce(pool: pg.Pool, env: Record<string, string>, each: Case, cli: string): Promise<Start> {
  const relay = relayEnv(env, each);
  const started = performance.now();
  const child = new Child(`relay ${each.name} (${cli})`, process.execPath, [SEMI_SPACE_FLAG, cli, 'run'], relay, REPO);
  try {
    for (;;) {
      const { rows } = await pool.query<{ active: boolean }>('SELECT active FROM pg_replication_slots WHERE slot_name = $1', [relay.OUTBOX_SLOT]);
      const usage = child.usage();
      if (rows[0]?.active && usage) return { seconds: (performance.now() - started) / 1000, relayCpuSeconds: usage.cpuSeconds };
      if (!child.running) throw new Error(`the relay (${each.name}, ${cli}) exited (${child.ended}):\n${child.tail()}`);
      if (performance.now() - started > 300_000) throw new Error(`the relay (${each.name}, ${cli}) did not start within 5 minutes:\n${child.tail()}`);
      await sleep(10);
    }
  } finally {
    await child.stop();
  }
}

function writeReport(cases: readonly Case[], drains: ReadonlyMap<string, Drain[]>, setupSeconds: ReadonlyMap<string, number>, starts: ReadonlyMap<string, Start[]>): void {
  const rate = (name: string) => median(drains.get(name)!.map((drain) => events / drain.seconds));
  const cpu = (name: string) => median(drains.get(name)!.map((drain) => (drain.relayCpuSeconds * 1e6) / events));
  const baseline = rate('table');
  const start = (name: string) => median(drains.get(name)!.map((drain) => drain.startSeconds));
  const lines = [
    `# Several outboxes: the relay's drain of one backlog, by how it was written (${new Date().toISOString().slice(0, 10)})`,
    '',
    `\`npm run bench:outboxes -- --events ${events} --tenants ${tenantCounts.join(',')} --rounds ${rounds}${CLI === DIST_CLI ? '' : ` --cli ${values.cli}`}${values.against ? ` --against ${values.against}` : ''}\`; ${machineDescription()}; Postgres fsync ${process.env.OUTBOX_PG_FSYNC}.`,
    `Each round: ${events} events written with the relay stopped (${ROWS_PER_TRANSACTION} per transaction) and a checkpoint, then the relay's run until the slot confirmed them all (the case's slot at the WAL's end before its backlog: it decodes no other case's); cases alternate per round; medians of ${rounds} rounds.`,
    '',
    '| case | events/s | against one table | relay CPU µs/event | run start s | start against one table | setup s | machine busy % |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...cases.map((each) => `| ${each.name} | ${Math.round(rate(each.name))} | ${((rate(each.name) / baseline) * 100).toFixed(0)}% | ${cpu(each.name).toFixed(1)} | ${start(each.name).toFixed(2)} | ${(start(each.name) / start('table')).toFixed(2)}× | ${setupSeconds.get(each.name)!.toFixed(1)} | ${median(drains.get(each.name)!.map((drain) => drain.busyPercent)).toFixed(0)} |`),
    '',
    'Floors: tenants-1000 within 20% of one table (≥ 80%); messages ≥ one table; the start with 10,000 tenant tables within 2× of one table\'s. "run start": from the relay\'s start until its session held the slot (its checks of every outbox table, then START_REPLICATION).',
    '',
    `The start alone, nothing to drain (${rounds} starts a case${builds.length > 1 ? ' and build, the builds alternated' : ''}, medians): the relay's CPU (/proc) and time from its start until its session held the slot.`,
    '',
    '| case | build | relay CPU until streaming ms | against one table | start s | against one table |',
    '| --- | --- | ---: | ---: | ---: | ---: |',
    ...cases.flatMap((each) =>
      builds.map((build) => {
        const cpuMs = (key: string) => median(starts.get(key)!.map((start) => start.relayCpuSeconds * 1000));
        const seconds = (key: string) => median(starts.get(key)!.map((start) => start.seconds));
        const key = startKey(each, build.name);
        const one = startKey(cases[0]!, build.name);
        return `| ${each.name} | ${build.cli} | ${cpuMs(key).toFixed(0)} | ${(cpuMs(key) / cpuMs(one)).toFixed(2)}× | ${seconds(key).toFixed(2)} | ${(seconds(key) / seconds(one)).toFixed(2)}× |`;
      }),
    ),
    '',
  ];
  writeMarkdownResult('outboxes', lines);
}

await main();

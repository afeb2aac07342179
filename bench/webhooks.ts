/**
 * `npm run bench:webhooks [-- --quick] [-- --deliveries N] [-- --cases 1,100,10000,10000x1,10x10,10000x10,latency]
 * [-- --endpoints 1,100,10000] [-- --kafka-clients kafkajs,librdkafka] [-- --latency-seconds S]
 * [-- --profile] [-- --webhooks-node-flags="--flag ..."] [-- --ab-claims] [-- --before-cli <dist/cli.js>] [-- --keep-stack]`
 *
 * What `outbox-relay webhooks` delivers, beside its durable loop and its ceiling, in one run (on
 * a shared 2-core machine the ratios are what matters):
 *   1. deliveries/s to a fast local receiver (bench/lib/webhook-receiver.ts, a process of its
 *      own) in each throughput case of --cases, each case the same total deliveries (events ×
 *      the endpoints each event is owed): `N` is N platform-wide endpoints, each owed every
 *      event (1, 100 and 10,000 by default); `CxK` is C customers of K endpoints each, the
 *      events spread evenly over the customers, each owed to its customer's K (10000x1: 10,000
 *      customers of one endpoint; 10x10 and 10000x10: 100 and 100,000 endpoints, 10 deliveries
 *      an event either way). The events are produced to a fresh topic with kafkajs in the
 *      relay's record format, each with its customer in a `customer_id` header (the rule
 *      OUTBOX_WEBHOOK_CUSTOMER_FROM=header:customer_id) and in its payload (no relay runs), then
 *      `node dist/cli.js webhooks` is started and timed until the store has every delivery
 *      'delivered'; CPU per delivery and per event of it and of Postgres, over the whole run
 *      and over its steady part (first delivery seen to the last);
 *   2. the ceiling right after each case (bench/lib/webhook-ceiling.ts): the same (event,
 *      endpoint) pairs sent by a plain loop with the same client and signing, nothing else; for
 *      reference, no floor;
 *   3. event (Kafka timestamp) to first attempt at 1,000 events/s, 1 endpoint, p99 ≤ 100 ms: in
 *      three phases of one webhooks process, its first seconds of load right after it starts
 *      (the group join included; reported, no floor), the steady rate after them (the floor),
 *      and a burst after a quiet spell (the floor too);
 *   4. the delivery store's size per 1M deliveries, for each case of (1);
 *   5. the durable loop right after each ceiling (bench/lib/webhook-durable-loop.ts): the case's
 *      topic consumed, each event's endpoints found as the process finds them, sent and every
 *      delivery recorded once, durably, before its offset is committed, and nothing else: what
 *      any durable design can reach here, at most; floor: the webhooks process ≥ 90% of it;
 *   6. fan-out: CPU per event of the webhooks process and of Postgres in the case with the
 *      most endpoints against the one with the fewest among customer cases of the same
 *      endpoints per customer (10000x10 against 10x10): flat, i.e. at most 1.2 times;
 *   7. with --ab-claims, an A/B of the fast path in each throughput case: right after (1), the
 *      webhooks process again on the same topic and client, a fresh store schema (its endpoints
 *      as the case's) and a fresh consumer group, with OUTBOX_WEBHOOK_RETRY_SCHEDULE's first
 *      delay 1 ms instead of 0 (CLAIMS_SCHEDULE): every delivery recorded due (inserted), claimed
 *      (updated), sent and written again with its result (updated, its attempt a row of
 *      attempts), where (1) sends a new delivery to a healthy endpoint first and inserts it once,
 *      with its result. Both stores are set up before the events are produced (an endpoint is
 *      owed only what was produced after it was added). Deliveries/s, CPU per delivery of the
 *      process and of Postgres, WAL per delivery of both, and their ratio (sent first ÷
 *      claimed); no floor. Before each of the two runs the server is settled (VACUUM (ANALYZE),
 *      CHECKPOINT, sync), so that neither pays for what the other left.
 *   8. with --before-cli <path to another build's dist/cli.js> (a worktree of an earlier commit,
 *      built: `npx tsc -p tsconfig.build.json` there), that build beside this one in the same run:
 *      right after (1), the other build's webhooks process on the same topic and client, a
 *      fresh store (set up by that build's CLI, before the events are produced) and consumer
 *      group, settled before it as (1) is; and (3) again with it, before this build's (each
 *      side first once: (1) runs this build first), each latency run settled first too. The
 *      report's "before and after" table sets each of its figures against this build's:
 *      deliveries/s and its share of the case's durable loop, CPU per delivery of the process
 *      and of Postgres (sessions), WAL per delivery, first-attempt p99.
 * (1) to (3) run once for each Kafka client the consumer can be on (OUTBOX_KAFKA_CLIENT), each
 * throughput case right after the other client's, each with its own ceiling run. Before the
 * first case, a warm-up on each client (warmUp: the broker's JVM has just started); before
 * each webhooks run and each durable loop, the server settled the same way (settle). `--endpoints
 * N,...` is the cases N,... (platform-wide) and latency, as before --cases existed.
 * Starts its own stack (pg, kafka) in a temp OUTBOX_STACK_DIR on ports apart from the test
 * stack's and `npm run bench`'s, builds, and takes that stack down at the end (not with
 * --keep-stack, nor a stack named by OUTBOX_STACK_DIR). Writes
 * bench/results/<date>-webhooks[-quick][-N].md and .json. `--profile` runs every webhooks
 * process with --cpu-prof (read them with `npx tsx bench/profile-summary.ts <file>`; a
 * process that does not exit on SIGTERM within 20 s is killed and leaves none);
 * `--webhooks-node-flags="..."` (with "=": the value starts with a dash) adds Node flags to the
 * webhooks processes only. The report names the commit built and the files of src/ changed
 * since: dist/ is built from the working tree as it is.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { Message } from 'kafkajs';
import * as p from '../src/config/parsers.js';
import type { OutboxEvent } from '../src/event.js';
import { KAFKA_CLIENT_NAMES, type KafkaClientName } from '../src/kafka/ports.js';
import { dropKafkajsTimerWarning } from '../src/observe/process-warnings.js';
import { SEMI_SPACE_FLAG } from '../src/observe/runtime-flags.js';
import { eventHeaders } from '../src/transform/headers.js';
import { BUILD_DIR } from './lib/contenders.js';
import { Database } from './lib/db.js';
import { flag, nodeFlags } from './lib/flags.js';
import { drainRate, KafkaTools, percentile, type DrainTiming } from './lib/kafka.js';
import { TOPIC_ROOT } from './lib/load.js';
import { CpuWatch, PostgresCpu } from './lib/pg-cpu.js';
import { int } from './lib/format.js';
import { Child, machineBusyPercent, machineCpu, machineDescription, processUsage, progress, run, sleep } from './lib/proc.js';
import { sourceState } from './lib/source-state.js';
import { STACK_SCRIPT, upBenchStack } from './lib/stack.js';
import type { CeilingArgs } from './lib/webhook-ceiling.js';
import type { DurableLoopArgs } from './lib/webhook-durable-loop.js';
import { renderWebhooksReport, type CeilingResult, type DurableLoopResult, type LatencyCase, type LatencyPhase, type SteadyCpu, type StoreSize, type TableWrites, type ThroughputCase, type WebhooksBenchRun, type WebhooksRunFigures, type ClaimsRun } from './lib/webhook-report.js';

dropKafkajsTimerWarning();

const REPO = fileURLToPath(new URL('..', import.meta.url));
const CLI = join(REPO, 'dist', 'cli.js');
/** As the Dockerfile's entrypoint runs every command; the ceiling runs with them too. */
const NODE_FLAGS = [SEMI_SPACE_FLAG];
/** Not the test stack's (55432, 59092, 58081), nor `npm run bench`'s (57432, 61092, 60081). */
const STACK_DEFAULTS: Record<string, string> = {
  OUTBOX_STACK_DIR: join(tmpdir(), 'outbox-relay-bench-webhooks-stack'),
  OUTBOX_PG_PORT: '57532',
  OUTBOX_KAFKA_PORT: '61192',
  OUTBOX_KAFKA_CONTROLLER_PORT: '61193',
  OUTBOX_REGISTRY_PORT: '60181',
  OUTBOX_REGISTRY_MGMT_PORT: '60182',
};
/** The command's default; the ceiling loop runs this many sends at once too. */
const CONCURRENCY = 200;
/**
 * Every endpoint's own limit: as high as what one process holds (four times its concurrency: an
 * endpoint's limit counts a delivery from its lease until its result is written, the process's
 * only the request), so that the 1-endpoint case measures the process, not the endpoint's limit.
 */
const MAX_IN_FLIGHT = 4 * CONCURRENCY;
/** How the webhooks process finds an event's customer: the header every produced event carries. */
const CUSTOMER_FROM = 'header:customer_id';
/** How the ceiling finds it, from the body it sends: the same customer, in the payload. */
const CEILING_CUSTOMER_FROM = 'payload:/customer_id';
/** Customers of the events of the platform-wide cases (their endpoints receive every customer's). */
const PLATFORM_CASE_CUSTOMERS = 5_000;
const EVENT_TYPE = 'invoice.paid';
const SUBSCRIPTION = 'invoice.*';
const PAYLOAD_BYTES = 300;
/** Any LSN: the relay's header, which the webhooks consumer does not read. */
const COMMIT_LSN = '0/16B3748';
const LATENCY_RATE = 1_000;
/** The latency case's one endpoint: platform-wide, owed every event. */
const LATENCY_SPEC: CaseSpec = { name: 'latency', platformWide: 1, customers: 0, perCustomer: 0 };
/**
 * The latency case's first phase, right after the webhooks process starts: its group join, its
 * connections opened, its hot paths compiled, the fresh store's first rows. A process runs for
 * weeks; the floor is its steady rate after this, and this phase is reported on its own. On the
 * 2-core AMD EPYC machine the first-attempt p50 was still falling 15 s into the load (from 40
 * to 17 ms, kafkajs), and flat from 18 s on.
 */
const START_UP_SECONDS = 20;
/**
 * Quiet before the latency case's last phase, a burst: longer than any idle timeout on the way
 * (node-postgres's pool, 10 s by default; undici's keep-alive, 4 s), so that what a quiet spell
 * closes is opened again within the measured burst.
 */
const QUIET_SECONDS = 15;
const BURST_SECONDS = 5;
/**
 * The claims' run of --ab-claims: the default schedule (0s,5s,5m,30m,2h,5h,10h,10h) with its
 * first delay 1 ms instead of 0. Only a first delay of 0 sends a new delivery at once (the
 * intake's owner, the dispatcher); any other records every delivery due (at 0.8-1.2 ms, its jitter) for the
 * claims, then writes it again with its result. Retries are the same in both runs (none here).
 */
const CLAIMS_SCHEDULE = '1ms,5s,5m,30m,2h,5h,10h,10h';
/** How often the store is asked how many are delivered: a count(*) over the case's deliveries, which every 50 ms would take a core's share from the process measured. */
const POLL_MS = 200;

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    deliveries: { type: 'string' },
    endpoints: { type: 'string' },
    cases: { type: 'string' },
    'kafka-clients': { type: 'string' },
    'latency-seconds': { type: 'string' },
    profile: { type: 'boolean', default: false },
    'webhooks-node-flags': { type: 'string', default: '' },
    'keep-stack': { type: 'boolean', default: false },
    'ab-claims': { type: 'boolean', default: false },
    'before-cli': { type: 'string' },
  },
  strict: true,
  allowPositionals: false,
});
const quick = values.quick;
const abClaims = values['ab-claims'];
/** Another build's CLI, run beside this one's (8). */
const beforeCli = values['before-cli'] === undefined ? null : values['before-cli'];
if (beforeCli !== null && !existsSync(beforeCli)) throw new Error(`--before-cli ${beforeCli}: no such file (build that checkout first: npx tsc -p tsconfig.build.json)`);
/** Per throughput case (events × endpoints). */
const deliveries = values.deliveries === undefined ? (quick ? 10_000 : 100_000) : flag('deliveries', values.deliveries, p.integer(1, 10_000_000));
const DEFAULT_CASES = '1,100,10000,10000x1,10x10,10000x10,latency';
if (values.cases !== undefined && values.endpoints !== undefined) throw new Error('--cases and --endpoints: give one (--endpoints 1,100 is --cases 1,100,latency)');
const caseNames = values.cases !== undefined ? flag('cases', values.cases, p.commaList(DEFAULT_CASES)) : values.endpoints !== undefined ? [...flag('endpoints', values.endpoints, p.commaList('1,100,10000')), 'latency'] : DEFAULT_CASES.split(',');
const throughputSpecs: CaseSpec[] = [];
for (const token of caseNames.flatMap((name) => (name === 'fanout' ? ['10x10', '10000x10'] : [name]))) {
  if (token === 'latency') continue;
  const spec = parseCase(token, values.endpoints !== undefined ? 'endpoints' : 'cases');
  if (!throughputSpecs.some((c) => c.name === spec.name)) throughputSpecs.push(spec);
}
const runLatency = caseNames.includes('latency');
const kafkaClients: readonly KafkaClientName[] = values['kafka-clients'] === undefined ? KAFKA_CLIENT_NAMES : flag('kafka-clients', values['kafka-clients'], p.commaList('kafkajs,librdkafka')).map((name) => flag('kafka-clients', name, p.oneOf(...KAFKA_CLIENT_NAMES)));
const webhooksNodeFlags = nodeFlags('webhooks-node-flags', values['webhooks-node-flags']);
const latencySeconds = values['latency-seconds'] === undefined ? (quick ? 8 : 30) : flag('latency-seconds', values['latency-seconds'], p.integer(1, 3_600));
/** The warm-up's deliveries on each client, before the first case (warmUp). */
const WARM_UP_DELIVERIES = quick ? 5_000 : 30_000;
/** A case that is not done by then is reported with what it delivered, and fails its floor. */
const CASE_TIMEOUT_MS = quick ? 120_000 : 240_000;
const PROFILE_DIR = join(BUILD_DIR, 'profiles');
const STAMP = Date.now().toString(36);
const TOPIC_PREFIX = `${TOPIC_ROOT}webhooks-${STAMP}`;
/** ~300 B of JSON that does not compress to nothing (like real ids and amounts). */
const NOTE = randomBytes(96).toString('hex');

/** A throughput case: platform-wide endpoints, each owed every event, and/or customers of their own endpoints, each owed that customer's events. */
interface CaseSpec {
  /** As given to --cases: `100`, or `10000x1` (customers × endpoints each). */
  readonly name: string;
  readonly platformWide: number;
  readonly customers: number;
  readonly perCustomer: number;
}

/** `N`: N platform-wide endpoints; `CxK`: C customers of K endpoints each. */
function parseCase(token: string, flagName: 'cases' | 'endpoints'): CaseSpec {
  const platform = /^(\d+)$/.exec(token);
  if (platform) return { name: token, platformWide: flag(flagName, platform[1]!, p.integer(1, 100_000)), customers: 0, perCustomer: 0 };
  const customers = /^(\d+)x(\d+)$/.exec(token);
  if (customers) {
    const spec = { name: token, platformWide: 0, customers: flag('cases', customers[1]!, p.integer(1, 1_000_000)), perCustomer: flag('cases', customers[2]!, p.integer(1, 10_000)) };
    if (spec.customers * spec.perCustomer > 1_000_000) throw new Error(`--cases ${token}: more than 1,000,000 endpoints`);
    return spec;
  }
  throw new Error(`--cases: "${token}" is not a case: expected N (platform-wide endpoints), CxK (C customers of K endpoints each), fanout (10x10,10000x10) or latency, e.g. ${DEFAULT_CASES}`);
}

const endpointsOf = (spec: CaseSpec) => spec.platformWide + spec.customers * spec.perCustomer;
/** Every event is owed to the platform-wide endpoints and to its customer's. */
const perEventOf = (spec: CaseSpec) => spec.platformWide + (spec.customers > 0 ? spec.perCustomer : 0);
/** Event i's customer: spread evenly over the case's customers (over 5,000 in a platform-wide case, as the payload always had). */
const customerOfEvent = (spec: CaseSpec, i: number) => `cust-${i % (spec.customers > 0 ? spec.customers : PLATFORM_CASE_CUSTOMERS)}`;

interface Bench {
  readonly env: Record<string, string>;
  readonly db: Database;
  readonly kafka: KafkaTools;
  /** The receiver's URL, each endpoint's id appended. */
  readonly receiverUrl: string;
  readonly pgCpu: PostgresCpu;
  readonly receiverCpu: () => number;
}

async function main(): Promise<void> {
  const began = Date.now();
  const ownStack = process.env.OUTBOX_STACK_DIR === undefined;
  const env = await upBenchStack(STACK_DEFAULTS, ['pg', 'kafka']);
  const db = new Database(env.DATABASE_URL!);
  const kafka = new KafkaTools({ brokers: env.KAFKA_BROKERS!.split(',') });
  const receiver = new Child('receiver', process.execPath, [join(BUILD_DIR, 'bench', 'lib', 'webhook-receiver.js')], {}, REPO);
  let restoreFsync = async (): Promise<void> => undefined;
  try {
    restoreFsync = await db.setForRun('fsync', process.env.OUTBOX_PG_FSYNC!);
    await receiver.waitFor(/"port"/, 10_000);
    const { port } = JSON.parse(receiver.output.find((line) => line.includes('"port"'))!) as { port: number };
    const bench: Bench = { env, db, kafka, receiverUrl: `http://127.0.0.1:${port}/hook/`, pgCpu: await PostgresCpu.find(db), receiverCpu: () => processUsage(receiver.pid)?.cpuSeconds ?? NaN };
    const throughput: ThroughputCase[] = [];
    if (throughputSpecs.length > 0) await warmUp(bench);
    for (const spec of throughputSpecs) for (const client of kafkaClients) throughput.push(await throughputCase(bench, spec, client));
    const latency: LatencyCase[] = [];
    const latencyBefore: LatencyCase[] = [];
    if (runLatency) {
      for (const client of kafkaClients) {
        // The other build first: the throughput cases ran this build first (each side once first).
        if (beforeCli !== null) latencyBefore.push(await latencyCase(bench, client, beforeCli));
        latency.push(await latencyCase(bench, client));
      }
    }
    const args = process.argv.slice(2);
    const results: WebhooksBenchRun = {
      date: new Date().toISOString().slice(0, 10),
      command: `npm run bench:webhooks${args.length > 0 ? ` -- ${args.join(' ')}` : ''}`,
      quick,
      minutes: (Date.now() - began) / 60_000,
      machine: machineDescription(),
      cores: availableParallelism(),
      postgres: await db.description(),
      source: await sourceState(REPO),
      concurrency: CONCURRENCY,
      maxInFlight: MAX_IN_FLIGHT,
      payloadBytes: PAYLOAD_BYTES,
      customerFrom: CUSTOMER_FROM,
      throughput,
      latency,
    };
    const outDir = join(REPO, 'bench', 'results');
    mkdirSync(outDir, { recursive: true });
    // A second run on the same day gets -2, -3...: earlier results stay for comparison.
    const base = `${results.date}-webhooks${quick ? '-quick' : ''}`;
    let stem = base;
    for (let n = 2; existsSync(join(outDir, `${stem}.json`)) || existsSync(join(outDir, `${stem}.md`)); n++) stem = `${base}-${n}`;
    const comparison = beforeCli === null ? null : beforeAndAfter(beforeCli, throughput, latency, latencyBefore);
    writeFileSync(join(outDir, `${stem}.json`), JSON.stringify(comparison ? { ...results, beforeAndAfter: comparison } : results, null, 2));
    const report = renderWebhooksReport(results) + (comparison ? renderBeforeAndAfter(comparison) : '');
    writeFileSync(join(outDir, `${stem}.md`), report);
    process.stdout.write(report);
    progress(`wrote bench/results/${stem}.md and .json in ${results.minutes.toFixed(1)} min${values.profile ? `; CPU profiles in ${PROFILE_DIR}` : ''}`);
  } finally {
    await receiver.stop();
    await restoreFsync().catch(() => undefined);
    await db.close();
    await kafka.close();
    if (ownStack && !values['keep-stack']) {
      progress(`taking the bench's stack down (OUTBOX_STACK_DIR=${process.env.OUTBOX_STACK_DIR} scripts/stack.sh down pg kafka)`);
      await run(STACK_SCRIPT, ['down', 'pg', 'kafka'], { cwd: REPO });
    } else progress(`the stack is still up; stop it with: OUTBOX_STACK_DIR=${process.env.OUTBOX_STACK_DIR} scripts/stack.sh down`);
  }
}

/**
 * Before the first case: the webhooks process on each client over WARM_UP_DELIVERIES, figures
 * thrown away. The bench's Kafka broker has just started, and for its first minute its JVM
 * compiles its hot paths on the same two cores: the first case measured on it ran at 54% of its
 * durable loop (run later, warm) with 367 µs of machine CPU a delivery, against 209 µs for the
 * same case on the other client right after, the process's and Postgres's own CPU alike.
 */
async function warmUp(bench: Bench): Promise<void> {
  const spec = parseCase('1', 'cases');
  const topic = `${TOPIC_PREFIX}.warm-up`;
  const schemaOf = (kafkaClient: KafkaClientName) => `bench_webhooks_warm_up_${kafkaClient}`;
  // The stores first: an endpoint is owed only the events produced after it was added.
  for (const kafkaClient of kafkaClients) await freshStore(bench, schemaOf(kafkaClient), spec);
  await bench.kafka.createTopic(topic);
  await produce(bench, topic, 'warm', 0, WARM_UP_DELIVERIES, spec);
  for (const kafkaClient of kafkaClients) {
    const schema = schemaOf(kafkaClient);
    await webhooksRun(bench, { name: `warm-up-${kafkaClient}`, schema, topic, kafkaClient, total: WARM_UP_DELIVERIES, env: {} });
    await bench.db.query(`DROP SCHEMA ${schema} CASCADE`);
  }
  await bench.kafka.deleteTopics(topic);
}

/** (1), (2), (4) and (5) for one case; with --ab-claims, the claims' run (7) right after (1). */
async function throughputCase(bench: Bench, spec: CaseSpec, kafkaClient: KafkaClientName): Promise<ThroughputCase> {
  const endpoints = endpointsOf(spec);
  const perEvent = perEventOf(spec);
  const events = Math.max(1, Math.round(deliveries / perEvent));
  const total = events * perEvent;
  const name = `${spec.customers > 0 ? `${spec.customers}-customers-x${spec.perCustomer}` : `${endpoints}-endpoints`}-${kafkaClient}`;
  const schema = `bench_webhooks_${spec.name}_${kafkaClient}`;
  const topic = `${TOPIC_PREFIX}.${name}`;
  progress(`${name}: ${events} events × ${perEvent} endpoints each (${endpoints} endpoints${spec.customers > 0 ? ` of ${spec.customers} customers` : ', platform-wide'}) = ${total} deliveries`);
  // The claims' run's store too: an endpoint is owed only the events produced after it was added (its deliver_from).
  const claimsSchema = `${schema}_claims`;
  const beforeSchema = `${schema}_before`;
  await freshStore(bench, schema, spec);
  if (abClaims) await freshStore(bench, claimsSchema, spec);
  if (beforeCli !== null) await freshStore(bench, beforeSchema, spec, beforeCli);
  await bench.kafka.createTopic(topic);
  await produce(bench, topic, `e${spec.name}`, 0, events, spec);
  await settle(bench, name);
  const own = await webhooksRun(bench, { name, schema, topic, kafkaClient, total, env: {} });
  let claims: ClaimsRun | undefined;
  if (abClaims) {
    // (7): the same topic again, a fresh store and group, every delivery recorded due and claimed.
    await settle(bench, `${name}-claims`);
    claims = { retrySchedule: CLAIMS_SCHEDULE, ...(await webhooksRun(bench, { name: `${name}-claims`, schema: claimsSchema, topic, kafkaClient, total, env: { OUTBOX_WEBHOOK_RETRY_SCHEDULE: CLAIMS_SCHEDULE } })) };
    await bench.db.query(`DROP SCHEMA ${claimsSchema} CASCADE`);
  }
  let before: WebhooksRunFigures | undefined;
  if (beforeCli !== null) {
    // (8): the same topic again, the other build, a fresh store and group.
    await settle(bench, `${name}-before`);
    before = await webhooksRun(bench, { name: `${name}-before`, schema: beforeSchema, topic, kafkaClient, total, env: {}, cli: beforeCli });
    await bench.db.query(`DROP SCHEMA ${beforeSchema} CASCADE`);
  }
  const { store, tableWrites, writtenOnce, ...figures } = own;
  const result = {
    case: spec.name,
    endpoints,
    platformWide: spec.platformWide,
    customers: spec.customers,
    endpointsPerCustomer: spec.perCustomer,
    deliveriesPerEvent: perEvent,
    kafkaClient,
    events,
    deliveries: total,
    ...figures,
    eventsPerSecond: figures.delivered / perEvent / figures.seconds,
    ...(values.profile && { profile: join(PROFILE_DIR, profileName(name)) }),
    ...(webhooksNodeFlags.length > 0 && { nodeFlags: webhooksNodeFlags.join(' ') }),
  };
  const ceiling = await runCeiling(bench, schema, name);
  await settle(bench, `${name} durable loop`);
  const durableLoop = await runDurableLoop(bench, { schema, topic, kafkaClient, deliveries: total, customerFrom: CUSTOMER_FROM }, name);
  await bench.db.query(`DROP SCHEMA ${schema} CASCADE`);
  await bench.kafka.deleteTopics(topic);
  if (before) beforeRuns.set(`${spec.name}\n${kafkaClient}`, before);
  return { ...result, store, tableWrites, writtenOnce, ceiling, durableLoop, ...(claims && { claims }) };
}

/**
 * Before each timed run that writes to Postgres (the webhooks process, the durable loop, the
 * claims' run): what the runs before it left to the server done now, not during the next one
 * (autovacuum's insert-triggered VACUUM of the tables just written, their dirty pages, and the
 * next checkpoint's full-page images counted in the next run's WAL): the database vacuumed and
 * analyzed, a checkpoint, the kernel's writeback. The same before both sides of the floor.
 */
async function settle(bench: Bench, name: string): Promise<void> {
  progress(`${name}: settling the server (VACUUM (ANALYZE), CHECKPOINT, sync)`);
  await bench.db.query('VACUUM (ANALYZE)');
  await bench.db.checkpoint();
  await run('sync', []);
}

/** One `webhooks` process over the case's topic into `schema`, timed until every delivery is 'delivered', then the store's figures. */
async function webhooksRun(bench: Bench, target: { readonly name: string; readonly schema: string; readonly topic: string; readonly kafkaClient: KafkaClientName; readonly total: number; readonly env: Record<string, string>; readonly cli?: string }): Promise<WebhooksRunFigures> {
  const { name, schema, topic, kafkaClient, total } = target;
  const walBefore = await walLsn(bench);
  const server = await CpuWatch.start(bench.pgCpu);
  const machine = machineCpu();
  const receiverBefore = bench.receiverCpu();
  const started = Date.now();
  const webhooks = startWebhooks(bench, name, schema, topic, kafkaClient, target.env, target.cli);
  let timing: DrainTiming | null = null;
  let error: string | undefined;
  /** The steady part starts at the first delivery seen 'delivered': the process's and Postgres's CPU from there. */
  let steadyFrom: { readonly delivered: number; readonly cpuSeconds: number; readonly pg: CpuWatch } | null = null;
  try {
    timing = await bench.kafka.waitForRecords(`${schema}.deliveries`, total, {
      timeoutMs: CASE_TIMEOUT_MS,
      stallMs: 60_000,
      alive: () => webhooks.running,
      onProgress: (count, rate) => progress(`  ${name}: ${count}/${total} delivered (${Math.round(rate)}/s)`),
      count: async () => {
        const count = await delivered(bench, schema);
        if (count > 0 && steadyFrom === null) steadyFrom = { delivered: count, cpuSeconds: webhooks.usage()?.cpuSeconds ?? NaN, pg: await CpuWatch.start(bench.pgCpu) };
        return count;
      },
    });
  } catch (failure) {
    error = (failure as Error).message.split('\n')[0]!;
    progress(`${name}: webhooks FAILED: ${error}\n${webhooks.tail(10)}`);
  }
  const doneAt = timing?.doneAt ?? Date.now();
  const usage = webhooks.usage();
  const pg = await server.stop();
  const walBytes = await walSince(bench, walBefore);
  // Set in the callback, which the compiler cannot see from here.
  const steadyStart = steadyFrom as { readonly delivered: number; readonly cpuSeconds: number; readonly pg: CpuWatch } | null;
  const steadyPg = steadyStart ? await steadyStart.pg.stop() : null;
  const receiverCpu = bench.receiverCpu() - receiverBefore;
  const machineBusyPct = machineBusyPercent(machine);
  await webhooks.stop();
  const count = timing?.count ?? (await delivered(bench, schema));
  const seconds = (doneAt - started) / 1000;
  const steady: SteadyCpu | undefined =
    steadyStart && steadyPg && count > steadyStart.delivered ? { deliveries: count - steadyStart.delivered, cpuSeconds: (usage?.cpuSeconds ?? NaN) - steadyStart.cpuSeconds, pgSessionCpuSeconds: steadyPg.contender } : undefined;
  const figures = {
    delivered: count,
    seconds,
    deliveriesPerSecond: count / seconds,
    steadyDeliveriesPerSecond: timing ? drainRate(timing, started) : NaN,
    cpuSeconds: usage?.cpuSeconds ?? NaN,
    peakRssMb: usage?.peakRssMb ?? NaN,
    pgSessionCpuSeconds: pg.contender,
    pgServerCpuSeconds: pg.total - pg.load,
    walBytes,
    receiverCpuSeconds: receiverCpu,
    machineBusyPct,
    ...(steady && { steady }),
    ...(error !== undefined && { error }),
  };
  progress(`${name}: webhooks ${int(figures.deliveriesPerSecond)} deliveries/s (steady ${int(figures.steadyDeliveriesPerSecond)}/s), ${int((figures.cpuSeconds * 1e6) / count)} µs CPU/delivery, Postgres sessions ${int((pg.contender * 1e6) / count)} µs/delivery, WAL ${int(walBytes / count)} B/delivery`);
  const store = await storeSize(bench, schema);
  const tableWrites = await rowsWritten(bench, schema);
  const writtenOnce = await sentBeforeRecorded(bench, schema);
  return { ...figures, store, tableWrites, writtenOnce };
}

/** (3): first attempts of events produced at LATENCY_RATE while `webhooks` runs: at its start, steady, and after a quiet spell. */
async function latencyCase(bench: Bench, kafkaClient: KafkaClientName, cli: string = CLI): Promise<LatencyCase> {
  const name = `latency-${kafkaClient}${cli === CLI ? '' : '-before'}`;
  const schema = `bench_webhooks_latency_${kafkaClient}${cli === CLI ? '' : '_before'}`;
  const topic = `${TOPIC_PREFIX}.${name}`;
  const noPhase: LatencyPhase = { events: 0, attempted: 0, p50: NaN, p99: NaN, max: NaN };
  const base = { kafkaClient, offeredPerSecond: LATENCY_RATE, achievedPerSecond: NaN, seconds: NaN, events: 0, attempted: 0, firstAttemptsFailed: 0, p50: NaN, p99: NaN, max: NaN, intakeP50: NaN, intakeP99: NaN, dispatchP50: NaN, dispatchP99: NaN, cpuSeconds: NaN, pgSessionCpuSeconds: NaN, machineBusyPct: NaN, startUp: { ...noPhase, seconds: START_UP_SECONDS }, afterQuiet: { ...noPhase, quietSeconds: QUIET_SECONDS } };
  await freshStore(bench, schema, LATENCY_SPEC, cli);
  // What the cases before it left to the server (autovacuum of their tables, dirty pages) done now, not during it.
  await settle(bench, name);
  await bench.kafka.createTopic(topic);
  const webhooks = startWebhooks(bench, name, schema, topic, kafkaClient, {}, cli);
  const alive = () => webhooks.running;
  /** Attempt 1 of each event whose id starts with `prefix`, once every one of `events` has it (or a minute after). */
  const firstAttempts = async (prefix: string, events: number) => {
    const read = () =>
      bench.db.query<{ ms: number; intakeMs: number; outcome: string }>(
        // recorded_at is now() of the intake's transaction: its start, a commit before the dispatcher can see the event.
        `SELECT extract(epoch FROM a.started_at - ev.produced_at)::float8 * 1000 AS ms, extract(epoch FROM ev.recorded_at - ev.produced_at)::float8 * 1000 AS "intakeMs", a.outcome
         FROM ${schema}.all_attempts a JOIN ${schema}.deliveries d ON d.id = a.delivery_id JOIN ${schema}.events ev ON ev.event_id = d.event_id
         WHERE a.attempt = 1 AND starts_with(ev.event_id, $1)`,
        [`${prefix}-`],
      );
    let attempts = await read();
    for (const deadline = Date.now() + 60_000; attempts.length < events && Date.now() < deadline && alive(); attempts = await read()) await sleep(250);
    return attempts;
  };
  const phase = (attempts: readonly { ms: number }[], events: number): LatencyPhase => {
    const sorted = attempts.map((a) => a.ms).sort((a, b) => a - b);
    return { events, attempted: attempts.length, p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted.at(-1) ?? NaN };
  };
  try {
    progress(`${name}: start-up, ${LATENCY_RATE} events/s for ${START_UP_SECONDS} s from the process's start`);
    const started = await offer(bench, topic, LATENCY_RATE, START_UP_SECONDS, 'start');
    const startUp = { ...phase(await firstAttempts('start', started.events), started.events), seconds: START_UP_SECONDS };
    const cpuBefore = webhooks.usage()?.cpuSeconds ?? NaN;
    const server = await CpuWatch.start(bench.pgCpu);
    const machine = machineCpu();
    progress(`${name}: steady, ${LATENCY_RATE} events/s for ${latencySeconds} s`);
    const offered = await offer(bench, topic, LATENCY_RATE, latencySeconds, 'lat');
    const cpuSeconds = (webhooks.usage()?.cpuSeconds ?? NaN) - cpuBefore;
    const pg = await server.stop();
    const machineBusyPct = machineBusyPercent(machine);
    const attempts = await firstAttempts('lat', offered.events);
    const steady = phase(attempts, offered.events);
    progress(`${name}: quiet for ${QUIET_SECONDS} s, then ${LATENCY_RATE} events/s for ${BURST_SECONDS} s`);
    await sleep(QUIET_SECONDS * 1_000);
    const burst = await offer(bench, topic, LATENCY_RATE, BURST_SECONDS, 'burst');
    const afterQuiet = { ...phase(await firstAttempts('burst', burst.events), burst.events), quietSeconds: QUIET_SECONDS };
    const intake = attempts.map((a) => a.intakeMs).sort((a, b) => a - b);
    const dispatch = attempts.map((a) => a.ms - a.intakeMs).sort((a, b) => a - b);
    const result: LatencyCase = {
      ...base,
      achievedPerSecond: offered.events / offered.seconds,
      seconds: offered.seconds,
      events: offered.events,
      attempted: steady.attempted,
      firstAttemptsFailed: attempts.filter((a) => a.outcome !== 'delivered').length,
      p50: steady.p50,
      p99: steady.p99,
      max: steady.max,
      intakeP50: percentile(intake, 50),
      intakeP99: percentile(intake, 99),
      dispatchP50: percentile(dispatch, 50),
      dispatchP99: percentile(dispatch, 99),
      cpuSeconds,
      pgSessionCpuSeconds: pg.contender,
      machineBusyPct,
      startUp,
      afterQuiet,
      ...(values.profile && { profile: join(PROFILE_DIR, profileName(name)) }),
      ...(steady.attempted < offered.events && { error: `only ${steady.attempted} of ${offered.events} events had a first attempt 60 s after the last was produced` }),
    };
    progress(
      `${name}: first attempt p50 ${int(result.p50)} ms, p99 ${int(result.p99)} ms, max ${int(result.max)} ms (${steady.attempted}/${offered.events}); Kafka to recorded p50 ${int(result.intakeP50)} / p99 ${int(result.intakeP99)} ms, recorded to attempt p50 ${int(result.dispatchP50)} / p99 ${int(result.dispatchP99)} ms; ` +
        `start-up p99 ${int(startUp.p99)} ms (${startUp.attempted}/${startUp.events}), after ${QUIET_SECONDS} s quiet p99 ${int(afterQuiet.p99)} ms (${afterQuiet.attempted}/${afterQuiet.events})`,
    );
    return result;
  } catch (failure) {
    const error = (failure as Error).message.split('\n')[0]!;
    progress(`${name}: FAILED: ${error}\n${webhooks.tail(10)}`);
    return { ...base, error };
  } finally {
    await webhooks.stop();
    await bench.db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await bench.kafka.deleteTopics(topic);
  }
}

/**
 * The webhook tables in `schema` (`webhooks setup`), the first endpoint added by the CLI, the
 * others (each its own URL and secret) copied from it in one INSERT: 10,000 runs of `endpoint
 * add` would take longer than the bench. Endpoint g (from 0) is platform-wide while g is below
 * the case's platform-wide count, then customer `cust-<c>`'s, K endpoints a customer in turn.
 */
async function freshStore(bench: Bench, schema: string, spec: CaseSpec, cli: string = CLI): Promise<void> {
  await bench.db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  const env = webhooksEnv(bench, schema, '');
  const audience = spec.platformWide > 0 ? ['--platform-wide'] : ['--customer', 'cust-0'];
  await run(process.execPath, [cli, 'webhooks', 'setup'], { env, cwd: REPO });
  await run(process.execPath, [cli, 'webhooks', 'endpoint', 'add', '--id', 'bench-ep-0', '--url', `${bench.receiverUrl}0`, '--event-types', SUBSCRIPTION, '--max-in-flight', String(MAX_IN_FLIGHT), ...audience, '--json'], { env, cwd: REPO });
  const endpoints = endpointsOf(spec);
  if (endpoints > 1) {
    await bench.db.query(
      `INSERT INTO ${schema}.endpoints (id, url, event_types, secrets, headers, max_in_flight, platform_wide, customer_id)
       SELECT 'bench-ep-' || g, $1 || g, e.event_types,
              jsonb_build_array(jsonb_build_object('secret', 'whsec_' || encode(decode(md5(random()::text) || md5(random()::text), 'hex'), 'base64'), 'expires_at', null)),
              e.headers, e.max_in_flight, g < $3, CASE WHEN g >= $3 THEN 'cust-' || ((g - $3) / $4) END
       FROM ${schema}.endpoints e CROSS JOIN generate_series(1, $2) g WHERE e.id = 'bench-ep-0'`,
      [bench.receiverUrl, endpoints - 1, spec.platformWide, Math.max(1, spec.perCustomer)],
    );
  }
  // What the webhooks process will find: every endpoint assigned, as many per audience as the case says.
  const [row] = await bench.db.query<{ platform: number; customers: number; largest: number }>(
    `SELECT count(*) FILTER (WHERE platform_wide)::int AS platform, count(DISTINCT customer_id)::int AS customers,
            coalesce((SELECT max(n) FROM (SELECT count(*) AS n FROM ${schema}.endpoints WHERE customer_id IS NOT NULL GROUP BY customer_id) c), 0)::int AS largest
     FROM ${schema}.endpoints`,
  );
  if (row!.platform !== spec.platformWide || row!.customers !== spec.customers || row!.largest !== spec.perCustomer) throw new Error(`${schema}: ${JSON.stringify(row)} endpoints, not the case's ${JSON.stringify(spec)}`);
}

function webhooksEnv(bench: Bench, schema: string, topic: string, kafkaClient: KafkaClientName = 'kafkajs', extra: Record<string, string> = {}): Record<string, string> {
  return {
    OUTBOX_KAFKA_CLIENT: kafkaClient,
    DATABASE_URL: bench.env.DATABASE_URL!,
    KAFKA_BROKERS: bench.env.KAFKA_BROKERS!,
    OUTBOX_WEBHOOK_SCHEMA: schema,
    OUTBOX_WEBHOOK_TOPICS: topic,
    OUTBOX_WEBHOOK_CUSTOMER_FROM: CUSTOMER_FROM,
    OUTBOX_WEBHOOK_GROUP: `bench-webhooks-${STAMP}-${schema}`,
    OUTBOX_WEBHOOK_ALLOW_ADDRESSES: '127.0.0.1',
    OUTBOX_WEBHOOK_CONCURRENCY: String(CONCURRENCY),
    // No metrics server: the default port may be another webhooks process's on this machine.
    OUTBOX_HTTP_PORT: '0',
    ...extra,
  };
}

function startWebhooks(bench: Bench, name: string, schema: string, topic: string, kafkaClient: KafkaClientName, env: Record<string, string> = {}, cli: string = CLI): Child {
  const profile = values.profile ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`, `--cpu-prof-name=${profileName(name)}`] : [];
  return new Child(`webhooks ${name}`, process.execPath, [...NODE_FLAGS, ...profile, ...webhooksNodeFlags, cli, 'webhooks'], webhooksEnv(bench, schema, topic, kafkaClient, env), REPO);
}

function profileName(name: string): string {
  return `webhooks-${STAMP}-${name}.cpuprofile`;
}

/** Deliveries 'delivered' in the store, after POLL_MS (the caller polls in a loop). */
async function delivered(bench: Bench, schema: string): Promise<number> {
  await sleep(POLL_MS);
  const [row] = await bench.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${schema}.deliveries WHERE status = 'delivered'`);
  return row!.n;
}

/**
 * Events `prefix`-`from` .. `prefix`-`to - 1` as the relay writes them: JSON payload as value,
 * aggregate id as key, its headers, and the event's customer (by `spec`) as the outbox row's own
 * header `customer_id` (the relay carries a row's headers) and in the payload.
 */
function records(prefix: string, from: number, to: number, spec: CaseSpec): Message[] {
  const now = new Date();
  const messages: Message[] = [];
  for (let i = from; i < to; i += 1) {
    const customer = customerOfEvent(spec, i);
    const payload = { invoice_id: `inv-${i}`, customer_id: customer, amount_cents: (i * 7919) % 1_000_000, currency: 'EUR', method: 'card', note: NOTE };
    const event: OutboxEvent = { eventId: `${prefix}-${i}`, aggregateType: 'invoice', aggregateId: `acct-${i % 1000}`, eventType: EVENT_TYPE, payload, headers: { customer_id: customer }, createdAt: now.toISOString() };
    messages.push({ key: event.aggregateId, value: JSON.stringify(payload), headers: eventHeaders(event, COMMIT_LSN, 'public.event_outbox'), timestamp: String(now.getTime()) });
  }
  return messages;
}

/** A backlog, 1,000 records per request. */
async function produce(bench: Bench, topic: string, prefix: string, from: number, to: number, spec: CaseSpec): Promise<void> {
  const producer = bench.kafka.kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  try {
    for (let i = from; i < to; i += 1_000) await producer.send({ topic, messages: records(prefix, i, Math.min(to, i + 1_000), spec) });
  } finally {
    await producer.disconnect();
  }
}

/** `rate` events per second for `seconds`: every ~2 ms, what is due in one request (each record stamped when it is sent). */
async function offer(bench: Bench, topic: string, rate: number, seconds: number, prefix: string): Promise<{ seconds: number; events: number }> {
  const producer = bench.kafka.kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const total = Math.round(rate * seconds);
  const start = Date.now();
  let sent = 0;
  try {
    while (sent < total) {
      const due = Math.min(total, Math.floor(((Date.now() - start) / 1000) * rate));
      if (due > sent) {
        const batch = records(prefix, sent, due, LATENCY_SPEC);
        sent = due;
        await producer.send({ topic, messages: batch });
      } else await sleep(2);
    }
  } finally {
    await producer.disconnect();
  }
  return { seconds: (Date.now() - start) / 1000, events: total };
}

/** Deliveries whose first attempt started before they were recorded (sent first, written once with its result). */
async function sentBeforeRecorded(bench: Bench, schema: string): Promise<number> {
  const [row] = await bench.db.query<{ n: number }>(`SELECT count(*)::float8 AS n FROM ${schema}.deliveries d JOIN ${schema}.all_attempts a ON a.delivery_id = d.id AND a.attempt = 1 WHERE a.started_at < d.created_at`);
  return row!.n;
}

/** The server's WAL position: the bench's stack serves the bench alone, so WAL between two positions is the contender's (and the bench's own count polls, which write none). */
async function walLsn(bench: Bench): Promise<string> {
  const [row] = await bench.db.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
  return row!.lsn;
}

async function walSince(bench: Bench, lsn: string): Promise<number> {
  const [row] = await bench.db.query<{ bytes: number }>('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::float8 AS bytes', [lsn]);
  return row!.bytes;
}

/** Rows inserted, updated (HOT among them) and deleted in each table of the case's schema, from its creation on (the endpoints' INSERT of the setup included), after the process has ended. */
async function rowsWritten(bench: Bench, schema: string): Promise<TableWrites[]> {
  // A backend's counts reach the shared statistics when it is idle, at most a second late: the process's sessions have ended.
  await sleep(1_500);
  return bench.db.query<TableWrites>(
    `SELECT relname AS table, n_tup_ins::float8 AS inserted, n_tup_upd::float8 AS updated, n_tup_hot_upd::float8 AS "hotUpdated", n_tup_del::float8 AS deleted
     FROM pg_stat_user_tables WHERE schemaname = $1 AND n_tup_ins + n_tup_upd + n_tup_del > 0 ORDER BY relname`,
    [schema],
  );
}

async function storeSize(bench: Bench, schema: string): Promise<StoreSize[]> {
  const sizes: StoreSize[] = [];
  for (const table of ['events', 'deliveries', 'attempts'] as const) {
    const [row] = await bench.db.query<{ rows: number; bytes: number }>(`SELECT (SELECT count(*) FROM ${schema}.${table})::float8 AS rows, pg_total_relation_size('${schema}.${table}')::float8 AS bytes`);
    sizes.push({ table, ...row! });
  }
  return sizes;
}

/** (2): the case's deliveries through bench/lib/webhook-ceiling.ts, with the receiver's CPU meanwhile. */
async function runCeiling(bench: Bench, schema: string, name: string): Promise<CeilingResult> {
  const args: CeilingArgs = { databaseUrl: bench.env.DATABASE_URL!, schema, concurrency: CONCURRENCY, dist: join(REPO, 'dist'), customerFrom: CEILING_CUSTOMER_FROM };
  const receiverBefore = bench.receiverCpu();
  const machine = machineCpu();
  progress(`${name}: ceiling`);
  const child = new Child(`ceiling ${name}`, process.execPath, [...NODE_FLAGS, join(BUILD_DIR, 'bench', 'lib', 'webhook-ceiling.js'), JSON.stringify(args)], {}, REPO);
  await child.exited;
  const line = child.output.find((l) => l.includes('"done"'));
  if (!line) {
    progress(`${name}: ceiling FAILED (${child.ended}):\n${child.tail(10)}`);
    return { deliveries: 0, mismatched: 0, delivered: 0, failed: 0, firstError: null, seconds: NaN, deliveriesPerSecond: NaN, cpuSeconds: NaN, receiverCpuSeconds: NaN, machineBusyPct: NaN, error: `the ceiling ended with ${child.ended}: ${child.tail(1)}` };
  }
  const { done: _, ...done } = JSON.parse(line) as { done: true } & Omit<CeilingResult, 'deliveriesPerSecond' | 'receiverCpuSeconds' | 'machineBusyPct'>;
  const result = { ...done, deliveriesPerSecond: done.delivered / done.seconds, receiverCpuSeconds: bench.receiverCpu() - receiverBefore, machineBusyPct: machineBusyPercent(machine) };
  progress(`${name}: ceiling ${Math.round(result.deliveriesPerSecond)} deliveries/s, ${Math.round((result.cpuSeconds * 1e6) / result.delivered)} µs CPU/delivery${result.failed ? `, ${result.failed} failed (${result.firstError})` : ''}${result.mismatched ? `; ${result.mismatched} (event, endpoint) pairs differ from the webhooks run's deliveries` : ''}`);
  return result;
}

/** (5): the case's topic through bench/lib/webhook-durable-loop.ts, a consumer group of its own, with Postgres's CPU meanwhile. */
async function runDurableLoop(bench: Bench, target: Pick<DurableLoopArgs, 'schema' | 'topic' | 'kafkaClient' | 'deliveries' | 'customerFrom'>, name: string): Promise<DurableLoopResult> {
  const args: DurableLoopArgs = { ...target, databaseUrl: bench.env.DATABASE_URL!, concurrency: CONCURRENCY, dist: join(REPO, 'dist'), brokers: bench.env.KAFKA_BROKERS!.split(','), groupId: `bench-durable-loop-${STAMP}-${target.schema}` };
  progress(`${name}: durable loop`);
  const walBefore = await walLsn(bench);
  const server = await CpuWatch.start(bench.pgCpu);
  const machine = machineCpu();
  const child = new Child(`durable loop ${name}`, process.execPath, [...NODE_FLAGS, join(BUILD_DIR, 'bench', 'lib', 'webhook-durable-loop.js'), JSON.stringify(args)], {}, REPO);
  const line = await Promise.race([child.waitFor(/"done"/, CASE_TIMEOUT_MS).then(() => child.output.find((l) => l.includes('"done"'))), child.exited.then(() => undefined)]).catch(() => undefined);
  const machineBusyPct = machineBusyPercent(machine);
  // From its start (its tables created) to its last write, before it drops its tables.
  const walBytes = await walSince(bench, walBefore);
  const pg = await server.stop();
  await child.exited;
  if (!line) {
    progress(`${name}: durable loop FAILED (${child.ended}):\n${child.tail(10)}`);
    return { deliveries: 0, seconds: NaN, deliveriesPerSecond: NaN, steadyDeliveriesPerSecond: NaN, cpuSeconds: NaN, pgSessionCpuSeconds: NaN, machineBusyPct: NaN, error: `the durable loop ended with ${child.ended}: ${child.tail(1)}` };
  }
  const { done: _, ...done } = JSON.parse(line) as { done: true; deliveries: number; seconds: number; steadyDeliveriesPerSecond: number; cpuSeconds: number };
  const result = { ...done, deliveriesPerSecond: done.deliveries / done.seconds, pgSessionCpuSeconds: pg.contender, machineBusyPct, walBytes };
  progress(`${name}: durable loop ${Math.round(result.deliveriesPerSecond)} deliveries/s (steady ${Math.round(result.steadyDeliveriesPerSecond)}/s), ${Math.round((result.cpuSeconds * 1e6) / result.deliveries)} µs CPU/delivery, Postgres sessions ${Math.round((pg.contender * 1e6) / result.deliveries)} µs/delivery`);
  return result;
}

/** (8): the other build's throughput runs, by case and client. */
const beforeRuns = new Map<string, WebhooksRunFigures>();

/** One side of (8) in a case. */
interface SideFigures {
  readonly deliveriesPerSecond: number;
  /** Of the case's durable loop's deliveries/s. */
  readonly loopShare: number;
  readonly cpuUsPerDelivery: number;
  readonly pgUsPerDelivery: number;
  readonly cpuAndPgUsPerDelivery: number;
  readonly walBytesPerDelivery: number;
}

interface BeforeAndAfter {
  readonly beforeCli: string;
  readonly throughput: readonly { readonly case: string; readonly kafkaClient: string; readonly before: SideFigures; readonly after: SideFigures }[];
  readonly latency: readonly { readonly kafkaClient: string; readonly beforeP99: number; readonly afterP99: number; readonly beforeCpuUsPerEvent: number; readonly afterCpuUsPerEvent: number }[];
}

function sideOf(run: Pick<ThroughputCase, 'delivered' | 'deliveriesPerSecond' | 'cpuSeconds' | 'pgSessionCpuSeconds' | 'walBytes'>, loop: number): SideFigures {
  const per = (seconds: number) => (seconds * 1e6) / run.delivered;
  return { deliveriesPerSecond: run.deliveriesPerSecond, loopShare: run.deliveriesPerSecond / loop, cpuUsPerDelivery: per(run.cpuSeconds), pgUsPerDelivery: per(run.pgSessionCpuSeconds), cpuAndPgUsPerDelivery: per(run.cpuSeconds + run.pgSessionCpuSeconds), walBytesPerDelivery: (run.walBytes ?? NaN) / run.delivered };
}

function beforeAndAfter(cli: string, throughput: readonly ThroughputCase[], latency: readonly LatencyCase[], latencyBefore: readonly LatencyCase[]): BeforeAndAfter {
  return {
    beforeCli: cli,
    throughput: throughput.flatMap((c) => {
      const before = beforeRuns.get(`${c.case}\n${c.kafkaClient}`);
      const loop = c.durableLoop?.deliveriesPerSecond ?? NaN;
      return before ? [{ case: c.case ?? '', kafkaClient: c.kafkaClient, before: sideOf(before, loop), after: sideOf(c, loop) }] : [];
    }),
    latency: latency.flatMap((after) => {
      const before = latencyBefore.find((l) => l.kafkaClient === after.kafkaClient);
      return before ? [{ kafkaClient: after.kafkaClient, beforeP99: before.p99, afterP99: after.p99, beforeCpuUsPerEvent: ((before.cpuSeconds + before.pgSessionCpuSeconds) * 1e6) / before.events, afterCpuUsPerEvent: ((after.cpuSeconds + after.pgSessionCpuSeconds) * 1e6) / after.events }] : [];
    }),
  };
}

function renderBeforeAndAfter(comparison: BeforeAndAfter): string {
  const n = (x: number, digits = 0) => (Number.isFinite(x) ? x.toFixed(digits) : '–');
  const pct = (x: number) => (Number.isFinite(x) ? `${(x * 100).toFixed(0)}%` : '–');
  const lines = [
    '',
    '## Before and after (--before-cli)',
    '',
    `This build ("after") and \`${comparison.beforeCli}\` ("before") in the same run: each case's topic read by both, each into a fresh store, the other build right after this one's; the durable loop is the case's one. CPU per delivery of the process and of its Postgres sessions, over the whole run.`,
    '',
    '| case | consumer | deliveries/s before → after | of the durable loop before → after (floor ≥ 90%) | process CPU µs/delivery before → after | Postgres CPU µs/delivery before → after | process + Postgres µs/delivery before → after (after ÷ before) | WAL B/delivery before → after |',
    '|---|---|---|---|---|---|---|---|',
    ...comparison.throughput.map(({ case: name, kafkaClient, before: b, after: a }) =>
      `| ${name} | ${kafkaClient} | ${n(b.deliveriesPerSecond)} → ${n(a.deliveriesPerSecond)} | ${pct(b.loopShare)} → ${pct(a.loopShare)} | ${n(b.cpuUsPerDelivery)} → ${n(a.cpuUsPerDelivery)} | ${n(b.pgUsPerDelivery)} → ${n(a.pgUsPerDelivery)} | ${n(b.cpuAndPgUsPerDelivery)} → ${n(a.cpuAndPgUsPerDelivery)} (${n(a.cpuAndPgUsPerDelivery / b.cpuAndPgUsPerDelivery, 2)}×) | ${n(b.walBytesPerDelivery)} → ${n(a.walBytesPerDelivery)} |`,
    ),
    '',
    '| latency, 1k events/s | first-attempt p99 ms before → after (floor ≤ 100) | process + Postgres µs/event before → after |',
    '|---|---|---|',
    ...comparison.latency.map((l) => `| ${l.kafkaClient} | ${n(l.beforeP99)} → ${n(l.afterP99)} | ${n(l.beforeCpuUsPerEvent)} → ${n(l.afterCpuUsPerEvent)} |`),
    '',
  ];
  return lines.join('\n');
}

main().catch((error: unknown) => {
  progress(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exitCode = 1;
});

/**
 * `npm run bench:cutover [-- --rows N --repeat R]`: what taking over a polling relay's backlog
 * costs against the relay's own drain of a backlog of the same size, side by side in one run.
 *
 * On the stack (`scripts/stack.sh up`), with the built CLI (dist/), each round, in turn:
 *   - drain: a shape-1 polling table (uuid ids, status, partial index, no aggregate type) with a
 *     slot made while it was empty; N rows of ~300 B committed 100 per transaction; then
 *     `outbox-relay run`, timed from its start until Kafka holds N records;
 *   - cutover: the same table and rows, every one pending and no slot; `outbox-relay cutover
 *     --pending "status = 'pending'"`, timed from its start until it exits (it exits once Kafka
 *     acknowledged every row).
 * Both run as the Dockerfile runs them (node --max-semi-space-size=16). Each process's peak RSS
 * (VmHWM) is read while it runs. Rates are rows per second including
 * start-up; the report gives each round and the medians, and the floors the issue names:
 * cutover ≥ 50% of the drain's rate, its peak RSS ≤ the drain's.
 */
import { parseArgs } from 'node:util';
import kafkajs from 'kafkajs';
import pg from 'pg';
import * as p from '../src/config/parsers.js';
import { dropKafkajsTimerWarning } from '../src/observe/process-warnings.js';
import { SEMI_SPACE_FLAG } from '../src/observe/runtime-flags.js';
import { flag } from './lib/flags.js';
import { int, num } from './lib/format.js';
import { Child, processUsage, sleep } from './lib/proc.js';
import { stackEnv } from './lib/stack.js';
import { median } from './lib/stats.js';

const { values } = parseArgs({ options: { rows: { type: 'string', default: '1000000' }, repeat: { type: 'string', default: '2' } }, strict: true, allowPositionals: false });
const rows = flag('rows', values.rows, p.integer(1_000, 10_000_000));
const repeat = flag('repeat', values.repeat, p.integer(1, 10));
const CLI = 'dist/cli.js';
/** As the Dockerfile's entrypoint runs every command. */
const NODE_FLAGS = [SEMI_SPACE_FLAG];
const PENDING = "status = 'pending'";
const TABLE = 'bench_cutover_outbox';
const ROWS_PER_TRANSACTION = 100;

interface Round {
  readonly contender: 'drain' | 'cutover';
  readonly seconds: number;
  readonly rowsPerSecond: number;
  readonly peakRssMb: number;
}

dropKafkajsTimerWarning();
const env = await stackEnv();
const db = new pg.Client({ connectionString: env.DATABASE_URL });
await db.connect();
const kafka = new kafkajs.Kafka({ clientId: 'bench-cutover', brokers: env.KAFKA_BROKERS!.split(','), logLevel: kafkajs.logLevel.NOTHING });
const admin = kafka.admin();
await admin.connect();

const rounds: Round[] = [];
try {
  for (let round = 1; round <= repeat; round += 1) {
    for (const contender of ['drain', 'cutover'] as const) {
      const result = await measure(contender, `${round}`);
      rounds.push(result);
      process.stderr.write(`[bench:cutover] round ${round} ${contender}: ${int(result.rowsPerSecond)} rows/s, ${num(result.seconds, 1)} s, peak RSS ${num(result.peakRssMb, 0)} MB\n`);
    }
  }
} finally {
  await clean();
  await admin.disconnect();
  await db.end();
}
process.stdout.write(report(rounds));

async function measure(contender: Round['contender'], round: string): Promise<Round> {
  await clean();
  const topicPrefix = `bench-cutover-${contender}-${round}-${Date.now()}`;
  const topic = `${topicPrefix}.PaymentRecorded`;
  await admin.createTopics({ topics: [{ topic, numPartitions: 6, replicationFactor: 1 }], waitForLeaders: true });
  const relayEnv = { ...env, OUTBOX_TABLE: `public.${TABLE}`, OUTBOX_SLOT: 'bench_cutover', OUTBOX_PUBLICATION: 'bench_cutover', OUTBOX_COLUMN_AGGREGATE_TYPE: '', OUTBOX_TOPIC_TEMPLATE: `${topicPrefix}.{event_type}`, OUTBOX_HTTP_PORT: '0', LOG_LEVEL: 'warn' };
  await db.query(`CREATE TABLE ${TABLE} (outbox_id uuid PRIMARY KEY DEFAULT gen_random_uuid(), event_id uuid NOT NULL UNIQUE, aggregate_id uuid NOT NULL, event_type text NOT NULL,
    payload jsonb NOT NULL, status text NOT NULL DEFAULT 'pending', attempts int NOT NULL DEFAULT 0, created_at timestamptz NOT NULL DEFAULT now(), sent_at timestamptz)`);
  await db.query(`CREATE INDEX ON ${TABLE} (created_at) WHERE status = 'pending'`);
  // The drain's slot exists before the rows: they are its backlog in the WAL.
  if (contender === 'drain') await new Child('setup', process.execPath, [CLI, 'setup'], relayEnv).exited;
  await insertRows();
  const started = Date.now();
  const child = contender === 'drain' ? new Child('run', process.execPath, [...NODE_FLAGS, CLI, 'run'], relayEnv) : new Child('cutover', process.execPath, [...NODE_FLAGS, CLI, 'cutover', '--pending', PENDING], relayEnv);
  let peakRssMb = 0;
  for (;;) {
    peakRssMb = Math.max(peakRssMb, processUsage(child.pid)?.peakRssMb ?? 0);
    if (contender === 'cutover' && !child.running) break;
    if (contender === 'drain' && (await records(topic)) >= rows) break;
    if (!child.running) throw new Error(`${contender} exited (${child.ended}):\n${child.tail()}`);
    await sleep(100);
  }
  const seconds = (Date.now() - started) / 1000;
  if (contender === 'drain') await child.stop();
  if (child.ended !== 'exit code 0') throw new Error(`${contender} ended with ${child.ended}:\n${child.tail()}`);
  const delivered = await records(topic);
  if (delivered < rows) throw new Error(`${contender}: ${delivered} of ${rows} rows in Kafka`);
  await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
  return { contender, seconds, rowsPerSecond: rows / seconds, peakRssMb };
}

async function insertRows(): Promise<void> {
  // ~300 B payloads, committed 100 rows per transaction (a procedure-style loop commits as it goes).
  await db.query(`DO $$ BEGIN
    FOR batch IN 0..${Math.ceil(rows / ROWS_PER_TRANSACTION) - 1} LOOP
      INSERT INTO ${TABLE} (event_id, aggregate_id, event_type, payload)
        SELECT gen_random_uuid(), gen_random_uuid(), 'PaymentRecorded',
               jsonb_build_object('payment_id', 'pay_' || g, 'amount_cents', 1000 + g, 'currency', 'EUR', 'memo', repeat('x', 200))
          FROM generate_series(batch * ${ROWS_PER_TRANSACTION} + 1, least((batch + 1) * ${ROWS_PER_TRANSACTION}, ${rows})) g;
      COMMIT;
    END LOOP; END $$`);
}

async function records(topic: string): Promise<number> {
  const offsets = await admin.fetchTopicOffsets(topic);
  return offsets.reduce((sum, partition) => sum + Number(partition.high) - Number(partition.low), 0);
}

async function clean(): Promise<void> {
  await db.query(`SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'bench_cutover'`);
  await db.query('DROP PUBLICATION IF EXISTS bench_cutover');
  await db.query(`DROP TABLE IF EXISTS ${TABLE}, ${TABLE}_prune_marks`);
}


function report(all: readonly Round[]): string {
  const of = (contender: Round['contender']) => all.filter((round) => round.contender === contender);
  const rate = (contender: Round['contender']) => median(of(contender).map((round) => round.rowsPerSecond));
  const rss = (contender: Round['contender']) => median(of(contender).map((round) => round.peakRssMb));
  const ratio = rate('cutover') / rate('drain');
  const lines = [
    `bench:cutover, ${int(rows)} rows of ~300 B (100 per transaction), ${repeat} rounds alternated, median:`,
    '',
    '| | rows/s | s | peak RSS MB | each round, rows/s |',
    '| --- | ---: | ---: | ---: | --- |',
    ...(['drain', 'cutover'] as const).map((contender) => `| ${contender === 'drain' ? 'relay drain of a WAL backlog' : 'cutover of pending rows'} | ${int(rate(contender))} | ${num(median(of(contender).map((round) => round.seconds)), 1)} | ${num(rss(contender), 0)} | ${of(contender).map((round) => int(round.rowsPerSecond)).join(', ')} |`),
    '',
    `cutover / drain: ${num(ratio * 100, 0)}% of the drain's rate (floor 50%: ${ratio >= 0.5 ? 'PASS' : 'MISS'}); peak RSS ${num(rss('cutover'), 0)} MB against ${num(rss('drain'), 0)} MB (floor: at most the drain's: ${rss('cutover') <= rss('drain') ? 'PASS' : 'MISS'})`,
  ];
  return `${lines.join('\n')}\n`;
}

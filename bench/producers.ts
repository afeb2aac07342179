/**
 * `npm run bench:producers [-- --events N] [-- --batch N] [-- --payload BYTES] [-- --rounds R] [-- --cases a,b] [-- --keep-stack]`
 *
 * The Kafka clients alone, side by side in one run, with no Postgres: the same records (as the
 * relay makes them) produced in requests of --batch, one request at a time, each awaited until
 * acknowledged (bench/contenders/producer-floor.ts), by
 *   binding      the librdkafka binding's floor: a loop that only calls produce(), its arguments made beforehand
 *   binding-header-objects, binding-no-headers, binding-error-reports   the same with headers in the
 *                binding's own form (not the patch's list), without headers, and with reports for failures only
 *   librdkafka   the relay's producer on librdkafka (src/kafka/librdkafka/producer.ts)
 *   kafkajs      the relay's producer on kafkajs with its fork (src/kafka/kafkajs/producer.ts)
 *   platformatic the relay's producer on @platformatic/kafka (src/kafka/platformatic/producer.ts)
 * (--cases: only those, kafkajs always among them: the table's ratios are against it.)
 * Each case in a process of its own, the cases alternating per round; medians of the rounds.
 * What separates `librdkafka` from `binding` is the relay's own cost on that client; what
 * separates `binding` from `kafkajs` is the binding's.
 *
 * Starts its own Kafka (scripts/stack.sh up kafka) in a temp OUTBOX_STACK_DIR on ports apart
 * from the test stack's and the other benches', and takes it down at the end (unless
 * --keep-stack, or a stack named by OUTBOX_STACK_DIR). Writes bench/results/<date>-producers.md.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import * as p from '../src/config/parsers.js';
import { CASES, type ProducerCase } from './contenders/producer-floor-cases.js';
import { BUILD_DIR } from './lib/contenders.js';
import { flag } from './lib/flags.js';
import { KafkaTools } from './lib/kafka.js';
import { Child, machineBusyPercent, machineCpu, machineDescription, progress, run } from './lib/proc.js';
import { STACK_SCRIPT, upBenchStack } from './lib/stack.js';
import { median } from './lib/stats.js';
import { writeMarkdownResult } from './lib/results.js';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const STACK_DEFAULTS: Record<string, string> = {
  OUTBOX_STACK_DIR: join(tmpdir(), 'outbox-relay-bench-producers-stack'),
  OUTBOX_KAFKA_PORT: '61492',
  OUTBOX_KAFKA_CONTROLLER_PORT: '61493',
};

const { values } = parseArgs({
  options: {
    events: { type: 'string', default: '200000' },
    batch: { type: 'string', default: '2000' },
    payload: { type: 'string', default: '400' },
    rounds: { type: 'string', default: '3' },
    cases: { type: 'string' },
    'keep-stack': { type: 'boolean', default: false },
  },
});
const events = flag('--events', values.events, p.integer(1_000, 10_000_000));
const batch = flag('--batch', values.batch, p.integer(1, 100_000));
const payload = flag('--payload', values.payload, p.integer(120, 1_000_000));
const rounds = flag('--rounds', values.rounds, p.integer(1, 10));
const cases: readonly ProducerCase[] =
  values.cases === undefined ? CASES : [...new Set([...flag('--cases', values.cases, p.commaList('kafkajs,platformatic')).map((name) => flag('--cases', name, p.oneOf(...CASES))), 'kafkajs' as const])];

interface Result {
  readonly eventsPerSecond: number;
  readonly cpuMicrosPerEvent: number;
  readonly busyPercent: number;
}

async function main(): Promise<void> {
  const ownStack = process.env.OUTBOX_STACK_DIR === undefined;
  const env = await upBenchStack(STACK_DEFAULTS, ['kafka']);
  const kafka = new KafkaTools({ brokers: env.KAFKA_BROKERS!.split(',') });
  const results = new Map<string, Result[]>(cases.map((each) => [each, []]));
  try {
    for (let round = 1; round <= rounds; round += 1) {
      // Alternated, so that no case always runs on a warmer (or busier) machine.
      for (const each of round % 2 === 1 ? cases : [...cases].reverse()) {
        const topic = `bench-producers.${each}.r${round}`;
        await kafka.createTopic(topic);
        const result = await produceOnce(env.KAFKA_BROKERS!, each, topic);
        progress(`round ${round}/${rounds}: ${each} produced ${events} events at ${Math.round(result.eventsPerSecond)}/s, ${result.cpuMicrosPerEvent.toFixed(1)} µs CPU each`);
        results.get(each)!.push(result);
      }
    }
    writeReport(results);
  } finally {
    await kafka.deleteTopics('bench-producers.');
    await kafka.close();
    if (ownStack && !values['keep-stack']) {
      progress(`taking the bench's stack down (OUTBOX_STACK_DIR=${process.env.OUTBOX_STACK_DIR} scripts/stack.sh down kafka)`);
      await run(STACK_SCRIPT, ['down', 'kafka'], { cwd: REPO });
    }
  }
}

async function produceOnce(brokers: string, each: string, topic: string): Promise<Result> {
  const machine = machineCpu();
  const child = new Child(each, process.execPath, [join(BUILD_DIR, 'bench', 'contenders', 'producer-floor.js')], {
    KAFKA_BROKERS: brokers,
    BENCH_CASE: each,
    BENCH_TOPIC: topic,
    BENCH_EVENTS: String(events),
    BENCH_BATCH: String(batch),
    BENCH_PAYLOAD: String(payload),
  });
  const code = await child.exited;
  const line = child.output.find((entry) => entry.startsWith('{"case"'));
  if (code !== 0 || !line) throw new Error(`${each} ended with ${child.ended}:\n${child.tail()}`);
  const { ms, cpuMs } = JSON.parse(line) as { ms: number; cpuMs: number };
  return { eventsPerSecond: events / (ms / 1000), cpuMicrosPerEvent: (cpuMs * 1000) / events, busyPercent: machineBusyPercent(machine) };
}


function writeReport(results: ReadonlyMap<string, Result[]>): void {
  const rate = (name: string) => median(results.get(name)!.map((result) => result.eventsPerSecond));
  const cpu = (name: string) => median(results.get(name)!.map((result) => result.cpuMicrosPerEvent));
  const lines = [
    `# The Kafka clients alone: the same records produced, no Postgres (${new Date().toISOString().slice(0, 10)})`,
    '',
    `\`npm run bench:producers -- --events ${events} --batch ${batch} --payload ${payload} --rounds ${rounds}${values.cases === undefined ? '' : ` --cases ${cases.join(',')}`}\`; ${machineDescription()}.`,
    `${events} records like the relay's (its headers, a ${payload}-byte JSON value, keyed by aggregate id) to a 3-partition topic, in requests of ${batch}, one at a time, each awaited until acknowledged (acks=all, idempotent); the records made before the clock starts; each case in a process of its own, cases alternating per round; medians of ${rounds} rounds. CPU is the producing process's, the client's threads included.`,
    '',
    '| case | events/s | against kafkajs | CPU µs/event | CPU against kafkajs | machine busy % |',
    '| --- | ---: | ---: | ---: | ---: | ---: |',
    ...cases.map((each) => `| ${each} | ${Math.round(rate(each))} | ${((rate(each) / rate('kafkajs')) * 100).toFixed(0)}% | ${cpu(each).toFixed(1)} | ${((cpu(each) / cpu('kafkajs')) * 100).toFixed(0)}% | ${median(results.get(each)!.map((result) => result.busyPercent)).toFixed(0)} |`),
    '',
    '`binding`: the librdkafka binding called with arguments made beforehand (headers as one flat list, scripts/kafka-javascript.patch), the floor under `librdkafka`; `binding-header-objects`: the same with the binding\'s own header form, an object per header; `binding-no-headers`: the same without the records\' headers; `binding-error-reports`: the same with delivery reports for failed records only, each request awaited by flush(); `librdkafka`, `kafkajs` and `platformatic`: the relay\'s producers (src/kafka).',
    '',
  ];
  writeMarkdownResult('producers', lines);
}

await main();

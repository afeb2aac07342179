import { label, type ContenderName } from './contenders.js';
import type { DrainResult, SteadyResult } from './measure.js';
import type { BenchRun } from './report.js';
import { int, num, pct } from './format.js';

/** The clients of OUTBOX_KAFKA_CLIENT, at-least-once and exactly-once, each row [kafkajs, librdkafka, platformatic]. */
const CLIENT_ROWS: readonly (readonly ContenderName[])[] = [
  ['relay-json', 'relay-json-librdkafka', 'relay-json-platformatic'],
  ['relay-json-exactly-once', 'relay-json-librdkafka-exactly-once', 'relay-json-platformatic-exactly-once'],
];
const CLIENT_NAMES = ['kafkajs', 'librdkafka', 'platformatic'] as const;

/** What a client must reach to become the default (issues 31, 64): its drain share of the fastest on every workload, and its p99 at most the default's. */
export const LIBRDKAFKA_DRAIN_SHARE = 0.95;

/** The clients side by side, workload by workload, in the drains and the steady loads: each client that ran, and its share of the fastest. */
export function clientsSection(run: BenchRun): string[] {
  const ran = CLIENT_NAMES.filter((_, index) => CLIENT_ROWS.some((row) => run.drains.some((d) => d.contender === row[index])));
  const out = ['', `## Kafka clients: ${ran.join(', ')}`, ''];
  out.push('The same relay, its produce path on kafkajs (the relay\'s per-partition send and Produce encoder), on librdkafka (OUTBOX_KAFKA_CLIENT=librdkafka: ' +
    '`produce()` with delivery reports, librdkafka\'s idempotence and batching; its own linger 2 ms to queue a whole batch, the sink lingers as on kafkajs) or on @platformatic/kafka ' +
    '(OUTBOX_KAFKA_CLIENT=platformatic: its idempotent producer, one request in flight per broker). Same slot contents, drained one after the other. ÷ fastest: the client\'s events/s over the fastest client\'s on that workload.', '');
  out.push(`| workload | ${ran.map((name) => `${name} events/s`).join(' | ')} | ${ran.map((name) => `${name} ÷ fastest`).join(' | ')} | relay CPU µs/event, ${ran.join(' / ')} | peak RSS MB, ${ran.join(' / ')} |`);
  out.push(`| --- | ${ran.map(() => '---:').join(' | ')} | ${ran.map(() => '---:').join(' | ')} | ---: | ---: |`);
  const pick = (row: readonly ContenderName[]) => ran.map((name) => row[CLIENT_NAMES.indexOf(name)]!);
  for (const row of CLIENT_ROWS) {
    for (const workload of new Set(run.drains.map((d) => d.workload))) {
      const found = pick(row).map((contender) => run.drains.find((d) => d.workload === workload && d.contender === contender));
      if (found.filter(Boolean).length < 2) continue;
      const fastest = Math.max(...found.map((d) => (d ? rateOf(d) : 0)).filter((rate) => !Number.isNaN(rate)));
      const each = (f: (d: DrainResult) => string) => found.map((d) => (d ? f(d) : '–'));
      out.push(`| ${workload}${row[0]!.includes('exactly-once') ? ', exactly-once' : ''} | ${each((d) => int(rateOf(d))).join(' | ')} | ${each((d) => pct(rateOf(d) / fastest)).join(' | ')} | ${each((d) => num(cpuPerEvent(d), 1)).join(' / ')} | ${each((d) => num(d.peakRssMb, 0)).join(' / ')} |`);
    }
  }
  const steady = CLIENT_ROWS.flatMap((row) =>
    [...new Set(run.steady.map((s) => s.offeredPerSecond))].flatMap((rate) => {
      const found = pick(row).map((contender) => run.steady.find((s) => s.contender === contender && s.offeredPerSecond === rate));
      if (found.filter(Boolean).length < 2) return [];
      return [`| ${int(rate)}/s${row[0]!.includes('exactly-once') ? ', exactly-once' : ''} | ${found.map((s) => (s ? latency(s) : '–')).join(' | ')} | ${found.map((s) => (s ? num(cpuPerSteadyEvent(s), 1) : '–')).join(' / ')} |`];
    }),
  );
  if (steady.length > 0) out.push('', `| steady load | ${ran.map((name) => `${name} p50 / p99 / max ms`).join(' | ')} | relay CPU µs/event, ${ran.join(' / ')} |`, `| --- | ${ran.map(() => '---:').join(' | ')} | ---: |`, ...steady);
  return out;
}

/** The relay JSON with each codec: drain rate, CPU and what an event takes on the broker's disk. */
export function compressionSection(run: BenchRun): string[] {
  const codecs = run.drains.filter((d) => /-(gzip|snappy|lz4|zstd)$/.test(d.contender));
  if (codecs.length === 0) return [];
  const out = ['', '## Compression (OUTBOX_KAFKA_COMPRESSION)', ''];
  out.push('Broker bytes/event: the drained topic\'s log segments (every partition\'s .log files) on the broker\'s disk divided by the events, read as the last record arrived: ' +
    'record batches with their headers (event_id, event_type, aggregate_type, outbox_commit_lsn, created_at) and keys, compressed or not. ' +
    'The bench\'s payloads are JSON of random hex (db.ts: `md5` text), which compresses less than real billing JSON with repeated field names.', '');
  out.push('| workload | contender | events/s | ÷ uncompressed, same client | relay CPU µs/event | broker bytes/event | ÷ uncompressed bytes |');
  out.push('| --- | --- | ---: | ---: | ---: | ---: | ---: |');
  for (const workload of new Set(run.drains.map((d) => d.workload))) {
    const rows = run.drains.filter((d) => d.workload === workload && (codecs.some((c) => c.contender === d.contender) || d.contender === 'relay-json' || d.contender === 'relay-json-librdkafka'));
    for (const d of rows) {
      const base = run.drains.find((b) => b.workload === workload && b.contender === (d.contender.includes('librdkafka') ? 'relay-json-librdkafka' : 'relay-json'));
      const bytes = d.brokerBytesPerEvent ?? NaN;
      out.push(`| ${workload} | ${label(d.contender)} | ${int(rateOf(d))} | ${base && base !== d ? pct(rateOf(d) / rateOf(base)) : '–'} | ${num(cpuPerEvent(d), 1)} | ${int(bytes)} | ${base && base !== d ? pct(bytes / (base.brokerBytesPerEvent ?? NaN)) : '–'} |`);
    }
  }
  return out;
}

function rateOf(d: DrainResult): number {
  return d.error ? NaN : d.eventsPerSecond;
}

function cpuPerEvent(d: DrainResult): number {
  return (d.cpuSeconds * 1e6) / d.events;
}

function cpuPerSteadyEvent(s: SteadyResult): number {
  return (s.cpuSeconds * 1e6) / Math.max(1, s.received);
}

function latency(s: SteadyResult): string {
  return s.error ? `failed: ${s.error}` : `${num(s.p50, 0)} / ${num(s.p99, 0)} / ${num(s.max, 0)}`;
}

import { label, type ContenderName } from './contenders.js';
import type { DrainResult, SteadyResult } from './measure.js';
import type { BenchRun } from './report.js';
import { int, num, pct } from './format.js';

/** The two clients of OUTBOX_KAFKA_CLIENT, at-least-once and exactly-once, each pair [kafkajs, librdkafka]. */
const CLIENT_PAIRS: readonly (readonly [ContenderName, ContenderName])[] = [
  ['relay-json', 'relay-json-librdkafka'],
  ['relay-json-exactly-once', 'relay-json-librdkafka-exactly-once'],
];

/** What librdkafka must reach to become the default (issue 31): its drain share on every workload, and its p99 at most kafkajs's. */
export const LIBRDKAFKA_DRAIN_SHARE = 0.95;

/** kafkajs against librdkafka, workload by workload, in the drains and the steady loads. */
export function clientsSection(run: BenchRun): string[] {
  const out = ['', '## Kafka clients: kafkajs against librdkafka', ''];
  out.push('The same relay, its produce path on kafkajs (the relay\'s per-partition send and Produce encoder) or on librdkafka (OUTBOX_KAFKA_CLIENT=librdkafka: ' +
    '`produce()` with delivery reports, librdkafka\'s idempotence and batching; its own linger 2 ms to queue a whole batch, the sink lingers as on kafkajs). Same slot contents, drained one after the other.', '');
  out.push('| workload | kafkajs events/s | librdkafka events/s | librdkafka ÷ kafkajs | relay CPU µs/event, kafkajs / librdkafka | peak RSS MB, kafkajs / librdkafka |');
  out.push('| --- | ---: | ---: | ---: | ---: | ---: |');
  for (const [kafkajs, librdkafka] of CLIENT_PAIRS) {
    for (const workload of new Set(run.drains.map((d) => d.workload))) {
      const a = run.drains.find((d) => d.workload === workload && d.contender === kafkajs);
      const b = run.drains.find((d) => d.workload === workload && d.contender === librdkafka);
      if (!a || !b) continue;
      const pair = (f: (d: DrainResult) => string) => `${f(a)} / ${f(b)}`;
      out.push(`| ${workload}${kafkajs.includes('exactly-once') ? ', exactly-once' : ''} | ${int(rateOf(a))} | ${int(rateOf(b))} | ${pct(rateOf(b) / rateOf(a))} | ${pair((d) => num(cpuPerEvent(d), 1))} | ${pair((d) => num(d.peakRssMb, 0))} |`);
    }
  }
  const steady = CLIENT_PAIRS.flatMap(([kafkajs, librdkafka]) =>
    [...new Set(run.steady.map((s) => s.offeredPerSecond))].flatMap((rate) => {
      const a = run.steady.find((s) => s.contender === kafkajs && s.offeredPerSecond === rate);
      const b = run.steady.find((s) => s.contender === librdkafka && s.offeredPerSecond === rate);
      return a && b ? [`| ${int(rate)}/s${kafkajs.includes('exactly-once') ? ', exactly-once' : ''} | ${latency(a)} | ${latency(b)} | ${num(cpuPerSteadyEvent(a), 1)} / ${num(cpuPerSteadyEvent(b), 1)} |`] : [];
    }),
  );
  if (steady.length > 0) out.push('', '| steady load | kafkajs p50 / p99 / max ms | librdkafka p50 / p99 / max ms | relay CPU µs/event, kafkajs / librdkafka |', '| --- | ---: | ---: | ---: |', ...steady);
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

/**
 * The floors of this round (issue 16; issue 17's for exactly-once), each against figures of the same run: one row per floor
 * and workload, PASS / FAIL with the figures, or "not measured" (e.g. a --quick run's missing
 * workloads, or Debezium skipped).
 */
import { CEILING, type ContenderName } from './contenders.js';
import { formatCount, serverBusy, type DrainResult } from './measure.js';
import type { BenchRun } from './report.js';
import { int, num, pct } from './format.js';
import { LIBRDKAFKA_DRAIN_SHARE } from './report-clients.js';

export interface Floor {
  readonly name: string;
  readonly workload: string;
  readonly measured: string;
  readonly pass: boolean | null;
}

/** The four drain workloads every floor on throughput covers: rows per transaction × payload. */
const SHAPES = [
  { rowsPerTx: 1, payloadBytes: 300 },
  { rowsPerTx: 100, payloadBytes: 300 },
  { rowsPerTx: 1, payloadBytes: 2000 },
  { rowsPerTx: 100, payloadBytes: 2000 },
] as const;

const CEILING_SHARE = 0.9;
const AVRO_SHARE = 0.9;
const RSS_MB = 160;
const LATENCY_P99_MS: readonly (readonly [number, number])[] = [
  [1000, 25],
  [5000, 50],
];
const TIMES_OTHERS = 4;
const EXACTLY_ONCE_SHARE = 0.7;
const EXACTLY_ONCE_P99_MS = 100;

export function floors(run: BenchRun): Floor[] {
  const rows: Floor[] = [];
  const workloads = [...new Set(run.drains.map((d) => d.workload))];
  const missing = SHAPES.filter((shape) => !run.drains.some((d) => d.rowsPerTx === shape.rowsPerTx && d.payloadBytes === shape.payloadBytes)).map(
    (shape) => `${shape.rowsPerTx}-row tx, ${shape.payloadBytes >= 1000 ? `${shape.payloadBytes / 1000} KB` : `${shape.payloadBytes} B`}`,
  );
  const notMeasured = (name: string) => missing.map((workload) => ({ name, workload, measured: 'not in this run', pass: null }));

  const ceilingName = `relay JSON ≥ ${pct(CEILING_SHARE)} of the pg_recvlogical ceiling`;
  for (const w of workloads) rows.push(share(ceilingName, w, rate(run, w, 'relay-json'), rate(run, w, CEILING), CEILING_SHARE, 'relay JSON', 'pg_recvlogical'));
  rows.push(...notMeasured(ceilingName));

  const avroName = `Avro ≥ ${pct(AVRO_SHARE)} of JSON`;
  for (const w of workloads) rows.push(share(avroName, w, rate(run, w, 'relay-avro'), rate(run, w, 'relay-json'), AVRO_SHARE, 'Avro', 'JSON'));
  rows.push(...notMeasured(avroName));

  const million = run.drains.find((d) => d.contender === 'relay-json' && d.events >= 1_000_000);
  const biggest = run.drains.filter((d) => d.contender === 'relay-json' && !d.error).sort((a, b) => b.events - a.events)[0];
  const peak = million && !million.error ? peakRss(million) : null;
  rows.push({
    name: `peak RSS ≤ ${RSS_MB} MB draining 1M events`,
    workload: million?.workload ?? '1M events, 1-row tx, 300 B',
    measured: peak ? peak.text : `not in this run${biggest ? `; ${num(biggest.peakRssMb, 0)} MB draining ${formatCount(biggest.events)}` : ''}`,
    pass: peak ? peak.mb <= RSS_MB : null,
  });

  for (const [rateOffered, limit] of LATENCY_P99_MS) {
    const s = run.steady.find((r) => r.contender === 'relay-json' && r.offeredPerSecond === rateOffered);
    rows.push({
      name: `p99 commit-to-consumer ≤ ${limit} ms at ${formatCount(rateOffered)} events/s`,
      workload: `steady ${formatCount(rateOffered)}/s, relay JSON`,
      measured: s && !s.error ? `p99 ${s.p99} ms (p50 ${s.p50} ms, ${s.received}/${s.events} matched)` : 'not in this run',
      pass: s && !s.error ? s.p99 <= limit : null,
    });
  }

  // Issue 17: what exactly-once costs, against at-least-once in the same run (only when it ran).
  if (run.drains.some((d) => d.contender === 'relay-json-exactly-once')) {
    const eosName = `exactly-once ≥ ${pct(EXACTLY_ONCE_SHARE)} of at-least-once`;
    for (const w of workloads) rows.push(share(eosName, w, rate(run, w, 'relay-json-exactly-once'), rate(run, w, 'relay-json'), EXACTLY_ONCE_SHARE, 'exactly-once', 'at-least-once'));
    const s = run.steady.find((r) => r.contender === 'relay-json-exactly-once' && r.offeredPerSecond === 1000);
    rows.push({
      name: `exactly-once p99 commit-to-consumer ≤ ${EXACTLY_ONCE_P99_MS} ms at 1k events/s`,
      workload: 'steady 1k/s, relay JSON exactly-once (read_committed consumer)',
      measured: s && !s.error ? `p99 ${s.p99} ms (p50 ${s.p50} ms, ${s.received}/${s.events} matched)` : 'not in this run',
      pass: s && !s.error ? s.p99 <= EXACTLY_ONCE_P99_MS : null,
    });
  }

  // Issue 31: librdkafka becomes the default client only if it keeps kafkajs's drain rate and latency.
  if (run.drains.some((d) => d.contender === 'relay-json-librdkafka')) {
    const clientName = `librdkafka ≥ ${pct(LIBRDKAFKA_DRAIN_SHARE)} of kafkajs (the default's condition)`;
    for (const w of workloads) rows.push(share(clientName, w, rate(run, w, 'relay-json-librdkafka'), rate(run, w, 'relay-json'), LIBRDKAFKA_DRAIN_SHARE, 'librdkafka', 'kafkajs'));
    for (const [rateOffered] of LATENCY_P99_MS) {
      const a = run.steady.find((r) => r.contender === 'relay-json' && r.offeredPerSecond === rateOffered);
      const b = run.steady.find((r) => r.contender === 'relay-json-librdkafka' && r.offeredPerSecond === rateOffered);
      const both = a && b && !a.error && !b.error;
      rows.push({
        name: `librdkafka p99 ≤ kafkajs p99 at ${formatCount(rateOffered)} events/s (the default's condition)`,
        workload: `steady ${formatCount(rateOffered)}/s, relay JSON`,
        measured: both ? `librdkafka p99 ${b.p99} ms vs kafkajs ${a.p99} ms (p50 ${b.p50} vs ${a.p50} ms)` : 'not in this run',
        pass: both ? b.p99 <= a.p99 : null,
      });
    }
  }

  for (const [other, otherLabel] of [['polling', 'the polling relay'], ['debezium', 'Debezium']] as const) {
    const name = `relay JSON ≥ ${TIMES_OTHERS}× ${otherLabel}`;
    // The 1M drain is for the CDC contenders only.
    for (const w of workloads.filter((w) => run.drains.some((d) => d.workload === w && (d.contender === 'polling' || d.contender === 'debezium')))) {
      const relay = rate(run, w, 'relay-json');
      const them = rate(run, w, other);
      // What Postgres's own client reaches against them on the same load, and how busy the
      // relay's walsender was: the one says what a plain pgoutput client gets, the other whether
      // decoding or the cores everything shares set the pace.
      const ceiling = rate(run, w, CEILING);
      const relayDrain = run.drains.find((d) => d.workload === w && d.contender === 'relay-json');
      const walsender = relayDrain && Number.isFinite(serverBusy(relayDrain)) ? `; the relay's walsender ${pct(serverBusy(relayDrain))} busy` : '';
      const bound = (Number.isFinite(ceiling) ? `; pg_recvlogical ${num(ceiling / them, 2)}×` : '') + walsender;
      rows.push({
        name,
        workload: w,
        measured: Number.isFinite(them) ? `${int(relay)} vs ${int(them)} events/s = ${num(relay / them, 2)}×${bound}` : other === 'debezium' && run.debeziumNote ? `not measured: ${run.debeziumNote}` : 'not measured',
        pass: ok(relay / them >= TIMES_OTHERS, relay, them),
      });
    }
    rows.push(...notMeasured(name));
  }
  return rows;
}

/** A drain's peak RSS; repeated, the median of its drains', each named. */
function peakRss(d: DrainResult): { mb: number; text: string } {
  if (!d.runs) return { mb: d.peakRssMb, text: `${num(d.peakRssMb, 0)} MB` };
  const peaks = d.runs.map((r) => r.peakRssMb);
  const mb = [...peaks].sort((a, b) => a - b)[(peaks.length - 1) >> 1]!;
  return { mb, text: `${num(mb, 0)} MB (median of ${peaks.length} drains: ${peaks.map((p) => num(p, 0)).join(', ')} MB)` };
}

function share(name: string, workload: string, value: number, of: number, floor: number, valueLabel: string, ofLabel: string): Floor {
  const measured = Number.isFinite(value) && Number.isFinite(of) ? `${valueLabel} ${int(value)} vs ${ofLabel} ${int(of)} events/s = ${pct(value / of)}` : `${valueLabel} ${int(value)}, ${ofLabel} ${int(of)} events/s`;
  return { name, workload, measured, pass: ok(value / of >= floor, value, of) };
}

export function rate(run: BenchRun, workload: string, contender: ContenderName): number {
  const d: DrainResult | undefined = run.drains.find((r) => r.workload === workload && r.contender === contender);
  return d && !d.error ? d.eventsPerSecond : NaN;
}

function ok(pass: boolean, ...values: number[]): boolean | null {
  return values.every(Number.isFinite) ? pass : null;
}

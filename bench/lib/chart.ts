import type { ContenderName } from './contenders.js';
import type { BenchRun } from './report.js';
import { Canvas, type Rgb } from './png.js';

const COLOR: Record<ContenderName, Rgb> = {
  ceiling: [150, 150, 150],
  'relay-json': [31, 119, 180],
  'relay-json-sasl-ssl': [148, 103, 189],
  'relay-avro': [23, 190, 207],
  polling: [214, 39, 40],
  debezium: [44, 160, 44],
};

const SHORT: Record<ContenderName, string> = {
  ceiling: 'decode ceiling',
  'relay-json': 'relay JSON',
  'relay-json-sasl-ssl': 'relay JSON, SASL_SSL',
  'relay-avro': 'relay Avro',
  polling: 'polling relay',
  debezium: 'Debezium',
};

const WIDTH = 1100;
const LEFT = 220;
const BAR = 16;
const GAP = 4;

/** Two panels: drain throughput per workload, and p99 latency per offered rate. */
export function renderChart(run: BenchRun): Buffer {
  const workloads = [...new Set(run.drains.map((d) => d.workload))];
  const rates = [...new Set(run.steady.map((s) => s.offeredPerSecond))];
  const drainRows = workloads.reduce((n, w) => n + run.drains.filter((d) => d.workload === w).length, 0);
  const steadyRows = run.steady.length;
  const height = 90 + workloads.length * 30 + drainRows * (BAR + GAP) + 90 + rates.length * 30 + steadyRows * (BAR + GAP) + 30;
  const canvas = new Canvas(WIDTH, height);
  let y = 14;
  canvas.text(16, y, `outbox-relay benchmark ${run.date}${run.quick ? ' (quick)' : ''}`, [0, 0, 0], 3);
  y += 34;
  const fsync = run.postgres.includes('fsync=off') ? 'fsync off' : 'fsync on';
  canvas.text(16, y, `Postgres 15 (${fsync}), Kafka 4.4, acks=all; all on the same 2 cores`, [90, 90, 90]);
  y += 30;
  canvas.text(16, y, 'backlog drain, events/s (higher is better)', [0, 0, 0]);
  y += 24;
  const maxRate = Math.max(1, ...run.drains.map((d) => (Number.isFinite(d.eventsPerSecond) ? d.eventsPerSecond : 0)));
  for (const workload of workloads) {
    canvas.text(16, y + 6, workload, [60, 60, 60]);
    y += 26;
    for (const d of run.drains.filter((r) => r.workload === workload)) {
      canvas.text(30, y + 1, SHORT[d.contender], [80, 80, 80]);
      const value = Number.isFinite(d.eventsPerSecond) ? d.eventsPerSecond : 0;
      const w = ((WIDTH - LEFT - 120) * value) / maxRate;
      canvas.rect(LEFT, y, w, BAR, COLOR[d.contender]);
      canvas.text(LEFT + w + 6, y + 1, d.error ? 'failed' : Math.round(value).toLocaleString('en-US'));
      y += BAR + GAP;
    }
  }
  y += 30;
  canvas.text(16, y, 'steady load: commit-to-consumer latency p50 / p99, ms (lower is better)', [0, 0, 0]);
  y += 24;
  const maxLatency = Math.max(1, ...run.steady.map((s) => (Number.isFinite(s.p99) ? s.p99 : 0)));
  for (const rate of rates) {
    canvas.text(16, y + 6, `${rate.toLocaleString('en-US')} events/s offered`, [60, 60, 60]);
    y += 26;
    for (const s of run.steady.filter((r) => r.offeredPerSecond === rate)) {
      canvas.text(30, y + 1, SHORT[s.contender], [80, 80, 80]);
      const p99 = Number.isFinite(s.p99) ? s.p99 : 0;
      const p50 = Number.isFinite(s.p50) ? s.p50 : 0;
      const span = WIDTH - LEFT - 160;
      const color = COLOR[s.contender];
      canvas.rect(LEFT, y, (span * p99) / maxLatency, BAR, lighter(color));
      canvas.rect(LEFT, y, (span * p50) / maxLatency, BAR, color);
      canvas.text(LEFT + (span * p99) / maxLatency + 6, y + 1, s.error ? 'failed' : Number.isFinite(s.p99) ? `${s.p50} / ${s.p99}` : 'no records matched');
      y += BAR + GAP;
    }
  }
  return canvas.png();
}

function lighter([r, g, b]: Rgb): Rgb {
  return [Math.round(r + (255 - r) * 0.55), Math.round(g + (255 - g) * 0.55), Math.round(b + (255 - b) * 0.55)];
}

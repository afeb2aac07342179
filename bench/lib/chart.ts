import { spec, type ContenderName } from './contenders.js';
import type { BenchRun } from './report.js';
import { Canvas, type Rgb } from './png.js';
import type { SoakMinute } from './soak.js';

const color = (name: ContenderName): Rgb => spec(name).color;
const short = (name: ContenderName): string => spec(name).short;

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
      canvas.text(30, y + 1, short(d.contender), [80, 80, 80]);
      const value = Number.isFinite(d.eventsPerSecond) ? d.eventsPerSecond : 0;
      const w = ((WIDTH - LEFT - 120) * value) / maxRate;
      canvas.rect(LEFT, y, w, BAR, color(d.contender));
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
      canvas.text(30, y + 1, short(s.contender), [80, 80, 80]);
      const p99 = Number.isFinite(s.p99) ? s.p99 : 0;
      const p50 = Number.isFinite(s.p50) ? s.p50 : 0;
      const span = WIDTH - LEFT - 160;
      const shade = color(s.contender);
      canvas.rect(LEFT, y, (span * p99) / maxLatency, BAR, lighter(shade));
      canvas.rect(LEFT, y, (span * p50) / maxLatency, BAR, shade);
      canvas.text(LEFT + (span * p99) / maxLatency + 6, y + 1, s.error ? 'failed' : Number.isFinite(s.p99) ? `${s.p50} / ${s.p99}` : 'no records matched');
      y += BAR + GAP;
    }
  }
  return canvas.png();
}

function lighter([r, g, b]: Rgb): Rgb {
  return [Math.round(r + (255 - r) * 0.55), Math.round(g + (255 - g) * 0.55), Math.round(b + (255 - b) * 0.55)];
}

const PANEL_HEIGHT = 220;
const PLOT_LEFT = 90;

/**
 * The soak over its minutes, one line per contender in each panel: p99 latency (p50 dotted),
 * the database's CPU per event, and the outbox's size (table + indexes).
 */
export function renderSoakChart(run: BenchRun): Buffer {
  const soak = (run.soak ?? []).filter((s) => s.minutes.length > 0);
  const panels: { title: string; value: (m: SoakMinute) => number; dotted?: (m: SoakMinute) => number }[] = [
    { title: 'commit-to-consumer latency, ms: p99 (line) and p50 (dots)', value: (m) => m.p99, dotted: (m) => m.p50 },
    {
      title: "database CPU, microseconds per event: all (line), minus the load's INSERTs (dots)",
      value: (m) => (m.events > 0 ? (m.dbCpuSeconds * 1e6) / m.events : NaN),
      dotted: (m) => (m.events > 0 && m.loadCpuSeconds !== undefined ? ((m.dbCpuSeconds - m.loadCpuSeconds) * 1e6) / m.events : NaN),
    },
    { title: 'outbox size at the end of the minute, MB (table + indexes)', value: (m) => (m.tableBytes + m.indexBytes) / 2 ** 20 },
  ];
  const height = 90 + panels.length * (PANEL_HEIGHT + 60) + 20;
  const canvas = new Canvas(WIDTH, height);
  canvas.text(16, 14, `soak ${run.date}: ${soak[0]?.offeredPerSecond ?? '?'} events/s offered, never pruned`, [0, 0, 0], 3);
  let legend = 16;
  for (const s of soak) {
    canvas.rect(legend, 56, 14, 10, color(s.contender));
    legend += 40 + canvas.text(legend + 20, 54, short(s.contender), [60, 60, 60]);
  }
  canvas.text(legend + 10, 54, `x: minute; ${run.postgres.includes('fsync=off') ? 'fsync off' : 'fsync on'}`, [90, 90, 90]);
  const minutes = Math.max(1, ...soak.map((s) => s.minutes.length));
  let y = 90;
  for (const panel of panels) {
    canvas.text(16, y, panel.title, [0, 0, 0]);
    y += 24;
    const values = soak.flatMap((s) => s.minutes.flatMap((m) => [panel.value(m), panel.dotted?.(m) ?? NaN])).filter(Number.isFinite);
    const max = niceMax(Math.max(1e-9, ...values));
    const plot = { x: PLOT_LEFT, y, w: WIDTH - PLOT_LEFT - 40, h: PANEL_HEIGHT };
    axes(canvas, plot, max, minutes);
    const at = (minute: number, value: number): [number, number] => [plot.x + (minutes === 1 ? plot.w / 2 : ((minute - 1) * plot.w) / (minutes - 1)), plot.y + plot.h - (plot.h * value) / max];
    for (const s of soak) {
      const shade = color(s.contender);
      polyline(canvas, s.minutes.map((m) => [m.minute, panel.value(m)] as const), at, shade, false);
      if (panel.dotted) polyline(canvas, s.minutes.map((m) => [m.minute, panel.dotted!(m)] as const), at, shade, true);
    }
    y += PANEL_HEIGHT + 36;
  }
  return canvas.png();
}

function axes(canvas: Canvas, plot: { x: number; y: number; w: number; h: number }, max: number, minutes: number): void {
  const grey: Rgb = [200, 200, 200];
  for (let i = 0; i <= 4; i += 1) {
    const gy = plot.y + plot.h - (plot.h * i) / 4;
    canvas.rect(plot.x, gy, plot.w, 1, grey);
    const value = (max * i) / 4;
    canvas.text(16, gy - 6, value >= 100 ? Math.round(value).toLocaleString('en-US') : String(Number(value.toPrecision(3))), [90, 90, 90]);
  }
  canvas.rect(plot.x, plot.y, 1, plot.h, [120, 120, 120]);
  const step = Math.max(1, Math.ceil(minutes / 20));
  for (let minute = 1; minute <= minutes; minute += step) {
    const x = plot.x + (minutes === 1 ? plot.w / 2 : ((minute - 1) * plot.w) / (minutes - 1));
    canvas.text(x - 4, plot.y + plot.h + 6, String(minute), [90, 90, 90]);
  }
}

/** Points joined by 2-pixel segments (dotted: every fourth pixel); missing values break the line. */
function polyline(canvas: Canvas, points: readonly (readonly [number, number])[], at: (minute: number, value: number) => [number, number], shade: Rgb, dotted: boolean): void {
  let previous: [number, number] | null = null;
  for (const [minute, value] of points) {
    if (!Number.isFinite(value)) {
      previous = null;
      continue;
    }
    const point = at(minute, value);
    canvas.rect(point[0] - 3, point[1] - 3, 6, 6, dotted ? lighter(shade) : shade);
    if (previous) {
      const steps = Math.max(1, Math.ceil(Math.hypot(point[0] - previous[0], point[1] - previous[1])));
      for (let i = 0; i <= steps; i += dotted ? 4 : 1) {
        canvas.rect(previous[0] + ((point[0] - previous[0]) * i) / steps - 1, previous[1] + ((point[1] - previous[1]) * i) / steps - 1, 2, 2, shade);
      }
    }
    previous = point;
  }
}

/** 1, 2 or 5 times a power of ten, at least `value`. */
function niceMax(value: number): number {
  const power = 10 ** Math.floor(Math.log10(value));
  for (const factor of [1, 2, 5, 10]) if (factor * power >= value) return factor * power;
  return 10 * power;
}

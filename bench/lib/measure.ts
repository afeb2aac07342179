import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { AGGREGATE_TYPE, CDC_TABLE, Database, POLLING_TABLE } from './db.js';
import { LoadRig, topicPrefix } from './load.js';
import { isCeiling, isRelay, kind, label, RELAY_HTTP_PORT, slot, spec, startContender, type ContenderName, type Services } from './contenders.js';
import type { Recvlogical } from './recvlogical.js';
import { drainRate, KafkaTools, percentile, type DrainTiming } from './kafka.js';
import { type Child, machineBusyPercent, machineCpu, progress, sleep } from './proc.js';
import { CpuWatch, PostgresCpu } from './pg-cpu.js';

/** The Kafka a contender publishes to (the secured broker for relay-json-sasl-ssl), with admin rights. */
export type KafkaFor = (contender: ContenderName) => KafkaTools;

export interface DrainWorkload {
  readonly events: number;
  readonly rowsPerTx: number;
  readonly payloadBytes: number;
  readonly contenders: readonly ContenderName[];
  /**
   * Drains of each CDC contender but Debezium (whose start-up dwarfs a drain) from the one
   * load, the contenders taking turns: the result is the median drain, the others beside it.
   */
  readonly repeat: number;
  /** Relay settings for this workload (e.g. a smaller batch for big payloads). */
  readonly relayEnv?: Record<string, string>;
}

export interface DrainResult {
  readonly workload: string;
  readonly contender: ContenderName;
  readonly events: number;
  readonly rowsPerTx: number;
  readonly payloadBytes: number;
  readonly eventsPerSecond: number;
  readonly drainSeconds: number;
  readonly startupSeconds: number;
  readonly peakRssMb: number;
  readonly cpuSeconds: number;
  readonly walBytesPerEvent: number;
  readonly rowsWrittenPerEvent: number;
  /** All cores, everything on the machine, while this contender drained. */
  readonly machineBusyPct: number;
  /**
   * CPU seconds of the Postgres sessions serving the contender, start to last record: its
   * walsender (CDC contenders), its query sessions (polling). Absent in runs before it was measured.
   */
  readonly serverCpuSeconds?: number;
  /** Bytes of the drained topic's log segments on the broker per event (record batches, compressed or not); absent where not measured. */
  readonly brokerBytesPerEvent?: number;
  /** Relay only: session restarts (outbox_relay_reconnects_total) and the first warning. */
  readonly restarts?: number;
  readonly firstWarning?: string;
  readonly settings?: string;
  readonly error?: string;
  /** With --repeat: every drain of this contender, in the order drained (the fields above are the median one's). */
  readonly runs?: readonly DrainRun[];
}

/** The serving sessions' CPU as a share of one core, from the contender's start to its last record (NaN if not measured). */
export function serverBusy(d: DrainResult): number {
  return (d.serverCpuSeconds ?? NaN) / (d.startupSeconds + d.drainSeconds);
}

/** One of a contender's repeated drains of the same load. */
export interface DrainRun {
  readonly eventsPerSecond: number;
  readonly peakRssMb: number;
  readonly cpuSeconds: number;
}

export interface SteadyResult {
  readonly contender: ContenderName;
  readonly offeredPerSecond: number;
  readonly achievedPerSecond: number;
  readonly seconds: number;
  readonly events: number;
  readonly received: number;
  /** Records in the topic at the end (end offsets), to tell a slow consumer from a slow relay. */
  readonly inTopic: number;
  readonly p50: number;
  readonly p95: number;
  readonly p99: number;
  readonly max: number;
  /** p50 / p99 of commit to the record's CreateTime: the part before the produce request. */
  readonly toProduceP50: number;
  readonly toProduceP99: number;
  readonly machineBusyPct: number;
  readonly peakRssMb: number;
  readonly cpuSeconds: number;
  readonly error?: string;
}

export function workloadName(w: { events: number; rowsPerTx: number; payloadBytes: number }): string {
  return `${formatCount(w.events)} events, ${w.rowsPerTx}-row tx, ${w.payloadBytes >= 1000 ? `${w.payloadBytes / 1000} KB` : `${w.payloadBytes} B`}`;
}

export function formatCount(n: number): string {
  return n >= 1_000_000 ? `${n / 1_000_000}M` : n >= 1000 ? `${n / 1000}k` : String(n);
}

/**
 * One backlog drain: the CDC contenders share one load (each drain reads its own slot, created
 * before the load, so each sees the same WAL); the polling relay gets its own table and load.
 */
export async function drain(db: Database, kafka: KafkaFor, services: Services, workload: DrainWorkload): Promise<DrainResult[]> {
  const name = workloadName(workload);
  const results: DrainResult[] = [];
  const cdc = workload.contenders.filter((c) => c !== 'polling');
  const serverCpu = await PostgresCpu.find(db);
  if (cdc.length > 0) {
    // Round by round, every contender once, so that what else the machine does falls on all alike.
    const turns = Array.from({ length: workload.repeat }, (_, round) => cdc.filter((c) => round === 0 || kind(c) !== 'debezium').map((contender) => ({ contender, slot: round === 0 ? slot(contender) : `${slot(contender)}_${round + 1}` }))).flat();
    await db.reset();
    await db.freshCdcOutbox(turns[0]!.slot);
    for (const turn of turns.slice(1)) await db.query("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", [turn.slot]);
    const before = await db.counters(CDC_TABLE);
    const loadStart = Date.now();
    progress(`${name}: loading for ${cdc.join(', ')}`);
    await db.load(CDC_TABLE, 'e', workload.events, workload.rowsPerTx, workload.payloadBytes);
    // The backlog's end, where pg_recvlogical stops (--endpos).
    const endLsn = await db.currentLsn();
    const after = await db.settledCounters(CDC_TABLE);
    progress(`${name}: loaded in ${((Date.now() - loadStart) / 1000).toFixed(1)} s`);
    const walPerEvent = Number(after.walLsn - before.walLsn) / workload.events;
    const rowsPerEvent = (after.rowsWritten - before.rowsWritten) / workload.events;
    await db.settle(CDC_TABLE);
    const drained = new Map<ContenderName, DrainResult[]>();
    for (const { contender, slot: slotName } of turns) {
      await db.checkpoint();
      const result = await drainOne(kafka(contender), services, workload, contender, { walPerEvent, rowsPerEvent, endLsn, slot: slotName, cpu: serverCpu });
      drained.set(contender, [...(drained.get(contender) ?? []), result]);
      await db.dropSlot(slotName);
    }
    for (const runs of drained.values()) results.push(median(runs));
  }
  if (workload.contenders.includes('polling')) {
    await db.freshPollingOutbox();
    const before = await db.counters(POLLING_TABLE);
    progress(`${name}: loading for polling`);
    await db.load(POLLING_TABLE, 'e', workload.events, workload.rowsPerTx, workload.payloadBytes);
    await db.checkpoint();
    const result = await drainOne(kafka('polling'), services, workload, 'polling', { walPerEvent: NaN, rowsPerEvent: NaN, endLsn: '', cpu: serverCpu });
    const after = await db.settledCounters(POLLING_TABLE);
    results.push({
      ...result,
      walBytesPerEvent: Number(after.walLsn - before.walLsn) / workload.events,
      rowsWrittenPerEvent: (after.rowsWritten - before.rowsWritten) / workload.events,
    });
  }
  return results;
}

/** The drain of median events/s, with every drain beside it; a failed drain is the result (it is not outvoted). */
function median(runs: readonly DrainResult[]): DrainResult {
  if (runs.length === 1) return runs[0]!;
  const failed = runs.find((run) => run.error);
  const middle = failed ?? [...runs].sort((a, b) => a.eventsPerSecond - b.eventsPerSecond)[(runs.length - 1) >> 1]!;
  return { ...middle, runs: runs.map(({ eventsPerSecond, peakRssMb, cpuSeconds }) => ({ eventsPerSecond, peakRssMb, cpuSeconds })) };
}

async function drainOne(
  kafka: KafkaTools,
  services: Services,
  workload: DrainWorkload,
  contender: ContenderName,
  db: { walPerEvent: number; rowsPerEvent: number; endLsn: string; slot?: string; cpu: PostgresCpu },
): Promise<DrainResult> {
  const name = workloadName(workload);
  const prefix = topicPrefix(contender);
  const topic = `${prefix}.${AGGREGATE_TYPE}`;
  const relay = isRelay(contender);
  const settings = relay && workload.relayEnv ? Object.entries(workload.relayEnv).map(([k, v]) => `${k}=${v}`).join(' ') : undefined;
  const base = { settings, workload: name, contender, events: workload.events, rowsPerTx: workload.rowsPerTx, payloadBytes: workload.payloadBytes, walBytesPerEvent: db.walPerEvent, rowsWrittenPerEvent: db.rowsPerEvent };
  if (!isCeiling(contender)) await kafka.createTopic(topic);
  progress(`${name}: ${label(contender)} draining`);
  const server = await CpuWatch.start(db.cpu);
  const started = Date.now();
  const cpuAtStart = machineCpu();
  let child: Child | null = null;
  try {
    child = startContender(contender, services, prefix, { count: workload.events, endLsn: db.endLsn, relayEnv: workload.relayEnv, slot: db.slot });
    const running = child;
    let timing: DrainTiming;
    if (kind(contender) === 'recvlogical') {
      const { streamingAt, doneAt } = await (running as Recvlogical).finished(30 * 60_000);
      timing = { firstAt: streamingAt, firstCount: 0, doneAt, count: workload.events };
    } else if (kind(contender) === 'stages') timing = await stagesTiming(running, workload.events);
    else {
      timing = await kafka.waitForRecords(topic, workload.events, {
        timeoutMs: 30 * 60_000,
        stallMs: 90_000,
        alive: () => running.running,
        onProgress: (count, rate) => progress(`  ${label(contender)}: ${count}/${workload.events} (${Math.round(rate)}/s)`),
        // Transaction markers take offsets: count what the relay saw committed instead.
        ...(transactional(contender) && { count: publishedByRelay }),
      });
    }
    const usage = running.usage();
    const serverCpu = await server.stop();
    const brokerBytes = isCeiling(contender) || !services.kafkaLogDir ? null : topicLogBytes(services.kafkaLogDir, topic);
    const eventsPerSecond = drainRate(timing, started);
    const result: DrainResult = {
      ...base,
      eventsPerSecond,
      drainSeconds: (timing.doneAt - timing.firstAt) / 1000,
      startupSeconds: (timing.firstAt - started) / 1000,
      peakRssMb: usage?.peakRssMb ?? NaN,
      cpuSeconds: usage?.cpuSeconds ?? NaN,
      machineBusyPct: machineBusyPercent(cpuAtStart),
      serverCpuSeconds: serverCpu.walsender + serverCpu.contender,
      ...(brokerBytes !== null && { brokerBytesPerEvent: brokerBytes / workload.events }),
      ...(relay ? await relayHealth(running) : {}),
    };
    if (result.restarts) progress(`  ${label(contender)} restarted its session ${result.restarts} times; first warning: ${result.firstWarning}`);
    const secondHalf = timing.halfAt !== undefined && timing.doneAt > timing.halfAt ? `, second half ${Math.round(((timing.count - timing.halfCount!) * 1000) / (timing.doneAt - timing.halfAt))}/s` : '';
    progress(`${name}: ${label(contender)}: ${Math.round(eventsPerSecond)} events/s${secondHalf}, peak RSS ${result.peakRssMb.toFixed(0)} MB, CPU ${result.cpuSeconds.toFixed(1)} s, start-up ${result.startupSeconds.toFixed(1)} s`);
    return result;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    progress(`${name}: ${label(contender)} FAILED: ${message}\n${child?.tail() ?? ''}`);
    const health = relay && child ? await relayHealth(child) : {};
    return { ...base, ...health, eventsPerSecond: NaN, drainSeconds: NaN, startupSeconds: NaN, peakRssMb: NaN, cpuSeconds: NaN, machineBusyPct: NaN, error: message.split('\n')[0]! };
  } finally {
    server.cancel();
    await child?.stop();
    if (!isCeiling(contender)) await kafka.deleteTopics(prefix);
  }
}

/**
 * Bytes of a topic's log segments (every partition's *.log files) in the broker's log dir: what
 * the records take on the broker's disk, compressed or not, batch overhead included. Read right
 * after the last record arrived: the broker appended it before acknowledging.
 */
function topicLogBytes(logDir: string, topic: string): number | null {
  const partition = new RegExp(`^${topic.replace(/[.]/g, '\\.')}-\\d+$`);
  try {
    return readdirSync(logDir).filter((entry) => partition.test(entry)).reduce((sum, dir) => sum + readdirSync(join(logDir, dir)).filter((file) => file.endsWith('.log')).reduce((bytes, file) => bytes + statSync(join(logDir, dir, file)).size, 0), 0);
  } catch {
    return null;
  }
}

/** Session restarts from the relay's metrics, and its first warning or error log line. */
function transactional(contender: ContenderName): boolean {
  return isRelay(contender) && spec(contender).env?.OUTBOX_DELIVERY === 'exactly-once';
}

/** Events the relay counts as published (acknowledged; with exactly-once, committed), from its metrics; 0 until it serves them. */
async function publishedByRelay(): Promise<number> {
  try {
    const text = await (await fetch(`http://127.0.0.1:${RELAY_HTTP_PORT}/metrics`)).text();
    return text.split('\n').filter((line) => line.startsWith('outbox_relay_events_published_total{')).reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
  } catch {
    return 0;
  }
}

async function relayHealth(child: Child): Promise<{ restarts?: number; firstWarning?: string }> {
  let restarts: number | undefined;
  try {
    const text = await (await fetch(`http://127.0.0.1:${RELAY_HTTP_PORT}/metrics`)).text();
    restarts = text.split('\n').filter((line) => line.startsWith('outbox_relay_reconnects_total')).reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
  } catch {
    restarts = undefined;
  }
  let firstWarning: string | undefined;
  for (const line of child.output) {
    try {
      const entry = JSON.parse(line) as { level?: number; msg?: string; err?: string; error?: string };
      if ((entry.level ?? 0) >= 40 && !/Limiting retries/.test(entry.msg ?? '')) {
        const detail = entry.err ?? entry.error;
        firstWarning = `${entry.msg ?? ''}${detail ? `: ${detail}` : ''}`.slice(0, 300);
        break;
      }
    } catch {
      // not a JSON log line
    }
  }
  return { restarts, firstWarning };
}

/** relay-stages prints its count every 2 s and one line when it decoded them all. */
async function stagesTiming(child: Child, events: number) {
  let reported = 0;
  for (;;) {
    const done = child.output.find((line) => line.includes('"done"'));
    if (done) {
      const parsed = JSON.parse(done) as { count: number; firstAt: number; lastAt: number };
      return { firstAt: parsed.firstAt, firstCount: 1, doneAt: parsed.lastAt, count: parsed.count };
    }
    if (!child.running) throw new Error(`relay-stages exited early:\n${child.tail()}`);
    const progressLines = child.output.filter((line) => line.includes('"count"'));
    if (progressLines.length > reported) {
      reported = progressLines.length;
      progress(`  ${label('relay-stages')}: ${(JSON.parse(progressLines.at(-1)!) as { count: number }).count}/${events}`);
    }
    await sleep(50);
  }
}

/**
 * Steady offered load: single-row transactions at `rate`/s for `seconds`, from 8 sessions
 * with synchronous_commit on (an application's commit); a consumer matches each record to the
 * time its COMMIT returned.
 */
export async function steady(db: Database, kafkaFor: KafkaFor, services: Services, contender: ContenderName, rate: number, seconds: number): Promise<SteadyResult> {
  const rig = new LoadRig(db, kafkaFor(contender), contender);
  const title = `steady ${rate}/s`;
  try {
    const child = await rig.start(services, title);
    const { consumer } = rig;
    const cpuBefore = child.usage()?.cpuSeconds ?? 0;
    const machineAtStart = machineCpu();
    progress(`${title}: ${label(contender)} offered load for ${seconds} s`);
    const total = rate * seconds;
    const { seconds: elapsed } = await rig.offer(rate, seconds);
    await rig.matched(total, 60_000);
    const usage = child.usage();
    const inTopic = await rig.kafka.count(rig.topic);
    if (consumer.latencies.length < total) {
      progress(`${title}: only ${consumer.latencies.length}/${total} matched; ${inTopic} records in the topic; consumer received ${consumer.received}${consumer.crash ? `, consumer crashed: ${consumer.crash}` : ''}; contender ${child.running ? 'running' : 'exited'}:\n${child.tail(10)}`);
    }
    const sorted = [...consumer.latencies].sort((a, b) => a - b);
    const toProduce = [...consumer.toProduce].sort((a, b) => a - b);
    const result: SteadyResult = {
      contender,
      offeredPerSecond: rate,
      achievedPerSecond: total / elapsed,
      seconds: elapsed,
      events: total,
      received: sorted.length,
      inTopic: inTopic - 1,
      p50: percentile(sorted, 50),
      p95: percentile(sorted, 95),
      p99: percentile(sorted, 99),
      max: sorted.at(-1) ?? NaN,
      toProduceP50: percentile(toProduce, 50),
      toProduceP99: percentile(toProduce, 99),
      machineBusyPct: machineBusyPercent(machineAtStart),
      peakRssMb: usage?.peakRssMb ?? NaN,
      cpuSeconds: (usage?.cpuSeconds ?? NaN) - cpuBefore,
    };
    progress(`${title}: ${label(contender)}: p50 ${result.p50} ms, p99 ${result.p99} ms, max ${result.max} ms; commit to CreateTime p50 ${result.toProduceP50} / p99 ${result.toProduceP99} ms (${result.received}/${total} matched, offered ${result.achievedPerSecond.toFixed(0)}/s)`);
    return result;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    progress(`${title}: ${label(contender)} FAILED: ${message}\n${rig.child?.tail() ?? ''}`);
    return { contender, offeredPerSecond: rate, achievedPerSecond: NaN, seconds: NaN, events: 0, received: 0, inTopic: NaN, p50: NaN, p95: NaN, p99: NaN, max: NaN, toProduceP50: NaN, toProduceP99: NaN, machineBusyPct: NaN, peakRssMb: NaN, cpuSeconds: NaN, error: message.split('\n')[0]! };
  } finally {
    await rig.stop();
  }
}

/** The figures of `npm run bench:webhooks` and the Markdown report made of them. */
import type { KafkaClientName } from '../../src/sink/producer.js';
import { int, num, pct } from './format.js';

/** Webhooks at ≥ 70% of the ceiling's deliveries/s; first attempts within 100 ms at p99. */
export const FLOORS = { ceilingShare: 0.7, firstAttemptP99Ms: 100 } as const;

export interface StoreSize {
  readonly table: 'events' | 'deliveries' | 'attempts';
  readonly rows: number;
  readonly bytes: number;
}

export interface ThroughputCase {
  readonly endpoints: number;
  /** The client the webhooks consumer ran on (OUTBOX_KAFKA_CLIENT). */
  readonly kafkaClient: KafkaClientName;
  readonly events: number;
  readonly deliveries: number;
  /** Deliveries 'delivered' in the store when the case ended (all of them unless it timed out). */
  readonly delivered: number;
  /** `node dist/cli.js webhooks` from its start until every delivery was 'delivered'. */
  readonly seconds: number;
  readonly deliveriesPerSecond: number;
  /** From the first delivered delivery seen to the last: start-up and group join left out. */
  readonly steadyDeliveriesPerSecond: number;
  readonly eventsPerSecond: number;
  /** The webhooks process, user + system, start-up included. */
  readonly cpuSeconds: number;
  readonly peakRssMb: number;
  /** Postgres over the same interval: the webhooks process's sessions, and the whole server less the bench's own sessions. */
  readonly pgSessionCpuSeconds: number;
  readonly pgServerCpuSeconds: number;
  readonly receiverCpuSeconds: number;
  /** All cores, everything on the machine (a shared one), while it ran. */
  readonly machineBusyPct: number;
  readonly store: readonly StoreSize[];
  /** Deliveries sent before they were recorded, then written once with their first attempt (absent in runs before that path existed). */
  readonly writtenOnce?: number;
  readonly ceiling: CeilingResult;
  /** The least a durable path does (bench/lib/webhook-durable-loop.ts); absent in runs before it existed. */
  readonly durableLoop?: DurableLoopResult;
  readonly profile?: string;
  /** --webhooks-node-flags of the run, if any. */
  readonly nodeFlags?: string;
  readonly error?: string;
}

export interface CeilingResult {
  readonly deliveries: number;
  readonly delivered: number;
  readonly failed: number;
  readonly firstError: string | null;
  readonly seconds: number;
  readonly deliveriesPerSecond: number;
  readonly cpuSeconds: number;
  readonly receiverCpuSeconds: number;
  readonly machineBusyPct: number;
  readonly error?: string;
}

/** The durable loop: the case's topic consumed, sent, and every delivery recorded once before its offset is committed. */
export interface DurableLoopResult {
  readonly deliveries: number;
  /** From its consumer's start (the group join included) until every delivery was recorded. */
  readonly seconds: number;
  readonly deliveriesPerSecond: number;
  /** From its first write to its last: start-up and group join left out, as the ceiling leaves them out. */
  readonly steadyDeliveriesPerSecond: number;
  readonly cpuSeconds: number;
  readonly pgSessionCpuSeconds: number;
  /** Over the loop process's whole life (its tables' creation and its group join too). */
  readonly machineBusyPct: number;
  readonly error?: string;
}

/** First attempts of one phase of the latency case: events produced at its rate, attempted, and the spread from Kafka timestamp to first attempt. */
export interface LatencyPhase {
  readonly events: number;
  readonly attempted: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

/** The latency case's steady phase (the top-level figures), and the phases before and after it. */
export interface LatencyCase {
  readonly kafkaClient: KafkaClientName;
  readonly offeredPerSecond: number;
  readonly achievedPerSecond: number;
  readonly seconds: number;
  readonly events: number;
  /** Events whose first attempt is in the store. */
  readonly attempted: number;
  /** First attempts that did not deliver (the receiver answers 204: expected 0). */
  readonly firstAttemptsFailed: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  /** The two parts: Kafka timestamp to the intake's transaction (events.recorded_at), and from there to the first attempt. */
  readonly intakeP50: number;
  readonly intakeP99: number;
  readonly dispatchP50: number;
  readonly dispatchP99: number;
  readonly cpuSeconds: number;
  readonly pgSessionCpuSeconds: number;
  readonly machineBusyPct: number;
  /** From the process's start: its group join, connections and compilation (no floor). */
  readonly startUp: LatencyPhase & { readonly seconds: number };
  /** A burst after `quietSeconds` without events (the floor too). */
  readonly afterQuiet: LatencyPhase & { readonly quietSeconds: number };
  readonly profile?: string;
  readonly error?: string;
}

export interface WebhooksBenchRun {
  readonly date: string;
  readonly command: string;
  readonly quick: boolean;
  readonly minutes: number;
  readonly machine: string;
  /** The machine's cores: its busy share times these is the CPU everything on it spent. */
  readonly cores: number;
  readonly postgres: string;
  /** The commit built, and the files of src/ and sql/ changed since. */
  readonly source: string;
  readonly concurrency: number;
  readonly maxInFlight: number;
  readonly payloadBytes: number;
  readonly throughput: readonly ThroughputCase[];
  readonly latency: readonly LatencyCase[];
}

const us = (seconds: number, deliveries: number) => num((seconds * 1e6) / deliveries, 0);
const mb = (bytes: number) => num(bytes / 2 ** 20, 1);
const verdict = (ok: boolean) => (ok ? 'PASS' : 'FAIL');
const row = (cells: readonly string[]) => `| ${cells.join(' | ')} |`;

/** CPU of everything on the machine per delivery (µs): its busy share of every core, over the run. */
function machineUs(run: WebhooksBenchRun, busyPct: number, seconds: number, delivered: number): number {
  return ((busyPct / 100) * run.cores * seconds * 1e6) / delivered;
}

export function ceilingShare(c: ThroughputCase): number {
  return c.deliveriesPerSecond / c.ceiling.deliveriesPerSecond;
}

/** A case's name in the text: its endpoints and the consumer's client. */
const caseName = (c: ThroughputCase) => `${int(c.endpoints)} endpoints on ${c.kafkaClient}`;

export function renderWebhooksReport(run: WebhooksBenchRun): string {
  const { latency } = run;
  const lines = [
    `\`${run.command}\``,
    '',
    `# bench:webhooks, ${run.date}${run.quick ? ' (quick)' : ''}`,
    '',
    `${run.machine}; Postgres ${run.postgres}; ${num(run.minutes, 1)} min. A shared machine: "busy" is every core, everything on it, while a case ran (webhooks / ceiling).`,
    '',
    `Built from ${run.source}.${run.throughput[0]?.nodeFlags ? ` Webhooks processes run with the Node flags \`${run.throughput[0].nodeFlags}\`.` : ''}`,
    '',
    `## Deliveries per second to a fast local receiver`,
    '',
    `Events of ~${run.payloadBytes} B were produced to a fresh topic with kafkajs in the relay's record format (value the JSON payload, key the aggregate id, the relay's headers), no relay running;`,
    `then \`node dist/cli.js webhooks\` was started with its consumer on the client in the second column (OUTBOX_KAFKA_CLIENT; each case right after the other client's, each with its own ceiling run) (OUTBOX_WEBHOOK_CONCURRENCY=${run.concurrency}, every endpoint \`--max-in-flight ${run.maxInFlight}\` so that the endpoint limit is not what the 1-endpoint case measures, every endpoint subscribed to \`invoice.*\`),`,
    `timed from its start until the store had every delivery 'delivered'. The receiver is a node:http server in its own process answering 204 at once; each case has the same total deliveries (events × endpoints).`,
    `The ceiling is a plain loop with the same client (WebhookSender from dist/, signing with webhookHeaders) at the same concurrency, sending the case's deliveries to the same receiver, and nothing else. CPU is user + system per delivery: the webhooks process's (start-up and intake included), Postgres's (its sessions / the whole server but the bench's own polling), the ceiling loop's.`,
    '',
    '| endpoints | consumer | events | deliveries | webhooks s | deliveries/s | steady deliveries/s | events/s | webhooks CPU µs/delivery | Postgres CPU µs/delivery (sessions / server) | ceiling deliveries/s | ceiling CPU µs/delivery | webhooks / ceiling | floor ≥ 70% | busy | machine CPU µs/delivery | ceiling ÷ webhooks, machine CPU |',
    '| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |',
    ...run.throughput.map((c) =>
      row([
        int(c.endpoints),
        c.kafkaClient,
        int(c.events),
        c.delivered < c.deliveries ? `${int(c.delivered)} of ${int(c.deliveries)}` : int(c.deliveries),
        num(c.seconds, 1),
        int(c.deliveriesPerSecond),
        int(c.steadyDeliveriesPerSecond),
        num(c.eventsPerSecond, c.eventsPerSecond < 100 ? 2 : 0),
        us(c.cpuSeconds, c.delivered),
        `${us(c.pgSessionCpuSeconds, c.delivered)} / ${us(c.pgServerCpuSeconds, c.delivered)}`,
        int(c.ceiling.deliveriesPerSecond),
        us(c.ceiling.cpuSeconds, c.ceiling.delivered),
        pct(ceilingShare(c)),
        verdict(ceilingShare(c) >= FLOORS.ceilingShare),
        `${num(c.machineBusyPct, 0)}% / ${num(c.ceiling.machineBusyPct, 0)}%`,
        `${num(machineUs(run, c.machineBusyPct, c.seconds, c.delivered), 0)} / ${num(machineUs(run, c.ceiling.machineBusyPct, c.ceiling.seconds, c.ceiling.delivered), 0)}`,
        pct(machineUs(run, c.ceiling.machineBusyPct, c.ceiling.seconds, c.ceiling.delivered) / machineUs(run, c.machineBusyPct, c.seconds, c.delivered)),
      ]),
    ),
    '',
    `Machine CPU is everything on the machine (${run.cores} cores: the process measured, Postgres, Kafka, the receiver, the bench) per delivery, webhooks / ceiling. Both runs keep the machine about equally busy, so their share is about the inverse ratio of the two (the last column): where Postgres and Kafka share the cores, the floor needs the whole path — consuming, recording, sending, completing, and Postgres's work for it — to cost at most 1/0.7 = 1.43 times what the plain loop and its receiver cost.`,
    '',
    `### The durable loop: what the floor leaves to any durable design`,
    '',
    `Right after each ceiling, the same topic is read by a consumer group of its own, on the case's client, with the webhooks command's own consumer, decoding, body, client and signing; each chunk of ${'~'}100 deliveries is sent, then recorded in one Postgres statement (the event's body once, one row per delivery with its attempt's outcome in it, synchronous commit), then its offset marked recorded. Its steady rate (first write to last, as the ceiling has no start-up) is set against the ceiling; the last column sets the webhooks case's deliveries/s against the loop's, both with start-up. No retries, leases, per-endpoint limits, circuits, or attempts table: every real delivery store writes at least this, so no durable design beats it on this machine.`,
    '',
    '| endpoints | consumer | durable loop deliveries/s | steady deliveries/s | steady / ceiling | floor ≥ 70% | durable loop CPU µs/delivery | Postgres sessions µs/delivery | busy | machine CPU µs/delivery | webhooks / durable loop |',
    '| ---: | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |',
    ...run.throughput.flatMap((c) => {
      const loop = c.durableLoop;
      if (!loop) return [];
      // Steady, as the ceiling is: the bound is then the most generous to a durable design.
      const share = loop.steadyDeliveriesPerSecond / c.ceiling.deliveriesPerSecond;
      return [
        row([
          int(c.endpoints),
          c.kafkaClient,
          int(loop.deliveriesPerSecond),
          int(loop.steadyDeliveriesPerSecond),
          pct(share),
          verdict(share >= FLOORS.ceilingShare),
          us(loop.cpuSeconds, loop.deliveries),
          us(loop.pgSessionCpuSeconds, loop.deliveries),
          `${num(loop.machineBusyPct, 0)}%`,
          num(machineUs(run, loop.machineBusyPct, loop.seconds, loop.deliveries), 0),
          pct(c.deliveriesPerSecond / loop.deliveriesPerSecond),
        ]),
      ];
    }),
    ...run.throughput.flatMap((c) => (c.durableLoop?.error ? [`- ${caseName(c)}, durable loop: ${c.durableLoop.error}`] : [])),
    '',
    `Receiver CPU µs/request, webhooks / ceiling: ${run.throughput.map((c) => `${caseName(c)} ${us(c.receiverCpuSeconds, c.delivered)} / ${us(c.ceiling.receiverCpuSeconds, c.ceiling.delivered)}`).join('; ')}. Webhooks peak RSS: ${run.throughput.map((c) => `${num(c.peakRssMb, 0)} MB`).join(', ')}.`,
    ...run.throughput.flatMap((c) => [c.error ? `- ${caseName(c)}: ${c.error}` : '', c.ceiling.error ? `- ${caseName(c)}, ceiling: ${c.ceiling.error}` : '', c.ceiling.failed > 0 ? `- ${caseName(c)}, ceiling: ${int(c.ceiling.failed)} sends failed, first: ${c.ceiling.firstError}` : ''].filter(Boolean)),
    '',
    `## Event to first attempt at ${int(latency[0]?.offeredPerSecond ?? NaN)} events/s, 1 endpoint`,
    '',
    `One \`webhooks\` process, events produced at a steady rate in three phases: its start-up (the first ${int(latency[0]?.startUp.seconds ?? NaN)} s of load from the process's start: its group join, its connections opened, its code compiled, the fresh store's first rows; no floor, a process runs for weeks), then steady for ${num(latency[0]?.seconds ?? NaN, 0)} s (the main columns), then a burst after ${int(latency[0]?.afterQuiet.quietSeconds ?? NaN)} s without events (longer than any idle timeout on the way). The floor applies to the steady phase and to the burst. From the store: \`all_attempts.started_at\` of attempt 1 (kept in its delivery's row when it was sent first) minus \`events.produced_at\` (the record's Kafka timestamp). The intake is Kafka timestamp to the transaction that recorded the event (\`events.recorded_at\`, its start); the dispatch from there to the first attempt, negative where the first attempt went before the recording (a healthy endpoint's delivery is sent first, then written once with its result).`,
    '',
    '| consumer | offered events/s | produced events/s | events | first attempts | p50 ms | p99 ms | max ms | intake p50 / p99 ms | dispatch p50 / p99 ms | webhooks CPU, % of a core | Postgres sessions, % of a core | busy | start-up p50 / p99 / max ms | burst after quiet p50 / p99 / max ms | floor p99 ≤ 100 ms, steady and burst |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
    ...latency.map(
      (l) =>
        `| ${l.kafkaClient} | ${int(l.offeredPerSecond)} | ${int(l.achievedPerSecond)} | ${int(l.events)} | ${int(l.attempted)}${l.firstAttemptsFailed ? ` (${int(l.firstAttemptsFailed)} failed)` : ''} | ${num(l.p50, 0)} | ${num(l.p99, 0)} | ${num(l.max, 0)} | ${num(l.intakeP50, 0)} / ${num(l.intakeP99, 0)} | ${num(l.dispatchP50, 0)} / ${num(l.dispatchP99, 0)} | ${pct(l.cpuSeconds / l.seconds)} | ${pct(l.pgSessionCpuSeconds / l.seconds)} | ${num(l.machineBusyPct, 0)}% | ${phaseSpread(l.startUp)} | ${phaseSpread(l.afterQuiet)} | ${verdict(l.p99 <= FLOORS.firstAttemptP99Ms && l.attempted === l.events && l.afterQuiet.p99 <= FLOORS.firstAttemptP99Ms && l.afterQuiet.attempted === l.afterQuiet.events)} |`,
    ),
    ...latency.flatMap((l) => (l.error ? [`- ${l.kafkaClient}: ${l.error}`] : [])),
    '',
    '## Delivery store per 1M deliveries',
    '',
    "`pg_total_relation_size` (heap, indexes, TOAST) and rows of each table right after the case (no VACUUM: the dead row versions of any claims' and completions' updates are in it, as autovacuum left them), scaled to 1M deliveries. Events are stored once per event, so fan-out changes the figure. The last column: deliveries whose first attempt went before they were recorded, each then written once with its result (the others were recorded first, then written again with their results).",
    '',
    '| endpoints | consumer | events rows | deliveries rows | attempts rows | events MB | deliveries MB | attempts MB | total MB | bytes/delivery | sent first, written once |',
    '| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...run.throughput.map((c) => {
      const of = (table: StoreSize['table']) => c.store.find((s) => s.table === table) ?? { rows: NaN, bytes: NaN };
      // By the deliveries recorded: a case that timed out may have recorded fewer than it was owed.
      const scale = 1e6 / of('deliveries').rows;
      const total = c.store.reduce((sum, s) => sum + s.bytes, 0);
      const writtenOnce = c.writtenOnce === undefined ? '–' : pct(c.writtenOnce / of('deliveries').rows);
      return row([int(c.endpoints), c.kafkaClient, int(of('events').rows * scale), int(of('deliveries').rows * scale), int(of('attempts').rows * scale), mb(of('events').bytes * scale), mb(of('deliveries').bytes * scale), mb(of('attempts').bytes * scale), mb(total * scale), int((total * scale) / 1e6), writtenOnce]);
    }),
    '',
  ];
  return `${lines.join('\n')}\n`;
}

/** A phase's p50 / p99 / max, and how many of its events had no first attempt, if any. */
function phaseSpread(phase: LatencyPhase): string {
  const missing = phase.events - phase.attempted;
  return `${num(phase.p50, 0)} / ${num(phase.p99, 0)} / ${num(phase.max, 0)}${missing > 0 ? ` (${int(missing)} not attempted)` : ''}`;
}

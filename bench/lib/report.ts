import { CEILING, isCeiling, label } from './contenders.js';
import { CONNECT_VERSION, DEBEZIUM_VERSION } from './debezium.js';
import { floors, rate } from './floors.js';
import { serverBusy, type DrainResult, type SteadyResult } from './measure.js';
import { clientsSection, compressionSection } from './report-clients.js';
import { soakSection } from './report-soak.js';
import type { SoakResult } from './soak.js';
import { int, num, pct } from './format.js';

export interface BenchRun {
  readonly date: string;
  readonly quick: boolean;
  /** The command line after `npm run bench --` (older runs: not recorded). */
  readonly args?: string;
  readonly minutes: number;
  readonly machine: string;
  readonly postgres: string;
  readonly avro: boolean;
  readonly debeziumNote: string;
  /** Free text from --note (e.g. what else ran on the machine). */
  readonly note: string;
  readonly polling: { readonly batch: number; readonly idleMs: number; readonly tuning: readonly { batch: number; eventsPerSecond: number }[] };
  readonly drains: readonly DrainResult[];
  readonly steady: readonly SteadyResult[];
  /** The CDC drains began after VACUUM (ANALYZE), CHECKPOINT and sync (db.settle; older runs: not). */
  readonly settled?: boolean;
  /** --secure: TLS version and cipher suite negotiated with the secured broker. */
  readonly secureTls?: string;
  /** `pg_recvlogical --version` of the ceiling (older runs: no such ceiling). */
  readonly ceiling?: string;
  /** The soak, contender by contender (older runs and --quick: none). */
  readonly soak?: readonly SoakResult[];
}

/** The charts' file names, next to the report (null: not drawn, nothing to show). */
export interface Charts {
  readonly main: string | null;
  readonly soak: string | null;
}

export function renderReport(run: BenchRun, charts: Charts): string {
  const out: string[] = [];
  out.push(`# outbox-relay benchmark, ${run.date}${run.quick ? ' (quick)' : ''}`, '');
  const args = run.args ?? (run.quick ? '--quick' : '');
  out.push(`\`npm run bench${args ? ` -- ${args}` : ''}\` — ${run.minutes.toFixed(1)} minutes. Machine: ${run.machine}. ` +
    `Postgres ${run.postgres}${run.postgres.includes('fsync=off') ? ' (**fsync is off** in this run, OUTBOX_PG_FSYNC=off: commits cost less than on a real disk, for every contender alike; the default is on)' : ' (fsync on: every commit waits for the disk, as in production)'}, ` +
    `Kafka 4.4.0 KRaft single node on loopback, every contender and the load generator on the same 2 cores.`, '');
  if (run.note) out.push(`**Note:** ${run.note}`, '');
  if (charts.main) out.push(`![chart](${charts.main})`, '');
  if (run.drains.length + run.steady.length > 0) {
    out.push('## Floors', '', `Issue 16's floors; throughput against the pg_recvlogical ceiling and the other contenders of the same run${run.ceiling ? ` (${run.ceiling})` : ''}. Beside the relay against polling and Debezium, pg_recvlogical against them and how busy the relay's walsender was (server busy, below): a walsender well under 100% had room, so the limit was the two cores that the relay, its walsender, Kafka and the bench's consumer share.`, '');
    out.push('| floor | workload | measured | result |', '| --- | --- | --- | --- |');
    for (const floor of floors(run)) out.push(`| ${floor.name} | ${floor.workload} | ${floor.measured} | ${floor.pass === null ? 'not measured' : floor.pass ? 'PASS' : '**FAIL**'} |`);
    out.push(...drainSection(run), ...steadySection(run));
  }
  if (run.soak?.length) out.push(...soakSection(run.soak, charts.soak));
  out.push(...contendersSection(run));
  out.push('');
  return out.join('\n');
}

function drainSection(run: BenchRun): string[] {
  const out = ['', '## Backlog drain', ''];
  const repeated = run.drains.some((d) => d.runs);
  out.push('Events pre-loaded, then the contender started; events/s counts from the first record in Kafka (acks=all) to the last, so start-up is shown apart ' +
    '(pg_recvlogical: from "streaming initiated", i.e. START_REPLICATION accepted, to its exit at the backlog\'s end LSN; relay stages: first to last decoded insert). ' +
    '× ceiling divides by pg_recvlogical\'s events/s on the same workload. ' +
    'CPU and peak RSS are the contender process only (/proc VmHWM, utime+stime, start to last record); machine CPU busy is all cores, all processes (/proc/stat), during the drain. ' +
    'Server CPU is the Postgres sessions serving the contender (/proc, start to last record): its walsender for the CDC contenders, its queries for the polling relay; ' +
    'server busy is that time over the same interval, as a share of one core: a walsender near 100% decodes as fast as one core can, whatever its client does. WAL and rows written per event are the database side of the whole run ' +
    '(the load, plus for the polling relay its mark-sent UPDATEs; the CDC contenders share one load and write nothing themselves).' +
    (repeated ? ' Repeated drains (--repeat): each CDC contender but Debezium drained the same load several times, each time from a slot of its own, the contenders taking turns; ' +
      'the row is the drain of median events/s (its CPU, RSS and the rest), and the last column gives every drain, in order, as events/s / peak RSS MB. Floors use the median rate and, for memory, the median peak RSS.' : ''), '');
  out.push(`| workload | contender | events/s | × ceiling | relay JSON ÷ this | drain s | start-up s | peak RSS MB | CPU s | CPU µs/event | server CPU µs/event | server busy | WAL B/event | rows written/event | machine CPU busy |${repeated ? ' each drain |' : ''}`);
  out.push(`| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |${repeated ? ' --- |' : ''}`);
  for (const d of run.drains) {
    const ceiling = rate(run, d.workload, CEILING);
    const relay = rate(run, d.workload, 'relay-json');
    if (d.error) {
      out.push(`| ${d.workload} | ${label(d.contender)} | failed: ${d.error.replace(/\|/g, '/')} | | | | | | | | | | | | |${repeated ? ' |' : ''}`);
      continue;
    }
    const name = `${label(d.contender)}${d.settings ? ` (${d.settings})` : ''}${d.restarts ? `, ${d.restarts} session restarts: ${d.firstWarning ?? ''}` : ''}`;
    out.push(`| ${d.workload} | ${name} | ${int(d.eventsPerSecond)} | ${ratio(d.eventsPerSecond, ceiling)} | ${d.contender === 'relay-json' || isCeiling(d.contender) ? '' : ratio(relay, d.eventsPerSecond)} | ` +
      `${num(d.drainSeconds, 1)} | ${num(d.startupSeconds, 1)} | ${num(d.peakRssMb, 0)} | ${num(d.cpuSeconds, 1)} | ${num(cpuPerEvent(d), 0)} | ${num(serverCpuPerEvent(d), 0)} | ${pct(serverBusy(d))} | ${num(d.walBytesPerEvent, 0)} | ${num(d.rowsWrittenPerEvent, 2)} | ${pct(d.machineBusyPct / 100)} |` +
      (repeated ? ` ${(d.runs ?? []).map((r) => `${int(r.eventsPerSecond)} / ${num(r.peakRssMb, 0)}`).join(' · ')} |` : ''));
  }
  if (run.drains.some((d) => d.contender === 'relay-json-sasl-ssl')) out.push(...secureSection(run));
  if (run.drains.some((d) => d.contender === 'relay-json-librdkafka' || d.contender === 'relay-json-platformatic')) out.push(...clientsSection(run));
  out.push(...compressionSection(run));
  return out;
}

function steadySection(run: BenchRun): string[] {
  const out = ['', '## Steady offered load', ''];
  out.push('Single-row transactions (~300 B payload) from 8 sessions at a fixed rate, synchronous_commit on; a kafkajs consumer in the bench process matches each record ' +
    '(event id header) to the moment its COMMIT returned. The consumer and the generator share the 2 cores with everything else. ' +
    'commit→CreateTime is the part until the producer built the request (the record timestamp); the rest is Kafka and the consumer. ' +
    'Measured after a warm-up event reached the topic plus 2 s.', '');
  out.push('| offered/s | contender | achieved/s | events | in topic | matched | p50 ms | p95 ms | p99 ms | max ms | commit→CreateTime p50 / p99 ms | peak RSS MB | CPU s | machine CPU busy |', '| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const s of run.steady) {
    if (s.error) {
      out.push(`| ${s.offeredPerSecond} | ${label(s.contender)} | failed: ${s.error.replace(/\|/g, '/')} | | | | | | | | | | | |`);
      continue;
    }
    out.push(`| ${s.offeredPerSecond} | ${label(s.contender)} | ${int(s.achievedPerSecond)} | ${s.events} | ${s.inTopic} | ${s.received} | ${s.p50} | ${s.p95} | ${s.p99} | ${s.max} | ${s.toProduceP50} / ${s.toProduceP99} | ${num(s.peakRssMb, 0)} | ${num(s.cpuSeconds, 1)} | ${pct(s.machineBusyPct / 100)} |`);
  }
  return out;
}

function contendersSection(run: BenchRun): string[] {
  const out = ['', '## Contenders and settings', ''];
  out.push(`- **pg_recvlogical ceiling**: \`bench/lib/recvlogical.ts\` — Postgres's own client${run.ceiling ? ` (${run.ceiling})` : ''}: \`pg_recvlogical --start -P pgoutput -o proto_version=1 -o publication_names=bench_pub -f /dev/null -F 0 --endpos <the backlog's end LSN>\` on its own slot. ` +
    'The walsender decodes the same WAL through the same plugin as for the relay and Debezium; the client writes it to /dev/null. No code of this project is in it. Its walsender is nearly always busy (server busy column) and costs more CPU per event than the relay\'s, which the relay\'s own stages without Kafka share: a walsender spends less per event when its client takes the stream in larger gulps (likely fewer, larger socket writes), so the relay, busy with Kafka between reads, can drain faster than this client.');
  out.push('- **Relay stages**: `bench/contenders/ceiling.ts` — the relay\'s own source and decode stages (`src/source/replication-stream.ts`, its pgoutput decoder and column parsers, `src/decode/row-decoder.ts`), counting decoded events; no Kafka. Secondary: what the relay\'s WAL side alone reaches.');
  out.push('- **outbox-relay**: `node dist/cli.js run` with its defaults (batch up to 4,000 events and OUTBOX_MAX_MESSAGE_BYTES, 10,000 buffered, 5 ms linger, kafkajs idempotent producer with the relay\'s Produce request encoder and partitioner, acks=-1, one request in flight).' +
    (run.avro ? ' Avro: `OUTBOX_FORMAT=avro` with the schema registry of the stack.' : ' **Avro not measured**: this build\'s `run --help` does not list an avro format yet.'));
  const tuning = run.polling.tuning.map((t) => `${t.batch}: ${int(t.eventsPerSecond)}/s`).join(', ');
  out.push(`- **Polling relay**: \`bench/contenders/polling.ts\` — one worker; \`SELECT … WHERE status = 'pending' ORDER BY created_at LIMIT n FOR UPDATE SKIP LOCKED\` (partial index on pending rows), ` +
    `kafkajs \`sendBatch\` with the relay's producer settings, \`UPDATE … SET status = 'sent'\`, commit. Batch size tuned in this run on a 1-row/300 B backlog (${tuning || 'not tuned'}): **${run.polling.batch} rows per poll**; ` +
    `it sleeps ${run.polling.idleMs} ms after a poll that found less than a batch (only matters when idle).`);
  out.push(`- **Debezium**: Kafka Connect standalone ${CONNECT_VERSION} (\`ConnectStandalone\`, -Xmx2g) with debezium-connector-postgres ${DEBEZIUM_VERSION} from Maven Central (\`bench/debezium/pom.xml\`), pgoutput, ` +
    'the outbox EventRouter SMT (key = aggregate_id, topic = <prefix>.<aggregate_type>, event_type and aggregate_type as headers), StringConverter for key and value; ' +
    'max.batch.size 4096, max.queue.size 16384, poll.interval.ms 50 (defaults 2048 / 8192 / 500 ms), producer defaults of Connect. ' +
    (run.debeziumNote || 'Start-up (JVM, plugin scan, connector start) is in the start-up column, not in events/s.'));
  out.push('- Loads: server-side procedure committing every 1 or 100 rows (synchronous_commit off for the loader only), payloads of ~300 B / ~2 KB of JSON that pglz cannot compress; ' +
    'the CDC contenders each read their own slot created before the shared load' +
    (run.settled ? '; after the load VACUUM (ANALYZE), CHECKPOINT and sync, so that autovacuum and the kernel\'s writeback do not land in the first drain, and a CHECKPOINT before each drain.' : '.'));
  return out;
}

/** --secure: relay-json-sasl-ssl beside relay-json, workload by workload, and what the ratio means. */
function secureSection(run: BenchRun): string[] {
  const out = ['', '## SASL_SSL against plaintext', ''];
  out.push(`The relay JSON drains once more, against the stack's secured broker (\`scripts/stack.sh up secure_kafka\`): clients on SASL_SSL only — TLS${run.secureTls ? ` (${run.secureTls})` : ''} verified against the stack's CA, ` +
    'SCRAM-SHA-512 as a user with no rights but its ACLs — and ACLs enforced (StandardAuthorizer; WRITE, DESCRIBE and DESCRIBE_CONFIGS granted on the prefix of the bench\'s topics). ' +
    'Like the plaintext broker it is a single Kafka 4.4.0 KRaft node (broker and controller in one JVM, same jars, java and heap), topics of 3 partitions and 1 replica, acks=all. ' +
    'The relay runs with the same defaults, on the same Postgres, reading its own slot of the same load (same events, same backlog shape) right after the plaintext relay.', '');
  out.push('| workload | plaintext events/s | SASL_SSL events/s | SASL_SSL ÷ plaintext | relay CPU µs/event, plaintext / SASL_SSL | start-up s, plaintext / SASL_SSL | machine CPU busy, plaintext / SASL_SSL |');
  out.push('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const workload of new Set(run.drains.map((d) => d.workload))) {
    const plain = run.drains.find((d) => d.workload === workload && d.contender === 'relay-json');
    const secured = run.drains.find((d) => d.workload === workload && d.contender === 'relay-json-sasl-ssl');
    if (!plain || !secured) continue;
    const [a, b] = [plain, secured].map((d) => (d.error ? NaN : d.eventsPerSecond)) as [number, number];
    const pair = (f: (d: DrainResult) => string) => `${f(plain)} / ${f(secured)}`;
    out.push(`| ${workload} | ${int(a)} | ${int(b)} | ${ratio(b, a) || '–'} | ${pair((d) => num(cpuPerEvent(d), 0))} | ${pair((d) => num(d.startupSeconds, 1))} | ${pair((d) => pct(d.machineBusyPct / 100))} |`);
  }
  out.push('', '**What the ratio means here.** The secured broker is a second JVM on the same 2 cores as everything else: Postgres and its walsender, the relay, ' +
    'the bench process, and the plaintext broker, idle meanwhile (as the secured one is during the plaintext drains). TLS is paid at both ends of the connection, ' +
    'by the relay (Node, OpenSSL) and by the broker (the JVM), and here both ends take it from the cores the relay and the walsender need; so do the broker\'s ACL checks. ' +
    'Where the brokers have machines of their own, only the relay\'s end competes with the relay: the ratio measured here is a pessimistic one, about the least SASL_SSL leaves ' +
    'of the plaintext throughput with the relay CPU-bound. The relay\'s own share of the cost is its CPU per event, plaintext against SASL_SSL. ' +
    'The TLS handshake and the SCRAM exchange are in the start-up column, not in events/s. ' +
    'Other work may share the machine (machine CPU busy counts everything): figures from one run are noisy: repeat the run before reading much into a small difference.');
  return out;
}

function cpuPerEvent(d: DrainResult): number {
  return (d.cpuSeconds * 1e6) / d.events;
}

/** The serving sessions' CPU per event (NaN for a run from before it was measured). */
function serverCpuPerEvent(d: DrainResult): number {
  return ((d.serverCpuSeconds ?? NaN) * 1e6) / d.events;
}

function ratio(a: number, b: number): string {
  return Number.isFinite(a) && Number.isFinite(b) && b > 0 ? `${(a / b).toFixed(2)}×` : '';
}

/**
 * bench:standby's report (bench/standby.ts): its floors first, then the medians of the cases,
 * where the primary's and the standby's CPU went, and every round.
 */
import { int, num, pct } from './format.js';
import type { CpuGroup } from './pg-cpu.js';
import { median } from './stats.js';

/** In the order of odd rounds (even rounds run them backwards). */
export const CASES = ['baseline', 'primary', 'standby'] as const;
export type CaseName = (typeof CASES)[number];

/** The relay's cost on the primary from a standby, at most this share of from the primary. */
const COST_FLOOR = 0.3;
/** p99 from a standby, at most this many times from the primary. */
const P99_FLOOR = 1.5;

export interface Measured {
  readonly case: CaseName;
  readonly round: number;
  /** Transactions committed (one event each). */
  readonly events: number;
  /** How long the load took to commit them. */
  readonly offerSeconds: number;
  /** The CPU window: the load, 2 s after it, and with a relay until every record was matched. */
  readonly windowSeconds: number;
  /** CPU seconds of each server over the window, by group (bench/lib/pg-cpu.ts). */
  readonly primaryCpu: Readonly<Record<CpuGroup | 'total', number>>;
  readonly standbyCpu: Readonly<Record<CpuGroup | 'total', number>>;
  /** WAL the primary wrote over the window. */
  readonly walBytes: number;
  /** The primary's WAL flushes over the window (pg_stat_wal.wal_sync; null on Postgres 18). */
  readonly walSyncs: number | null;
  /** Sessions opened on the primary's database over the window (the relay's, a reconnect's; none of the load's). */
  readonly sessionsOpened: number;
  /** The relay process's CPU seconds over the window (null: baseline, no relay). */
  readonly relayCpuSeconds: number | null;
  /** Commit to consumer, ms; toProduceP99: commit to the record's CreateTime (null: baseline). */
  readonly latency: { readonly matched: number; readonly p50: number; readonly p99: number; readonly max: number; readonly toProduceP99: number } | null;
  /** Every core, everything on the machine, over the window. */
  readonly busyPercent: number;
}

export interface StandbyRun {
  readonly date: string;
  readonly command: string;
  readonly minutes: number;
  readonly machine: string;
  readonly source: string;
  readonly postgres: string;
  readonly standbyPostgres: string;
  readonly synchronousStandbyNames: string;
  readonly synchronizedStandbySlots: string | null;
  /** --pin-primary: the primary alone on core 0, everything else on the others (absent in runs before the flag). */
  readonly pinnedPrimary?: boolean;
  readonly rate: number;
  readonly seconds: number;
  readonly rounds: number;
  readonly measured: readonly Measured[];
}


const us = (seconds: number, events: number) => (seconds * 1e6) / events;
const primaryUs = (m: Measured) => us(m.primaryCpu.total, m.events);
/** The primary without the application's own backends (the bench's sessions): what the relay can change directly. */
const serverUs = (m: Measured) => us(m.primaryCpu.total - m.primaryCpu.load, m.events);
const standbyUs = (m: Measured) => us(m.standbyCpu.total, m.events);

export function renderStandbyReport(run: StandbyRun): string {
  const of = (each: CaseName) => run.measured.filter((m) => m.case === each);
  const med = (each: CaseName, figure: (m: Measured) => number) => median(of(each).map(figure));
  const inRound = (each: CaseName, round: number) => run.measured.find((m) => m.case === each && m.round === round);

  const base = med('baseline', primaryUs);
  const fromPrimary = med('primary', primaryUs);
  const fromStandby = med('standby', primaryUs);
  const costRatio = (fromStandby - base) / (fromPrimary - base);
  const allRatio = fromStandby / fromPrimary;
  const [serverBase, serverPrimary, serverStandby] = CASES.map((each) => med(each, serverUs));
  const serverRatio = (serverStandby! - serverBase!) / (serverPrimary! - serverBase!);
  const p99Primary = med('primary', (m) => m.latency!.p99);
  const p99Standby = med('standby', (m) => m.latency!.p99);
  const p99Ratio = p99Standby / p99Primary;
  const rounds = [...new Set(run.measured.map((m) => m.round))];
  const roundRatios = (figure: (round: number) => number) => rounds.map((round) => pct(figure(round))).join(', ');
  const pairedCost = (round: number, figure = primaryUs) => {
    const [b, p, s] = CASES.map((each) => inRound(each, round));
    return b && p && s ? (figure(s) - figure(b)) / (figure(p) - figure(b)) : NaN;
  };
  const pairedP99 = (round: number) => inRound('standby', round)!.latency!.p99 / inRound('primary', round)!.latency!.p99;
  const inserts = (each: CaseName) => med(each, (m) => us(m.primaryCpu.load, m.events));
  const flushes = run.measured.filter((m) => m.walSyncs !== null).map((m) => (100 * m.walSyncs!) / m.events);
  const verdict = (ok: boolean) => (ok ? 'PASS' : 'FAIL');
  const costOk = costRatio <= COST_FLOOR;
  const p99Ok = p99Ratio <= P99_FLOOR;
  const sync = run.synchronousStandbyNames === '' ? 'an asynchronous standby' : `a synchronous standby (synchronous_standby_names=${run.synchronousStandbyNames})`;

  const lines = [
    `\`${run.command}\``,
    '',
    `# bench:standby, ${run.date}`,
    '',
    `${run.machine}; primary Postgres ${run.postgres}; standby ${run.standbyPostgres}; ${sync}${run.synchronizedStandbySlots === null ? '' : `, synchronized_standby_slots=${run.synchronizedStandbySlots || "''"}`}; ${num(run.minutes, 1)} min. ` +
      `A shared machine: "busy" is every core, everything on it, while a case ran.` +
      (run.pinnedPrimary ? ' The primary ran alone on core 0 (--pin-primary), the standby, Kafka, the relay and the load on the others.' : ''),
    '',
    `Built from ${run.source}.`,
    '',
    '## Floors',
    '',
    `Issue 49, read from the medians of ${run.rounds} round${run.rounds === 1 ? '' : 's'} (each round's own ratio beside them). CPU is the primary server's, every process of it, per event committed.`,
    '',
    '| floor | measured | result |',
    '| --- | --- | --- |',
    `| the relay's cost on the primary from a standby ≤ ${pct(COST_FLOOR)} of from the primary: (standby − baseline) ÷ (primary − baseline), primary CPU µs/event | ${num(fromStandby - base, 1)} vs ${num(fromPrimary - base, 1)} µs/event = ${pct(costRatio)} (rounds: ${roundRatios(pairedCost)}) | ${verdict(costOk)} |`,
    `| beside it, not a floor: the same without the application's own backends (the bench's sessions: the inserts), (standby − baseline) ÷ (primary − baseline) | ${num(serverStandby! - serverBase!, 1)} vs ${num(serverPrimary! - serverBase!, 1)} µs/event = ${pct(serverRatio)} (rounds: ${roundRatios((round) => pairedCost(round, serverUs))}) | – |`,
    `| beside it, not a floor: the primary's CPU, all processes, no baseline subtracted: standby ÷ primary | ${num(fromStandby, 1)} vs ${num(fromPrimary, 1)} µs/event = ${pct(allRatio)} (rounds: ${roundRatios((round) => primaryUs(inRound('standby', round)!) / primaryUs(inRound('primary', round)!))}) | – |`,
    `| p99 commit-to-consumer at ${int(run.rate)} events/s from a standby ≤ ${P99_FLOOR}× from the primary | ${int(p99Standby)} vs ${int(p99Primary)} ms = ${num(p99Ratio, 2)}× (rounds: ${rounds.map((round) => `${num(pairedP99(round), 2)}×`).join(', ')}) | ${verdict(p99Ok)} |`,
    '',
    `Floors met: ${[costOk, p99Ok].filter(Boolean).length} of 2.`,
    '',
    `The first floor is read with the baseline subtracted: "what the primary spends today" on the relay is what it spends beyond the application's own inserts (${num(base, 1)} µs/event here with no relay at all: backends, WAL writer, the standby's physical walsender, autovacuum), which reading from a standby cannot remove. ` +
      `Without subtracting it, the all-processes ratio could not go below baseline ÷ primary (${pct(base / fromPrimary)} in this run) even if the relay cost the primary nothing; it is given beside the floor for that reason. ` +
      `The floor's figures are differences of whole-server totals, most of which is the inserts' own backends (the bench's sessions), and those cost the primary ${CASES.map((each) => `${num(inserts(each), 1)} µs/event in ${each} (rounds ${of(each).map((m) => num(us(m.primaryCpu.load, m.events), 1)).join(', ')})`).join(', ')}. ` +
      (inserts('primary') > inserts('baseline') && inserts('standby') > inserts('baseline')
        ? `They cost more in both relay cases, wherever the relay reads: the relay does not run in them, and reading from the standby it has no session on the primary (${num(med('standby', (m) => us(m.primaryCpu.contender, m.events)), 1)} µs/event). ` +
          `The likely cause is the machine: in both relay cases, and not in the baseline, the primary shares the cores with the relay, Kafka, the consumer and the standby's decoding. The floor's formula counts that as the relay's cost on the primary. `
        : '') +
      `The second row leaves those backends out and keeps every other process of the primary: walsenders, WAL writer, checkpointer, autovacuum, the relay's own queries. ` +
      `Nothing subtracted, what reading from the standby saves the primary is primary − standby = ${num(fromPrimary - fromStandby, 1)} µs/event (rounds: ${rounds.map((round) => num(primaryUs(inRound('primary', round)!) - primaryUs(inRound('standby', round)!), 1)).join(', ')}), against ${num(serverPrimary! - serverBase!, 1)} µs/event that the relay's processes cost it in \`primary\` by the second row. ` +
      `The load itself was the same in every case: the same WAL per event, and WAL flushes per 100 commits between ${num(Math.min(...flushes), 0)} and ${num(Math.max(...flushes), 0)} in every round of every case (below).`,
    '',
    '## Medians',
    '',
    `Each case: ${int(run.rate)} single-row transactions/s offered for ${run.seconds} s (~300 B events). Primary and standby CPU: the whole server (postmaster, its live and exited children) from /proc over the load, 2 s after it, and with a relay until every record was matched; per event committed. "− baseline" is what the relay costs the primary.`,
    '',
    '| case | primary CPU µs/event | − baseline | without the inserts\' backends | − baseline | standby CPU µs/event | relay CPU µs/event | primary WAL B/event | WAL flushes per 100 commits | p50 / p99 / max ms | commit → CreateTime p99 ms | achieved/s | machine busy % |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...CASES.map((each) => {
      const relay = each !== 'baseline';
      return `| ${each} | ${num(med(each, primaryUs), 1)} | ${relay ? num(med(each, primaryUs) - base, 1) : '–'} | ${num(med(each, serverUs), 1)} | ${relay ? num(med(each, serverUs) - serverBase!, 1) : '–'} | ${num(med(each, standbyUs), 1)} | ${relay ? num(med(each, (m) => us(m.relayCpuSeconds!, m.events)), 1) : '–'} | ${int(med(each, (m) => m.walBytes / m.events))} | ${num(med(each, (m) => (m.walSyncs === null ? NaN : (100 * m.walSyncs) / m.events)), 0)} | ${relay ? `${int(med(each, (m) => m.latency!.p50))} / ${int(med(each, (m) => m.latency!.p99))} / ${int(med(each, (m) => m.latency!.max))}` : '–'} | ${relay ? int(med(each, (m) => m.latency!.toProduceP99)) : '–'} | ${int(med(each, (m) => m.events / m.offerSeconds))} | ${int(med(each, (m) => m.busyPercent))} |`;
    }),
    '',
    '## Where the servers\' CPU went',
    '',
    'Medians, µs/event, by process (pg_stat_activity every 200 ms: a session that ends within the window keeps its group): the bench\'s own sessions (application_name \'bench\': on the primary the inserts; on the standby only the bench\'s samples of pg_stat_activity), walsenders (on the primary the standby\'s physical one, and in `primary` the relay\'s logical one; on the standby the relay\'s in `standby`), the relay\'s other sessions (its slot monitor\'s queries), and the rest (primary: WAL writer, checkpointer, background writer, autovacuum, exited processes; standby: the startup process replaying the WAL, the WAL receiver, the slot sync worker on 17+).',
    '',
    '| case | server | bench\'s sessions | walsenders | relay\'s other sessions | the rest | total |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: |',
    ...CASES.flatMap((each) =>
      (['primary', 'standby'] as const).map((server) => {
        const group = (name: CpuGroup | 'total') => num(med(each, (m) => us((server === 'primary' ? m.primaryCpu : m.standbyCpu)[name], m.events)), 1);
        return `| ${each} | ${server} | ${group('load')} | ${group('walsender')} | ${group('contender')} | ${group('other')} | ${group('total')} |`;
      }),
    ),
    '',
    '## Every round',
    '',
    'Odd rounds ran baseline, primary, standby; even rounds the other way round. "− baseline" subtracts the same round\'s baseline.',
    '',
    '| round | case | primary CPU µs/event | − baseline | without the inserts\' backends | − baseline | standby CPU µs/event | relay CPU µs/event | WAL flushes per 100 commits | p50 / p99 / max ms | matched | achieved/s | window s | machine busy % |',
    '| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...rounds.flatMap((round) =>
      CASES.map((each) => {
        const m = inRound(each, round)!;
        const b = inRound('baseline', round);
        const relay = m.latency !== null;
        return `| ${round} | ${each} | ${num(primaryUs(m), 1)} | ${relay && b ? num(primaryUs(m) - primaryUs(b), 1) : '–'} | ${num(serverUs(m), 1)} | ${relay && b ? num(serverUs(m) - serverUs(b), 1) : '–'} | ${num(standbyUs(m), 1)} | ${relay ? num(us(m.relayCpuSeconds!, m.events), 1) : '–'} | ${m.walSyncs === null ? '–' : num((100 * m.walSyncs) / m.events, 0)} | ${relay ? `${int(m.latency!.p50)} / ${int(m.latency!.p99)} / ${int(m.latency!.max)}` : '–'} | ${relay ? `${int(m.latency!.matched)}/${int(m.events)}` : '–'} | ${int(m.events / m.offerSeconds)} | ${num(m.windowSeconds, 1)} | ${int(m.busyPercent)} |`;
      }),
    ),
    '',
    '## How it was run',
    '',
    '- The stack: Kafka and the failover pair of scripts/stack.sh (`up kafka failover`, a primary and a physical standby streaming through a physical slot, on the same machine), in a stack directory of the bench\'s own; fsync and synchronous_standby_names set for the run with ALTER SYSTEM on both servers.',
    '- Each case: a fresh `event_outbox` with its own publication and slot by `node dist/cli.js setup` (`standby`: with OUTBOX_REPLICA_URL, the slot on the standby; `primary`: the slot on the primary, on 17+ a failover slot as `auto` makes it; `baseline`: its slot dropped at once), a CHECKPOINT on both servers, the relay (`node --max-semi-space-size=16 dist/cli.js run`, default options: JSON, at-least-once, kafkajs) and a read_committed kafkajs consumer started, one warm-up event through both, 2 s; then the load; afterwards the relay stopped, its slot dropped where it lives (`drop-slot --yes`), the table and publication dropped.',
    `- The load: single-row INSERT transactions (synchronous_commit on) at a fixed rate from a pool of 12 sessions on the primary, all opened before the first case and kept (at most 64 in flight), each timed when its COMMIT returned; the consumer matches each record's event_id header to that time. Sessions opened on the primary during the loads: ${run.measured.map((m) => m.sessionsOpened ?? NaN).join(', ')} (in the order the cases ran).`,
    '',
  ];
  return lines.join('\n');
}

import { label } from './contenders.js';
import { num } from './format.js';
import type { SoakMinute, SoakResult } from './soak.js';

/** The soak in the report: what was run, first against last minute, and a table per minute. */
export function soakSection(soak: readonly SoakResult[], chart: string | null): string[] {
  const out = ['', '## Soak', ''];
  const first = soak[0]!;
  out.push(
    `Steady ${first.offeredPerSecond.toLocaleString('en-US')} events/s (single-row transactions of ~300 B from the bench's pool, synchronous_commit on) for ${first.minutes.length} minutes per contender, one after the other, ` +
      'each on a fresh outbox that is never pruned during the run (an operator who prunes nightly). Every minute: commit-to-consumer latency of the events committed in that minute; ' +
      "the contender's CPU; the database's CPU: every process of the Postgres server from /proc (the postmaster, its live children's utime+stime and its reaped children's cutime+cstime), " +
      "split by pg_stat_activity into the load's sessions (its INSERTs and COMMITs: the same work whatever the contender), the walsender, the contender's other sessions (the polling relay's queries) " +
      'and the rest (autovacuum workers, checkpointer, WAL writer, background writer); "DB CPU for the outbox" is the total without the load\'s sessions: what the way of relaying costs the database. ' +
      "WAL bytes (pg_current_wal_lsn) and outbox rows inserted + updated + deleted per event committed; and at the minute's end the outbox's live and dead tuples (pg_stat_user_tables, estimates), " +
      'its main fork (pg_relation_size) and indexes (pg_indexes_size), and the autovacuum / autoanalyze runs on it since the start. The database CPU includes the load\'s INSERTs, the same for both.',
    '',
  );
  if (chart) out.push(`![soak](${chart})`, '');
  out.push('| contender | minute 1 → last: events/s committed | p99 ms | DB CPU for the outbox µs/event | DB CPU, all, µs/event | contender CPU µs/event | WAL B/event | rows written/event | dead tuples at the end | table + indexes MB at the end | autovacuums | matched |');
  out.push('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const s of soak) {
    const a = s.minutes[0];
    const z = s.minutes.at(-1);
    if (!a || !z) {
      out.push(`| ${label(s.contender)} | failed: ${(s.error ?? 'no minute completed').replace(/\|/g, '/')} | | | | | | | | | | |`);
      continue;
    }
    const arrow = (f: (m: SoakMinute) => string) => `${f(a)} → ${f(z)}`;
    out.push(
      `| ${label(s.contender)}${s.error ? ` (failed in minute ${s.minutes.length + 1}: ${s.error.replace(/\|/g, '/')})` : ''} | ${arrow((m) => num(m.events / 60, 0))} | ${arrow((m) => num(m.p99, 0))} | ${arrow((m) => perEvent(m.dbCpuSeconds - m.loadCpuSeconds, m.events))} | ${arrow((m) => perEvent(m.dbCpuSeconds, m.events))} | ${arrow((m) => perEvent(m.contenderCpuSeconds, m.events))} | ` +
        `${arrow((m) => num(m.walBytesPerEvent, 0))} | ${arrow((m) => num(m.rowsWrittenPerEvent, 2))} | ${z.deadTuples.toLocaleString('en-US')} | ${mb(z.tableBytes)} + ${mb(z.indexBytes)} | ${z.autovacuums} | ${s.matched.toLocaleString('en-US')}/${s.events.toLocaleString('en-US')} |`,
    );
  }
  for (const s of soak) {
    if (s.minutes.length === 0) continue;
    out.push('', `### ${label(s.contender)}, minute by minute`, '');
    out.push('| minute | events | p50 ms | p99 ms | max ms | contender CPU s | µs/event | DB CPU s | µs/event | load s | walsender s | contender sessions s | other s | for the outbox µs/event | WAL B/event | rows written/event | live tuples | dead tuples | table MB | indexes MB | autovacuums | autoanalyzes |');
    out.push(`| ${Array.from({ length: 22 }, () => '---:').join(' | ')} |`);
    for (const m of s.minutes) {
      out.push(
        `| ${m.minute} | ${m.events.toLocaleString('en-US')} | ${num(m.p50, 0)} | ${num(m.p99, 0)} | ${num(m.max, 0)} | ${num(m.contenderCpuSeconds, 1)} | ${perEvent(m.contenderCpuSeconds, m.events)} | ` +
          `${num(m.dbCpuSeconds, 1)} | ${perEvent(m.dbCpuSeconds, m.events)} | ${num(m.loadCpuSeconds, 1)} | ${num(m.walsenderCpuSeconds, 1)} | ${num(m.contenderSessionsCpuSeconds, 1)} | ${num(m.otherDbCpuSeconds, 1)} | ` +
          `${perEvent(m.dbCpuSeconds - m.loadCpuSeconds, m.events)} | ${num(m.walBytesPerEvent, 0)} | ${num(m.rowsWrittenPerEvent, 2)} | ` +
          `${m.liveTuples.toLocaleString('en-US')} | ${m.deadTuples.toLocaleString('en-US')} | ${mb(m.tableBytes)} | ${mb(m.indexBytes)} | ${m.autovacuums} | ${m.autoanalyzes} |`,
      );
    }
  }
  return out;
}

export function perEvent(seconds: number, events: number): string {
  return events > 0 && Number.isFinite(seconds) ? ((seconds * 1e6) / events).toFixed(0) : '–';
}

function mb(bytes: number): string {
  return (bytes / 2 ** 20).toFixed(1);
}

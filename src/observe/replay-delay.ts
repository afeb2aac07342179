import type pg from 'pg';
import { parseLsn } from '../lsn.js';

/**
 * How far OUTBOX_REPLICA_URL's standby is behind its primary: WAL and commits the primary has
 * and the standby has not replayed, which the relay cannot read yet. The slot's own lag cannot
 * show it: a standby's slot is measured against what the standby replayed, so a standby whose
 * replay is paused (or slow) shows a slot lag of 0 while the primary's commits wait.
 */
export interface ReplayDelay {
  /** The primary's WAL position (flushed: what it can send) minus the standby's replay position; 0 when caught up. */
  readonly bytes: number;
  /**
   * How long the oldest commit the standby has not replayed has waited, near enough (see
   * replayDelay); 0 when the standby has replayed every transaction the primary had completed,
   * whatever WAL without a transaction in it (a checkpoint) it has not.
   */
  readonly seconds: number;
  /** Replay is paused on the standby (pg_wal_replay_pause()): it stays behind until resumed. */
  readonly paused: boolean;
}

/** The primary at one moment. */
export interface PrimaryReading {
  readonly walLsn: bigint;
  /** The first transaction id not yet completed (a snapshot's xmax): what a standby that replayed every completed transaction has too. */
  readonly xmax: bigint;
  readonly atMs: number;
}

/** The standby at one moment, read after the primary. */
export interface StandbyReading {
  readonly replayLsn: bigint;
  readonly xmax: bigint;
  /** Seconds since the commit of the last transaction it replayed; null when it replayed none since it started. */
  readonly lastReplayAgeSeconds: number | null;
  readonly paused: boolean;
  readonly atMs: number;
}

export async function readPrimary(client: pg.ClientBase): Promise<PrimaryReading> {
  const { rows } = await client.query<{ lsn: string; xmax: string }>('SELECT pg_current_wal_flush_lsn()::text AS lsn, pg_snapshot_xmax(pg_current_snapshot())::text AS xmax');
  return { walLsn: parseLsn(rows[0]!.lsn), xmax: BigInt(rows[0]!.xmax), atMs: Date.now() };
}

/** The standby's replay; null when the server is not in recovery (promoted: nothing to replay). */
export async function readStandby(client: pg.ClientBase): Promise<StandbyReading | null> {
  const { rows } = await client.query<{ in_recovery: boolean; replay: string | null; xmax: string; age: number | null; paused: boolean | null }>(
    `SELECT pg_is_in_recovery() AS in_recovery, pg_last_wal_replay_lsn()::text AS replay, pg_snapshot_xmax(pg_current_snapshot())::text AS xmax,
            extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8 AS age,
            CASE WHEN pg_is_in_recovery() THEN pg_get_wal_replay_pause_state() <> 'not paused' END AS paused`,
  );
  const row = rows[0]!;
  if (!row.in_recovery || row.replay === null) return null;
  return { replayLsn: parseLsn(row.replay), xmax: BigInt(row.xmax), lastReplayAgeSeconds: row.age === null ? null : Math.max(0, row.age), paused: row.paused === true, atMs: Date.now() };
}

/** The standby has replayed all the primary had at that reading: every byte, or every completed transaction. */
function caughtUpWith(reading: PrimaryReading, standby: StandbyReading): boolean {
  return standby.replayLsn >= reading.walLsn || standby.xmax >= reading.xmax;
}

/**
 * The delay, from the primary's readings (oldest first, the newest taken just before the
 * standby's) and the standby's. The seconds are not the age of the last replayed commit alone:
 * an idle primary's commit an hour ago, followed by a checkpoint the standby has not replayed
 * yet, is no delay of an hour. So:
 * - caught up with the newest reading: 0;
 * - caught up with an earlier reading: the time since the first reading it is not caught up
 *   with (the primary had a commit the standby still lacks since then: a lower bound, off by
 *   at most the time between two readings);
 * - caught up with none: the age of the last replayed commit (the standby was behind before the
 *   first reading; what it lacks was committed after that).
 */
export function replayDelay(primary: readonly PrimaryReading[], standby: StandbyReading): ReplayDelay {
  const newest = primary.at(-1);
  if (!newest) throw new TypeError('replayDelay needs a reading of the primary');
  const bytes = newest.walLsn > standby.replayLsn ? Number(newest.walLsn - standby.replayLsn) : 0;
  const delay = (seconds: number): ReplayDelay => ({ bytes, seconds: Math.max(0, seconds), paused: standby.paused });
  if (caughtUpWith(newest, standby)) return delay(0);
  const last = primary.findLastIndex((reading) => caughtUpWith(reading, standby));
  if (last >= 0) return delay((standby.atMs - primary[last + 1]!.atMs) / 1000);
  return delay(standby.lastReplayAgeSeconds ?? (standby.atMs - primary[0]!.atMs) / 1000);
}

/** Readings of the primary kept at most: at one a poll, a delay longer than this many polls falls back on the last replayed commit's age. */
const MAX_READINGS = 1_000;

/** The primary's readings across polls (the slot monitor's), for replayDelay. */
export class ReplayDelayTracker {
  private readings: PrimaryReading[] = [];

  observe(primary: PrimaryReading, standby: StandbyReading): ReplayDelay {
    this.readings.push(primary);
    const delay = replayDelay(this.readings, standby);
    // Readings before the last one the standby caught up with can bound no later delay.
    const last = this.readings.findLastIndex((reading) => caughtUpWith(reading, standby));
    const from = Math.max(last, this.readings.length - MAX_READINGS, 0);
    if (from > 0) this.readings = this.readings.slice(from);
    return delay;
  }

  reset(): void {
    this.readings = [];
  }
}

/** Between status's two readings, when the first finds the standby behind. */
const SECOND_READING_MS = 1_000;

/**
 * The delay for a one-off look (`status`), with no earlier readings: when the first finds the
 * standby behind, a second a second later tells a commit it replays within milliseconds (no
 * delay, whatever the age of the commit before it) from one it has been lacking.
 */
export async function readReplayDelayOnce(primary: pg.ClientBase, standby: pg.ClientBase): Promise<ReplayDelay | null> {
  const first = await readPrimary(primary);
  const reading = await readStandby(standby);
  if (!reading) return null;
  const delay = replayDelay([first], reading);
  if (delay.seconds === 0) return delay;
  await new Promise((resolve) => setTimeout(resolve, SECOND_READING_MS));
  const second = await readPrimary(primary);
  const again = await readStandby(standby);
  return again ? replayDelay([first, second], again) : null;
}

import { describe, expect, it } from 'vitest';
import { replayDelay, ReplayDelayTracker, type PrimaryReading, type StandbyReading } from './replay-delay.js';

const primary = (walLsn: number, xmax: number, atSeconds: number): PrimaryReading => ({ walLsn: BigInt(walLsn), xmax: BigInt(xmax), atMs: atSeconds * 1000 });
const standby = (replayLsn: number, xmax: number, atSeconds: number, lastReplayAgeSeconds: number | null = 3600, paused = false): StandbyReading => ({
  replayLsn: BigInt(replayLsn),
  xmax: BigInt(xmax),
  lastReplayAgeSeconds,
  paused,
  atMs: atSeconds * 1000,
});

describe('replayDelay', () => {
  it('is none when the standby replayed everything the primary had', () => {
    expect(replayDelay([primary(1000, 50, 10)], standby(1000, 50, 10))).toEqual({ bytes: 0, seconds: 0, paused: false });
  });

  it("counts WAL without a transaction (an idle primary's checkpoint) in bytes, never in seconds: not the last commit's age", () => {
    expect(replayDelay([primary(5000, 50, 10)], standby(1000, 50, 10, 3600, true))).toEqual({ bytes: 4000, seconds: 0, paused: true });
  });

  it('takes the last replayed commit\'s age when the standby was behind before the first reading', () => {
    expect(replayDelay([primary(5000, 60, 10)], standby(1000, 50, 10, 25))).toEqual({ bytes: 4000, seconds: 25, paused: false });
  });

  it("bounds the seconds by the readings: a commit after an hour's idleness, not replayed yet, is seconds late, not an hour", () => {
    const readings = [primary(1000, 50, 0), primary(1000, 50, 10), primary(1200, 51, 20)];
    expect(replayDelay(readings, standby(1000, 50, 20))).toEqual({ bytes: 200, seconds: 0, paused: false });
    expect(replayDelay([...readings, primary(1400, 52, 30)], standby(1000, 50, 30)).seconds).toBe(10);
  });

  it('is caught up with a reading whose WAL it replayed, even when the xids disagree (a primary that crashed leaves xids no record completes)', () => {
    const readings = [primary(1000, 70, 0), primary(1100, 70, 10)];
    expect(replayDelay(readings, standby(1050, 50, 10)).seconds).toBe(0);
  });
});

describe('ReplayDelayTracker', () => {
  it('grows with a paused replay under writes, one reading a poll, and forgets readings once caught up', () => {
    const tracker = new ReplayDelayTracker();
    expect(tracker.observe(primary(1000, 50, 0), standby(1000, 50, 0, 1)).seconds).toBe(0);
    // Paused at 1 s: the standby stays at 1000 / 50 while the primary writes.
    for (let at = 2; at <= 20; at += 1) tracker.observe(primary(1000 + at * 100, 50 + at, at), standby(1100, 51, at, at - 1, true));
    const paused = tracker.observe(primary(3100, 71, 21), standby(1100, 51, 21, 20, true));
    expect(paused).toEqual({ bytes: 2000, seconds: 19, paused: true });
    expect(tracker.observe(primary(3200, 72, 22), standby(3200, 72, 22, 0)).seconds).toBe(0);
    expect(tracker.observe(primary(3300, 73, 23), standby(3200, 72, 23, 1)).seconds).toBe(0);
  });
});

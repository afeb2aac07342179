import { describe, expect, it } from 'vitest';
import type { Lsn } from '../lsn.js';
import { ProgressWatch } from './progress.js';

const at = (n: number) => BigInt(n) as Lsn;

function watch() {
  let now = 1_000_000;
  const progress = new ProgressWatch(() => now);
  return { progress, advance: (ms: number) => (now += ms) };
}

describe('ProgressWatch', () => {
  it('counts a stall from the last confirmed advance while events wait', () => {
    const { progress, advance } = watch();
    progress.observe(at(10), 0, true, 0);
    advance(5_000);
    progress.observe(at(20), 0, true, 0);
    advance(7_000);
    progress.observe(at(20), 0, true, 0);
    expect(progress.stalledMs()).toBe(7_000);
    advance(3_000);
    // Between sessions (no observation): still stalled, and growing.
    expect(progress.stalledMs()).toBe(10_000);
  });

  it('counts acknowledgements as progress: one huge transaction being published is not a stall', () => {
    const { progress, advance } = watch();
    progress.observe(at(10), 0, true, 0);
    for (let acknowledged = 4_000; acknowledged <= 40_000; acknowledged += 4_000) {
      advance(60_000);
      progress.observe(at(10), acknowledged, true, 0);
    }
    expect(progress.stalledMs()).toBe(0);
    advance(5_000);
    progress.observe(at(10), 40_000, true, 0);
    expect(progress.stalledMs()).toBe(5_000);
  });

  it('is not stalled when nothing waits, however long the position stays', () => {
    const { progress, advance } = watch();
    progress.observe(at(10), 0, false, 0);
    advance(600_000);
    progress.observe(at(10), 0, false, 0);
    expect(progress.stalledMs()).toBe(0);
    // Work arrives: the stall counts from now, not from the last advance ten minutes ago.
    progress.observe(at(10), 0, true, 0);
    advance(1_000);
    expect(progress.stalledMs()).toBe(1_000);
  });

  it('tracks how long Postgres has been silent, and a standby is neither stalled nor silent', () => {
    const { progress, advance } = watch();
    progress.observe(at(10), 0, true, 0);
    advance(4_000);
    progress.observe(at(10), 0, true, 4_000);
    expect(progress.sourceSilentMs()).toBe(4_000);
    advance(2_000);
    expect(progress.sourceSilentMs()).toBe(6_000);
    progress.idle();
    expect(progress.sourceSilentMs()).toBe(0);
    expect(progress.stalledMs()).toBe(0);
  });
});

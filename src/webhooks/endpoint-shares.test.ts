import { describe, expect, it } from 'vitest';
import { EndpointShares, MEMBER_TTL_MS, shareOf, type MemberReport } from './endpoint-shares.js';

const endpoint = (endpointId: string, maxInFlight: number, halfOpen = false) => ({ endpointId, maxInFlight, halfOpen });

/** Processes sharing a clock, each heartbeat reading the others' last reports, as ProcessHeartbeat does. */
function cluster(owners: string[]) {
  let now = 0;
  let pgTime = Date.UTC(2026, 11, 4);
  const shares = new Map(owners.map((owner) => [owner, new EndpointShares(owner, [], () => now)]));
  const reports = new Map<string, MemberReport>();
  const previous = new Map<string, Date>();
  const alive = new Set(owners);
  return {
    shares,
    alive,
    /** Every live process beats once, in order; time moves on by a second. */
    round(): void {
      for (const [owner, process] of shares) {
        if (!alive.has(owner)) continue;
        const written = new Date(pgTime);
        const others = [...reports.values()].filter((report) => report.owner !== owner && alive.has(report.owner));
        reports.set(owner, { owner, ...process.report() });
        process.heard(others, previous.get(owner) ?? null, written);
        previous.set(owner, written);
      }
      now += 1_000;
      pgTime += 1_000;
    },
    join(owner: string): EndpointShares {
      const process = new EndpointShares(owner, [], () => now);
      shares.set(owner, process);
      alive.add(owner);
      return process;
    },
    /** Stops and its row goes (a clean stop), or (killed) stays until stale: here, at once either way after MEMBER_TTL_MS. */
    leave(owner: string): void {
      alive.delete(owner);
      reports.delete(owner);
    },
  };
}

/** Takes as much as each process may of one endpoint and returns how much every process holds. */
function fill(processes: Iterable<EndpointShares>, limit: ReturnType<typeof endpoint>): number[] {
  return [...processes].map((process) => process.take(limit, 1_000));
}

describe('endpoint shares', () => {
  it('cut a limit into shares that add up to it, the remainder spread by endpoint', () => {
    const view = ['a', 'b', 'c'];
    for (const max of [1, 2, 3, 4, 10, 11]) {
      for (const id of ['ep_1', 'ep_2', 'ep_3', 'ep_x']) {
        const shares = view.map((owner) => shareOf(view, owner, id, max));
        expect(shares.reduce((a, b) => a + b)).toBe(max);
        expect(Math.max(...shares) - Math.min(...shares)).toBeLessThanOrEqual(1);
      }
    }
    // A limit of one goes to different processes for different endpoints.
    const holders = new Set(Array.from({ length: 30 }, (_, i) => view.find((owner) => shareOf(view, owner, `ep_${i}`, 1) === 1)));
    expect(holders.size).toBe(3);
    expect(shareOf(view, 'not-a-member', 'ep_1', 10)).toBe(0);
  });

  it('a process alone has the whole limit after its first heartbeat, and nothing before it', () => {
    const { shares, round } = cluster(['a']);
    const a = shares.get('a')!;
    expect(a.take(endpoint('ep', 10), 50)).toBe(0);
    round();
    expect(a.take(endpoint('ep', 10), 50)).toBe(10);
    a.release('ep', 3);
    expect(a.take(endpoint('ep', 10), 50)).toBe(3);
  });

  it('a process joining takes nothing until the others hold no more than their new share; the limit holds at every step', () => {
    const c = cluster(['a']);
    c.round();
    const a = c.shares.get('a')!;
    expect(a.take(endpoint('ep', 10), 50)).toBe(10);
    const b = c.join('b');
    // a still holds all 10 (its requests have not ended): b may take nothing, however long that lasts.
    for (let step = 0; step < 6; step += 1) {
      c.round();
      expect(b.take(endpoint('ep', 10), 50)).toBe(0);
    }
    // Its requests end; a keeps to its new share (5), and once both said so, b has the other 5.
    a.release('ep', 10);
    expect(a.take(endpoint('ep', 10), 50)).toBe(5);
    c.round();
    c.round();
    expect(b.take(endpoint('ep', 10), 50)).toBe(5);
    expect(a.take(endpoint('ep', 10), 50)).toBe(0);
  });

  it('never more than the limit over every process while processes start, stop and die', () => {
    const c = cluster(['a', 'b']);
    const limits = [endpoint('ep_1', 7), endpoint('ep_2', 1), endpoint('ep_3', 3, true), endpoint('ep_4', 2)];
    const held = new Map<string, Map<string, number>>();
    let random = 42;
    const next = () => (random = (random * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    let joined = 0;
    for (let step = 0; step < 400; step += 1) {
      const live = [...c.alive];
      const r = next();
      if (r < 0.03) c.join(`n${(joined += 1)}`);
      else if (r < 0.05 && live.length > 1) {
        // Killed: what it held ended with it.
        const gone = live[Math.floor(next() * live.length)]!;
        c.leave(gone);
        held.delete(gone);
      }
      if (step % 3 === 0) c.round();
      for (const owner of c.alive) {
        const process = c.shares.get(owner)!;
        const mine = held.get(owner) ?? new Map<string, number>();
        held.set(owner, mine);
        for (const limit of limits) {
          if (next() < 0.5) {
            const n = process.take(limit, Math.ceil(next() * 4));
            mine.set(limit.endpointId, (mine.get(limit.endpointId) ?? 0) + n);
          } else {
            const n = Math.min(mine.get(limit.endpointId) ?? 0, Math.ceil(next() * 3));
            process.release(limit.endpointId, n);
            mine.set(limit.endpointId, (mine.get(limit.endpointId) ?? 0) - n);
          }
        }
      }
      for (const limit of limits) {
        const total = [...held.values()].reduce((sum, mine) => sum + (mine.get(limit.endpointId) ?? 0), 0);
        expect(total, `${limit.endpointId} at step ${step}`).toBeLessThanOrEqual(limit.halfOpen ? 1 : limit.maxInFlight);
      }
    }
    // And the work got done: the limits were used, not just kept.
    expect(fill(c.shares.values(), endpoint('ep_fresh', 6)).reduce((a, b) => a + b)).toBeGreaterThan(0);
  });

  it('a process whose heartbeat lapsed for a member\'s life takes nothing until it is a member again', () => {
    let now = 0;
    const a = new EndpointShares('a', [], () => now);
    const t0 = Date.UTC(2026, 11, 4);
    a.heard([], null, new Date(t0));
    expect(a.take(endpoint('ep', 4), 4)).toBe(4);
    a.release('ep', 4);
    // The heartbeats failed (Postgres unreachable): the others may have counted it out.
    now += MEMBER_TTL_MS;
    expect(a.take(endpoint('ep', 4), 4)).toBe(0);
    // Written again, long after the last one: a new member, agreed again only once every member says so.
    a.heard([{ owner: 'b', view: 'other', settled: true }], new Date(t0), new Date(t0 + MEMBER_TTL_MS + 1_000));
    expect(a.take(endpoint('ep', 4), 4)).toBe(0);
  });
});

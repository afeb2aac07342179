import { describe, expect, it } from 'vitest';
import { EndpointGate } from './endpoint-gate.js';

const paused = (until: number) => ({ kind: 'failure', circuit: false, gone: false, pauseUntil: new Date(until) }) as const;
const gone = { kind: 'failure', circuit: true, gone: true, pauseUntil: null } as const;

describe('the endpoint gate', () => {
  it('closes on a Retry-After until the pause ends; a success beside it opens nothing', () => {
    let now = 1_000;
    const gate = new EndpointGate(() => now);
    expect(gate.admit('ep')).toEqual({ open: true });
    expect(gate.heard('ep', paused(3_000), 'http://x/')).toEqual({ endpointId: 'ep', pauseUntil: new Date(3_000), gone: null });
    expect(gate.heard('ep', { kind: 'success' }, 'http://x/')).toBeNull();
    // A shorter pause heard later neither shortens it nor is written again.
    expect(gate.heard('ep', paused(2_000), 'http://x/')).toBeNull();
    expect(gate.admit('ep')).toEqual({ open: false, closed: { kind: 'paused', until: 3_000 } });
    expect(gate.admit('other')).toEqual({ open: true });
    now = 3_000;
    expect(gate.admit('ep')).toEqual({ open: true });
  });

  it('closes on a 410 until a lease read after the store had the disabling says the endpoint was enabled', () => {
    const gate = new EndpointGate(() => 0);
    expect(gate.heard('ep', gone, 'http://x/')).toMatchObject({ endpointId: 'ep', gone: expect.stringMatching(/^answered 410 Gone \(http:\/\/x\/\)/) });
    // A lease read before the store had it says nothing.
    gate.leased('ep', 5);
    expect(gate.admit('ep')).toEqual({ open: false, closed: { kind: 'disabled' } });
    gate.recorded('ep', 10);
    gate.leased('ep', 9);
    expect(gate.admit('ep').open).toBe(false);
    gate.leased('ep', 11);
    expect(gate.admit('ep')).toEqual({ open: true });
  });

  it('closes while an open circuit cools down', () => {
    let now = 0;
    const gate = new EndpointGate(() => now);
    gate.pause('ep', new Date(30_000));
    expect(gate.admit('ep').open).toBe(false);
    now = 30_000;
    expect(gate.admit('ep').open).toBe(true);
  });
});

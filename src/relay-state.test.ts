import { describe, expect, it } from 'vitest';
import { RelayLifecycle, type RelayState } from './relay-state.js';

describe('RelayLifecycle', () => {
  it('walks a session: starting -> active -> draining -> stopped, reporting each state', () => {
    const seen: RelayState[] = [];
    const lifecycle = new RelayLifecycle((state) => seen.push(state));
    for (const state of ['active', 'draining', 'stopped'] as const) lifecycle.transition(state);
    expect(seen).toEqual(['starting', 'active', 'draining', 'stopped']);
  });

  it('lets a failed session start again from any state but stopped, and a standby take over', () => {
    const lifecycle = new RelayLifecycle(() => undefined);
    for (const state of ['standby', 'standby', 'active', 'starting', 'active', 'draining', 'starting', 'stopped'] as const) lifecycle.transition(state);
    expect(lifecycle.state).toBe('stopped');
  });

  it('refuses an illegal change with a INTERNAL error, and stays where it was', () => {
    const lifecycle = new RelayLifecycle(() => undefined);
    expect(() => lifecycle.transition('draining')).toThrow(expect.objectContaining({ code: 'INTERNAL', message: expect.stringContaining('starting -> draining') }));
    lifecycle.transition('stopped');
    expect(() => lifecycle.transition('starting')).toThrow(/stopped -> starting/);
    expect(lifecycle.state).toBe('stopped');
  });
});

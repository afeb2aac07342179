import { RelayError } from './errors.js';

/**
 * The relay's lifecycle. One session at a time: `starting` (connecting to Postgres and Kafka),
 * then `active` (streaming as the slot's reader) or `standby` (another reader holds the slot;
 * polling until it is free); `draining` once reading stopped, until Kafka acknowledged what was
 * sent; `stopped` at the end. A failed session goes back to `starting` (from any state but
 * `stopped`): the next one resumes from the confirmed position.
 */
export type RelayState = 'starting' | 'standby' | 'active' | 'draining' | 'stopped';

export const RELAY_STATES: readonly RelayState[] = ['starting', 'standby', 'active', 'draining', 'stopped'];

/** state -> the states it may move to. */
const LEGAL_TRANSITIONS: Readonly<Record<RelayState, readonly RelayState[]>> = {
  starting: ['active', 'standby', 'starting', 'stopped'],
  standby: ['active', 'standby', 'starting', 'stopped'],
  active: ['draining', 'starting', 'stopped'],
  draining: ['stopped', 'starting'],
  stopped: [],
};

/** The current state, changed only along LEGAL_TRANSITIONS; `onChange` sees every change. */
export class RelayLifecycle {
  private current: RelayState = 'starting';

  constructor(private readonly onChange: (state: RelayState) => void) {
    onChange(this.current);
  }

  get state(): RelayState {
    return this.current;
  }

  transition(to: RelayState): void {
    if (!LEGAL_TRANSITIONS[this.current].includes(to)) {
      throw new RelayError('INTERNAL', `illegal relay state change ${this.current} -> ${to} (a bug: please report it with the log)`);
    }
    this.current = to;
    this.onChange(to);
  }
}

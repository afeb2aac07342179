import type { OptionKey } from '../config/options.js';

/** Exit codes, documented in the README. */
export const EXIT = { ok: 0, failed: 1, usage: 2, drainTimedOut: 3 } as const;

export interface Command {
  readonly summary: string;
  /** Config options the command reads (flags and environment). */
  readonly options: readonly OptionKey[];
  /** Flags of the command itself, with their help text. */
  readonly args?: Readonly<Record<string, string>>;
  readonly action: (flags: Readonly<Record<string, string>>) => Promise<number>;
}

export const DATABASE_OPTIONS: readonly OptionKey[] = ['databaseUrl', 'table', 'publication', 'slot', 'logLevel'];

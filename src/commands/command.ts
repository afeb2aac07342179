import type { Logger } from 'pino';
import type { OptionKey } from '../config/options.js';

/** Exit codes, documented in the README. */
export const EXIT = { ok: 0, failed: 1, usage: 2, drainTimedOut: 3 } as const;

export interface Command {
  readonly summary: string;
  /** Config options the command reads (flags and environment). */
  readonly options: readonly OptionKey[];
  /** Flags of the command itself, with their help text. */
  readonly args?: Readonly<Record<string, string>>;
  /** The command's own defaults where they differ from the options' declared ones. */
  readonly defaults?: Readonly<Partial<Record<OptionKey, string>>>;
  /** Which of `args` are switches: given alone, never with a value (`status --json`). */
  readonly switches?: readonly string[];
  readonly action: (flags: Readonly<Record<string, string>>) => Promise<number>;
}

export const DATABASE_OPTIONS: readonly OptionKey[] = ['databaseUrl', 'table', 'publication', 'slot', 'logLevel'];

/** Beyond the drain's own bound, what a stuck socket or driver may take before the process exits anyway. */
const EXIT_GRACE_MS = 5_000;

/**
 * After a stop signal, the process exits within `boundMs` + a short grace whatever its sockets
 * do (a silent connection can hold a close or a query for minutes): exit 3, not confirmed.
 */
export function exitDeadline(logger: Logger, signal: string, boundMs: number): void {
  setTimeout(() => {
    logger.error({ signal, boundMs: boundMs + EXIT_GRACE_MS }, `still running ${boundMs + EXIT_GRACE_MS}ms after ${signal}: exiting now; unconfirmed events will be sent again by the next run`);
    process.exit(EXIT.drainTimedOut);
  }, boundMs + EXIT_GRACE_MS).unref();
}

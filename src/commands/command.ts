import type { Logger } from 'pino';
import type { Args, CommandSpec, Loaded } from '../config/commands.js';
import { load, type ConfigSources } from '../config/load.js';
import type { OptionKey } from '../config/options.js';
import type { ErrorCode } from '../errors.js';

/** Exit codes, documented in `--help` and docs/errors.md. */
export const EXIT = { ok: 0, failed: 1, usage: 2, drainTimedOut: 3 } as const;

/** How a command that failed with `code` exits: bad usage or configuration is 2, anything else 1. */
export function exitCodeOf(code: ErrorCode): number {
  return code === 'CONFIG_INVALID' ? EXIT.usage : EXIT.failed;
}

/** A command bound to what it reads: its action only ever sees its loaded options. */
export interface Command {
  execute(sources: ConfigSources): Promise<number>;
}

/** Every command goes through the one loader, with its own declaration (config/commands.ts). */
export function command<K extends OptionKey, O extends K, A extends Args>(spec: CommandSpec<K, O, A>, action: (config: Loaded<K, O, A>) => Promise<number>): Command {
  return { execute: (sources) => action(load(spec, sources)) };
}

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

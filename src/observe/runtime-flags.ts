import type { Logger } from 'pino';

/**
 * The V8 flag every way of starting a long-running command passes (the bin's shebang, the
 * Dockerfile's ENTRYPOINT, `npm start`, scripts/dev.sh): with Node 24's default young generation
 * a relay draining a backlog peaked at about twice the memory, for the same CPU.
 */
export const SEMI_SPACE_FLAG = '--max-semi-space-size=16';

/** V8 takes `--max-semi-space-size` and `--max_semi_space_size`, with `=value` or as the next argument. */
const GIVEN = /^--max[-_]semi[-_]space[-_]size(=|$)/;

/**
 * Why the process runs without a semi-space size, or null when it has one: on Node's command
 * line, or in NODE_OPTIONS (which process.execArgv does not show). Any size counts: a value
 * other than 16 is an operator's choice, not an omission.
 */
export function missingRuntimeFlag(execArgv: readonly string[], nodeOptions: string | undefined): string | null {
  const given = [...execArgv, ...(nodeOptions ?? '').split(/\s+/)].some((arg) => GIVEN.test(arg));
  if (given) return null;
  return `node runs without ${SEMI_SPACE_FLAG}: under load the process may use about twice the memory. Start it as the bin (\`npx outbox-relay\`, \`./node_modules/.bin/outbox-relay\`), the Docker image or \`npm start\`, or run \`node ${SEMI_SPACE_FLAG} dist/cli.js\` (or set NODE_OPTIONS=${SEMI_SPACE_FLAG})`;
}

/** Said once, at start, by the commands that run for long (`run`, `webhooks`). */
export function warnOnMissingRuntimeFlag(logger: Logger): void {
  const missing = missingRuntimeFlag(process.execArgv, process.env.NODE_OPTIONS);
  if (missing) logger.warn({ flag: SEMI_SPACE_FLAG }, missing);
}

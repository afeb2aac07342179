#!/usr/bin/env node
import { loadConfig, redactedConfig } from './config/load.js';
import { flagName, OPTIONS, type OptionKey } from './config/options.js';
import { createEncoder } from './encode/create-encoder.js';
import { schemasCheck } from './encode/schemas-check.js';
import { errorCode, errorMessage, RelayError } from './errors.js';
import { createLogger } from './observe/logger.js';
import { createRelayMetrics } from './observe/metrics.js';
import { Relay } from './relay.js';
import { setup, verify } from './setup/setup.js';

/** Exit codes, documented in the README. */
const EXIT = { ok: 0, failed: 1, usage: 2, drainTimedOut: 3 } as const;

const SETUP_OPTIONS: readonly OptionKey[] = ['databaseUrl', 'table', 'publication', 'slot', 'logLevel'];
const SCHEMAS_CHECK_OPTIONS: readonly OptionKey[] = ['schemasDir', 'keySchema'];

const COMMANDS: Record<string, { summary: string; options: readonly OptionKey[] | 'all'; action: (flags: Record<string, string>) => Promise<number> }> = {
  run: { summary: 'Stream outbox inserts from the WAL to Kafka until SIGTERM.', options: 'all', action: runCommand },
  setup: { summary: 'Create the outbox table, publication and slot if missing (idempotent).', options: SETUP_OPTIONS, action: setupCommand },
  'schemas check': { summary: 'Parse and compile every Avro schema; list problems with file and path (exit 1 if any).', options: SCHEMAS_CHECK_OPTIONS, action: schemasCheckCommand },
};

async function main(argv: readonly string[]): Promise<number> {
  const [first, ...rest] = argv;
  // Two-word commands (`schemas check`).
  const command = first !== undefined && rest[0] !== undefined && !rest[0].startsWith('--') && `${first} ${rest[0]}` in COMMANDS ? `${first} ${rest.shift()}` : first;
  if (command === undefined || command === '--help' || command === 'help') {
    process.stdout.write(usage());
    return command === undefined ? EXIT.usage : EXIT.ok;
  }
  const spec = COMMANDS[command];
  if (!spec) {
    process.stderr.write(`unknown command "${command}"\n\n${usage()}`);
    return EXIT.usage;
  }
  const flags = parseFlags(rest);
  if ('help' in flags) {
    process.stdout.write(commandHelp(command));
    return EXIT.ok;
  }
  try {
    return await spec.action(flags);
  } catch (error) {
    if (error instanceof RelayError && error.code === 'CONFIG_INVALID') {
      process.stderr.write(`${error.message}\n`);
      return EXIT.usage;
    }
    process.stderr.write(`outbox-relay ${command} failed [${errorCode(error)}]: ${errorMessage(error)}\n`);
    return EXIT.failed;
  }
}

async function runCommand(flags: Record<string, string>): Promise<number> {
  const config = loadConfig({ env: process.env, flags });
  const logger = createLogger(config.logLevel);
  logger.info({ config: redactedConfig(config) }, 'starting');
  const target = { databaseUrl: config.databaseUrl, table: config.table, publication: config.publication, slot: config.slot };
  if (config.setup) for (const action of await setup(target)) logger.info({ action }, 'setup');
  else await verify(target);

  const stop = new AbortController();
  const metrics = createRelayMetrics();
  const encoder = await createEncoder(config, { logger, metricsRegistry: metrics.registry, signal: stop.signal });
  const relay = new Relay({ config, logger, metrics, encoder });
  const onSignal = (signal: NodeJS.Signals) => {
    if (stop.signal.aborted) {
      logger.warn({ signal }, 'second signal: exiting without draining');
      process.exit(EXIT.failed);
    }
    logger.info({ signal }, 'stopping: draining in-flight events');
    stop.abort();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    const drained = await relay.run(stop.signal);
    logger.info({ drained }, 'stopped');
    return drained ? EXIT.ok : EXIT.drainTimedOut;
  } catch (error) {
    logger.fatal({ code: errorCode(error), err: errorMessage(error) }, 'relay stopped on an error it cannot recover from');
    return EXIT.failed;
  }
}

async function setupCommand(flags: Record<string, string>): Promise<number> {
  const config = loadConfig({ env: process.env, flags }, SETUP_OPTIONS);
  const actions = await setup({ databaseUrl: config.databaseUrl, table: config.table, publication: config.publication, slot: config.slot });
  for (const action of actions) process.stdout.write(`${action}\n`);
  return EXIT.ok;
}

async function schemasCheckCommand(flags: Record<string, string>): Promise<number> {
  const config = loadConfig({ env: process.env, flags }, SCHEMAS_CHECK_OPTIONS);
  const report = await schemasCheck(config.schemasDir, config.keySchema);
  for (const line of report.lines) process.stdout.write(`${line}\n`);
  return report.ok ? EXIT.ok : EXIT.failed;
}

function parseFlags(args: readonly string[]): Record<string, string> {
  const flags: Record<string, string> = {};
  for (let i = 0; i < args.length; i += 1) {
    const arg = args[i]!;
    if (!arg.startsWith('--')) throw new RelayError('CONFIG_INVALID', `unexpected argument "${arg}"; options are --name value`);
    const [name, inline] = arg.slice(2).split(/=(.*)/s, 2) as [string, string | undefined];
    if (inline !== undefined) flags[name] = inline;
    else if (args[i + 1] !== undefined && !args[i + 1]!.startsWith('--')) flags[name] = args[++i]!;
    else flags[name] = '';
  }
  return flags;
}

function usage(): string {
  const lines = Object.entries(COMMANDS).map(([name, spec]) => `  ${name.padEnd(14)} ${spec.summary}`);
  return `usage: outbox-relay <command> [--option value ...]\n\ncommands:\n${lines.join('\n')}\n\n` +
    `Run \`outbox-relay <command> --help\` for its options. Exit codes: 0 ok, 1 failed, 2 bad usage or configuration, 3 stopped before draining.\n`;
}

function commandHelp(command: string): string {
  const spec = COMMANDS[command]!;
  const keys = spec.options === 'all' ? (Object.keys(OPTIONS) as OptionKey[]) : spec.options;
  const rows = keys.map((key) => {
    const option = OPTIONS[key];
    const fallback = 'default' in option ? ` (default: ${option.default})` : ' (required)';
    return `  ${flagName(key)}  [${option.env}]${fallback}\n      ${option.description}`;
  });
  return `outbox-relay ${command}: ${spec.summary}\n\noptions (flag, environment variable):\n${rows.join('\n')}\n`;
}

process.exitCode = await main(process.argv.slice(2));

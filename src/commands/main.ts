import { createRequire } from 'node:module';
import { argFlag, COMMANDS, type CommandHelp, type CommandName } from '../config/commands.js';
import { settingName, type ConfigSources } from '../config/load.js';
import { commandHelp, commandLine, usage } from '../config/help.js';
import { flagName, OPTIONS, type OptionKey } from '../config/options.js';
import { RelayError } from '../errors.js';
import type { AnswerContext } from '../source/connection-errors.js';
import { EXIT, exitCodeOf, type Command } from './command.js';
import { cutoverCommand } from './cutover.js';
import { dropSlotCommand } from './drop-slot.js';
import { commandFailure } from './failure.js';
import { handbackCommand } from './handback.js';
import { pruneCommand } from './prune.js';
import { recoverCommand } from './recover.js';
import { replayCommand } from './replay.js';
import { runCommand } from './run.js';
import { schemasCheckCommand } from './schemas-check.js';
import { setupCommand } from './setup.js';
import { statusCommand } from './status.js';
import { attemptsCommand, deliveriesListCommand, endpointAddCommand, endpointDisableCommand, endpointEnableCommand, endpointListCommand, endpointRotateSecretCommand, endpointUpdateCommand, replayCommand as webhooksReplayCommand, webhooksSetupCommand, withoutCustomerCommand } from './webhook-admin.js';

const ACTIONS: { readonly [C in CommandName]: Command } = {
  run: runCommand,
  setup: setupCommand,
  status: statusCommand,
  prune: pruneCommand,
  replay: replayCommand,
  recover: recoverCommand,
  cutover: cutoverCommand,
  handback: handbackCommand,
  'drop-slot': dropSlotCommand,
  'schemas check': schemasCheckCommand,
  webhooks: loadedWhenRun(async () => (await import('./webhooks.js')).webhooksCommand),
  'webhooks setup': webhooksSetupCommand,
  'webhooks endpoint add': endpointAddCommand,
  'webhooks endpoint list': endpointListCommand,
  'webhooks endpoint update': endpointUpdateCommand,
  'webhooks endpoint disable': endpointDisableCommand,
  'webhooks endpoint enable': endpointEnableCommand,
  'webhooks endpoint rotate-secret': endpointRotateSecretCommand,
  'webhooks deliveries list': deliveriesListCommand,
  'webhooks attempts': attemptsCommand,
  'webhooks replay': webhooksReplayCommand,
  'webhooks without-customer': withoutCustomerCommand,
  'webhooks api': loadedWhenRun(async () => (await import('./webhooks-api.js')).webhooksApiCommand),
};

/**
 * A command whose module is imported only when it runs: `webhooks` brings undici, which needs
 * Node 22, and `--help` or any other command must not pay for it (or fail on an older Node).
 */
function loadedWhenRun(load: () => Promise<Command>): Command {
  return { execute: async (sources) => (await load()).execute(sources) };
}

const isCommand = (name: string): name is CommandName => name in COMMANDS;
const isCommandOrFamily = (name: string): boolean => isCommand(name) || Object.keys(COMMANDS).some((each) => each.startsWith(`${name} `));

/** `outbox-relay <argv>`: the exit code. Writes to stdout and stderr. */
export async function main(argv: readonly string[], env: ConfigSources['env']): Promise<number> {
  // Commands of several words (`schemas check`, `webhooks endpoint add`): the longest run of
  // words that names a command or a family of them (`webhooks endpoint`).
  let length = argv.length === 0 ? 0 : 1;
  while (length < argv.length && !argv[length]!.startsWith('--') && isCommandOrFamily(argv.slice(0, length + 1).join(' '))) length += 1;
  const command = argv.length === 0 ? undefined : argv.slice(0, length).join(' ');
  const rest = argv.slice(length);
  if (command === '--version' || command === 'version') {
    process.stdout.write(`outbox-relay ${(createRequire(import.meta.url)('../../package.json') as { version: string }).version}\n`);
    return EXIT.ok;
  }
  if (command === undefined || command === '--help' || command === 'help') {
    process.stdout.write(usage());
    return command === undefined ? EXIT.usage : EXIT.ok;
  }
  if (!isCommand(command)) {
    // The first word of two-word commands (`schemas`): list them.
    const family = (Object.keys(COMMANDS) as CommandName[]).filter((name) => name.startsWith(`${command} `));
    if (family.length > 0) {
      (rest[0] === '--help' ? process.stdout : process.stderr).write(`outbox-relay ${command} <command>:\n${family.map(commandLine).join('\n')}\n`);
      return rest[0] === '--help' ? EXIT.ok : EXIT.usage;
    }
    process.stderr.write(`unknown command "${command}"\n\n${usage()}`);
    return EXIT.usage;
  }
  let flags: Record<string, string> = {};
  try {
    flags = parseFlags(rest);
    if ('help' in flags) {
      process.stdout.write(commandHelp(command));
      return EXIT.ok;
    }
    checkFlags(command, flags);
    return await ACTIONS[command].execute({ env, flags });
  } catch (error) {
    const failure = commandFailure(error, tablesNamedBy(command, { env, flags }));
    // A configuration problem is the whole message, with every variable named (exit 2).
    process.stderr.write(failure.code === 'CONFIG_INVALID' ? `${failure.message}\n` : `outbox-relay ${command} failed [${failure.code}]: ${failure.message}\n`);
    return exitCodeOf(failure.code);
  }
}

/**
 * What a command read its tables from, as the operator set it, for the hint of a table or schema
 * Postgres does not have: OUTBOX_SOURCES (its file, its flag) when given, else OUTBOX_TABLE; the
 * webhook commands' OUTBOX_WEBHOOK_SCHEMA. Undefined for a command that reads no tables.
 */
export function tablesNamedBy(command: CommandName, sources: ConfigSources): AnswerContext | undefined {
  const options: readonly OptionKey[] = COMMANDS[command].options;
  const read = (key: OptionKey) => (options.includes(key) ? (settingName(key, sources) ?? OPTIONS[key].env) : null);
  const sourcesSet = options.includes('sources') ? settingName('sources', sources) : null;
  const tables = sourcesSet ?? read('table');
  if (tables !== null) return { tables, of: 'outbox' };
  const webhooks = read('webhookSchema');
  return webhooks === null ? undefined : { tables: webhooks, of: 'webhooks' };
}

/** `--name value`, `--name=value` and bare `--switch` (''), by name without dashes. */
export function parseFlags(args: readonly string[]): Record<string, string> {
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

const OPTION_FLAGS = new Set((Object.keys(OPTIONS) as OptionKey[]).map((key) => flagName(key).slice(2)));

/**
 * A mistyped flag fails loudly instead of being ignored. An option the command does not read
 * (`replay --slot`) is only warned about: scripts written when every command took every relay
 * option keep working.
 */
export function checkFlags(command: CommandName, flags: Record<string, string>): void {
  const spec: CommandHelp = COMMANDS[command];
  const args = Object.entries(spec.args ?? {});
  const own = new Set([...spec.options.map((key) => flagName(key).slice(2)), ...args.map(([name]) => argFlag(name).slice(2))]);
  const unknown = Object.keys(flags).filter((name) => !own.has(name) && !OPTION_FLAGS.has(name));
  if (unknown.length > 0) {
    throw new RelayError('CONFIG_INVALID', `unknown option ${unknown.map((name) => `--${name}`).join(', ')} for \`${command}\`; see \`outbox-relay ${command} --help\``);
  }
  for (const name of Object.keys(flags).filter((flag) => !own.has(flag))) {
    process.stderr.write(`outbox-relay ${command}: --${name} is not read by \`${command}\`; ignored (see \`outbox-relay ${command} --help\`)\n`);
  }
  for (const [name, arg] of args) {
    const value = flags[argFlag(name).slice(2)];
    if ('switch' in arg && value !== undefined && value !== '') throw new RelayError('CONFIG_INVALID', `${argFlag(name)} takes no value (got "${value}"); see \`outbox-relay ${command} --help\``);
  }
}

#!/usr/bin/env node
// First: the relay's kafkajs replacements go in before anything loads kafkajs (see the module).
import './sink/kafkajs-patches.js';
import { createRequire } from 'node:module';
import { dropSlotCommand } from './commands/drop-slot.js';
import { EXIT, type Command } from './commands/command.js';
import { pruneCommand } from './commands/prune.js';
import { replayCommand } from './commands/replay.js';
import { runCommand } from './commands/run.js';
import { schemasCheckCommand } from './commands/schemas-check.js';
import { setupCommand } from './commands/setup.js';
import { statusCommand } from './commands/status.js';
import { flagName, OPTIONS } from './config/options.js';
import { errorCode, errorMessage, RelayError } from './errors.js';

const COMMANDS: Readonly<Record<string, Command>> = {
  run: runCommand,
  setup: setupCommand,
  status: statusCommand,
  prune: pruneCommand,
  replay: replayCommand,
  'drop-slot': dropSlotCommand,
  'schemas check': schemasCheckCommand,
};

async function main(argv: readonly string[]): Promise<number> {
  const [first, ...rest] = argv;
  // Two-word commands (`schemas check`).
  const command = first !== undefined && rest[0] !== undefined && `${first} ${rest[0]}` in COMMANDS ? `${first} ${rest.shift()}` : first;
  if (command === '--version' || command === 'version') {
    process.stdout.write(`outbox-relay ${(createRequire(import.meta.url)('../package.json') as { version: string }).version}\n`);
    return EXIT.ok;
  }
  if (command === undefined || command === '--help' || command === 'help') {
    process.stdout.write(usage());
    return command === undefined ? EXIT.usage : EXIT.ok;
  }
  const spec = COMMANDS[command];
  if (!spec) {
    // The first word of two-word commands (`schemas`): list them.
    const family = Object.keys(COMMANDS).filter((name) => name.startsWith(`${command} `));
    if (family.length > 0) {
      const lines = family.map((name) => `  ${name.padEnd(14)} ${COMMANDS[name]!.summary}`).join('\n');
      (rest[0] === '--help' ? process.stdout : process.stderr).write(`outbox-relay ${command} <command>:\n${lines}\n`);
      return rest[0] === '--help' ? EXIT.ok : EXIT.usage;
    }
    process.stderr.write(`unknown command "${command}"\n\n${usage()}`);
    return EXIT.usage;
  }
  try {
    const flags = parseFlags(rest);
    if ('help' in flags) {
      process.stdout.write(commandHelp(command, spec));
      return EXIT.ok;
    }
    checkFlags(command, spec, flags);
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

/** A mistyped flag fails loudly instead of being ignored. */
function checkFlags(command: string, spec: Command, flags: Record<string, string>): void {
  const known = new Set([...spec.options.map((key) => flagName(key).slice(2)), ...Object.keys(spec.args ?? {})]);
  const unknown = Object.keys(flags).filter((name) => !known.has(name));
  if (unknown.length > 0) {
    throw new RelayError('CONFIG_INVALID', `unknown option ${unknown.map((name) => `--${name}`).join(', ')} for \`${command}\`; see \`outbox-relay ${command} --help\``);
  }
  for (const name of spec.switches ?? []) {
    if (flags[name] !== undefined && flags[name] !== '') throw new RelayError('CONFIG_INVALID', `--${name} takes no value (got "${flags[name]}"); see \`outbox-relay ${command} --help\``);
  }
}

function usage(): string {
  const lines = Object.entries(COMMANDS).map(([name, spec]) => `  ${name.padEnd(14)} ${spec.summary}`);
  return `usage: outbox-relay <command> [--option value ...]\n\ncommands:\n${lines.join('\n')}\n\n` +
    `Run \`outbox-relay <command> --help\` for its options. Exit codes: 0 ok, 1 failed, 2 bad usage or configuration, 3 stopped before draining.\n`;
}

function commandHelp(command: string, spec: Command): string {
  const own = Object.entries(spec.args ?? {}).map(([name, help]) => `  --${name}\n      ${help}`);
  const rows = spec.options.map((key) => {
    const option = OPTIONS[key];
    const declared = spec.defaults?.[key] ?? ('default' in option ? option.default : undefined);
    const fallback = declared === undefined ? ' (required)' : ` (default: ${declared === '' ? 'none' : declared})`;
    return `  ${flagName(key)}  [${option.env}]${fallback}\n      ${option.description}`;
  });
  const ownSection = own.length > 0 ? `\narguments:\n${own.join('\n')}\n` : '';
  return `outbox-relay ${command}: ${spec.summary}\n${ownSection}\noptions (flag, environment variable):\n${rows.join('\n')}\n`;
}

// The command decided the outcome: a socket still open to a silent peer (or a driver's timer)
// must not keep the process, and its exit code, waiting. Logs are written synchronously.
process.exit(await main(process.argv.slice(2)));

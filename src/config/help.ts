import { argFlag, COMMANDS, type CommandHelp, type CommandName } from './commands.js';
import { flagName, GROUPS, OPTIONS, type OptionKey } from './options.js';

/** A command's options in their declared order, which groups them. */
export function optionsOf(spec: CommandHelp): OptionKey[] {
  return (Object.keys(OPTIONS) as OptionKey[]).filter((key) => spec.options.includes(key));
}

/** The default `spec` applies to an option; undefined when there is none. */
export function defaultOf(spec: CommandHelp, key: OptionKey): string | undefined {
  return spec.defaults?.[key] ?? OPTIONS[key].default;
}

export function isOptional(spec: CommandHelp, key: OptionKey): boolean {
  return spec.optional?.includes(key) ?? false;
}

/** What a command cannot run without (and may run without): one line for both helps. */
export function needs(spec: CommandHelp): string | null {
  const required = optionsOf(spec).filter((key) => defaultOf(spec, key) === undefined && !isOptional(spec, key));
  const optional = optionsOf(spec).filter((key) => isOptional(spec, key));
  const parts = [
    ...(required.length > 0 ? [`needs ${required.map((key) => OPTIONS[key].env).join(', ')}`] : []),
    ...optional.map((key) => `${OPTIONS[key].env} optional`),
  ];
  return parts.length > 0 ? parts.join('; ') : null;
}

const NAME_WIDTH = 14;

/** `  name  summary`, and what it needs below. */
export function commandLine(name: CommandName): string {
  const spec: CommandHelp = COMMANDS[name];
  const needed = needs(spec);
  const indent = `\n  ${''.padEnd(NAME_WIDTH)} `;
  // A long name (`webhooks endpoint rotate-secret`) stands on its own line.
  const head = name.length < NAME_WIDTH ? `  ${name.padEnd(NAME_WIDTH)} ` : `  ${name}${indent}`;
  return `${head}${spec.summary}${needed ? `${indent}${needed}` : ''}`;
}

export function usage(): string {
  const lines = (Object.keys(COMMANDS) as CommandName[]).map(commandLine);
  return `usage: outbox-relay <command> [--option value ...]\n\ncommands:\n${lines.join('\n')}\n\n` +
    `Run \`outbox-relay <command> --help\` for its options. Exit codes: 0 ok, 1 failed, 2 bad usage or configuration, 3 stopped before draining.\n`;
}

/** Exactly what the command reads, by group: its arguments, then its options with their defaults. */
export function commandHelp(name: CommandName): string {
  const spec: CommandHelp = COMMANDS[name];
  const needed = needs(spec);
  const sections = [`outbox-relay ${name}: ${spec.summary}${needed ? `\n${needed}` : ''}\n`];
  const args = Object.entries(spec.args ?? {});
  if (args.length > 0) sections.push(`arguments:\n${args.map(([arg, { description }]) => `  ${argFlag(arg)}\n      ${description}`).join('\n')}\n`);
  for (const [group, title] of Object.entries(GROUPS)) {
    const rows = optionsOf(spec).filter((key) => OPTIONS[key].group === group).map((key) => {
      const fallback = defaultOf(spec, key);
      const shown = isOptional(spec, key) ? 'optional' : fallback === undefined ? 'required' : `default: ${fallback === '' ? 'none' : fallback}`;
      return `  ${flagName(key)}  [${OPTIONS[key].env}] (${shown})\n      ${OPTIONS[key].description}`;
    });
    if (rows.length > 0) sections.push(`${title} (flag [environment variable]):\n${rows.join('\n')}\n`);
  }
  return sections.join('\n');
}

// Prints the README's configuration tables from the one place options and commands are declared.
// Usage: npx tsx scripts/options-table.ts
import { COMMANDS, type CommandHelp, type CommandName } from '../src/config/commands.js';
import { isOptional } from '../src/config/help.js';
import { flagName, GROUPS, OPTIONS, type OptionKey } from '../src/config/options.js';

const code = (text: string) => `\`${text}\``;

/** The declared default, and where a command differs from it. */
function defaultCell(key: OptionKey, readers: readonly [CommandName, CommandHelp][]): string {
  const declared = OPTIONS[key].default;
  const shown = declared === undefined ? '**required**' : declared === '' ? 'none' : code(declared);
  const exceptions = readers.flatMap(([name, spec]) => {
    const own = spec.defaults?.[key];
    if (own !== undefined) return [`${code(name)}: ${code(own)}`];
    return isOptional(spec, key) ? [`optional for ${code(name)}`] : [];
  });
  return exceptions.length > 0 ? `${shown} (${exceptions.join(', ')})` : shown;
}

export function optionsTable(): string {
  const commands = Object.entries(COMMANDS) as [CommandName, CommandHelp][];
  const intro = 'Grouped as `<command> --help` lists them. "Read by" names the commands that read an option; the others ignore its variable and warn about its flag.';
  const sections = Object.entries(GROUPS).map(([group, title]) => {
    const rows = (Object.keys(OPTIONS) as OptionKey[]).filter((key) => OPTIONS[key].group === group).map((key) => {
      const readers = commands.filter(([, spec]) => spec.options.includes(key));
      const cells = [code(OPTIONS[key].env), code(flagName(key)), defaultCell(key, readers), readers.map(([name]) => code(name)).join(', '), OPTIONS[key].description];
      return `| ${cells.map((cell) => cell.replace(/\|/g, '\\|')).join(' | ')} |`;
    });
    return [`**${title}**`, '', '| Variable | Flag | Default | Read by | Meaning |', '|---|---|---|---|---|', ...rows].join('\n');
  });
  return [intro, ...sections].join('\n\n');
}

if (import.meta.url === `file://${process.argv[1]}`) process.stdout.write(`${optionsTable()}\n`);

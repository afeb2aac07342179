// docs/configuration.md: every option, from the one place options and commands are declared.
import { COMMANDS, type CommandHelp, type CommandName } from '../../src/config/commands.js';
import { isOptional } from '../../src/config/help.js';
import { flagName, GROUPS, IMPORTANCE, OPTIONS, type Importance, type OptionKey } from '../../src/config/options.js';
import { cell, code, table } from './markdown.js';

const KEYS = Object.keys(OPTIONS) as OptionKey[];
const COMMAND_NAMES = Object.keys(COMMANDS) as CommandName[];

export const CONFIGURATION_INTRO = `# Configuration

Every option is an environment variable and a flag (flags win). Durations are written \`500ms\`,
\`10s\`, \`5m\`, \`1h\`, \`7d\`. A secret (a password, a token, a connection string) may instead be
given as a file, \`<VARIABLE>_FILE\`, read again at each use. \`outbox-relay <command> --help\`
lists exactly what a command reads.`;

const readersOf = (key: OptionKey) => COMMAND_NAMES.filter((name) => (COMMANDS[name] as CommandHelp).options.includes(key));

/** The declared default, and where a command differs from it. */
function defaultCell(key: OptionKey): string {
  const declared = OPTIONS[key].default;
  const shown = declared === undefined ? '**required**' : declared === '' ? 'none' : code(declared);
  const exceptions = readersOf(key).flatMap((name) => {
    const spec: CommandHelp = COMMANDS[name];
    const own = spec.defaults?.[key];
    if (own !== undefined) return [`${code(name)}: ${code(own)}`];
    return isOptional(spec, key) ? [`optional for ${code(name)}`] : [];
  });
  return exceptions.length > 0 ? `${shown} (${exceptions.join(', ')})` : shown;
}

/** Who reads an option: a family read whole (`webhooks` and its subcommands) as one entry; nearly every command as the few that do not. */
function commandsCell(key: OptionKey): string {
  const readers = readersOf(key);
  const others = COMMAND_NAMES.filter((name) => !readers.includes(name));
  if (others.length === 0) return 'every command';
  if (others.length <= 2) return `every command but ${others.map(code).join(', ')}`;
  const shown: string[] = [];
  const whole = new Set<string>();
  for (const name of readers) {
    const family = COMMAND_NAMES.filter((each) => each.startsWith(`${name} `));
    if (family.length > 1 && family.every((each) => readers.includes(each))) {
      shown.push(`${code(name)} and its subcommands`);
      whole.add(name);
    } else if (![...whole].some((parent) => name.startsWith(`${parent} `))) shown.push(code(name));
  }
  return shown.join(', ');
}

function tier(importance: Importance): string {
  const keys = KEYS.filter((key) => OPTIONS[key].importance === importance);
  const rows = keys.map((key) => [code(OPTIONS[key].env), code(flagName(key)), defaultCell(key), cell(OPTIONS[key].summary ?? '')]);
  return [`### ${capitalized(importance)}`, '', IMPORTANCE[importance], '', table(['Variable', 'Flag', 'Default', 'What it is'], rows)].join('\n');
}

const capitalized = (text: string) => `${text[0]!.toUpperCase()}${text.slice(1)}`;

function reference(): string[] {
  return Object.entries(GROUPS).map(([group, title]) => {
    const rows = KEYS.filter((key) => OPTIONS[key].group === group).map((key) => [
      code(OPTIONS[key].env), code(flagName(key)), defaultCell(key), OPTIONS[key].importance, commandsCell(key), cell(OPTIONS[key].description),
    ]);
    return [`### ${title}`, '', table(['Variable', 'Flag', 'Default', 'Importance', 'Commands', 'Description'], rows)].join('\n');
  });
}

/** The generated part of docs/configuration.md. */
export function configurationReference(): string {
  const later = (['tuning', 'expert'] as const).map((importance) => `- **${importance}** (${KEYS.filter((key) => OPTIONS[key].importance === importance).length}): ${IMPORTANCE[importance]}`);
  return [
    '_Generated from `src/config/options.ts` and `src/config/commands.ts` by `npm run docs`: edit those, not this part of the page._',
    '## First deployment',
    `Of the ${KEYS.length} options, these are the ones to read first.`,
    tier('required'),
    tier('common'),
    ['The others are in the reference below:', '', ...later].join('\n'),
    '## Reference',
    'Grouped as `<command> --help` lists them. "Commands" names the commands that read an option; the others ignore its variable and warn about its flag.',
    ...reference(),
  ].join('\n\n');
}

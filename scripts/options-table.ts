// Prints the README's configuration table from the one place options are declared.
// Usage: npx tsx scripts/options-table.ts
import { flagName, OPTIONS, type OptionKey } from '../src/config/options.js';

export function optionsTable(): string {
  const rows = (Object.keys(OPTIONS) as OptionKey[]).map((key) => {
    const option = OPTIONS[key];
    const fallback = 'default' in option ? `\`${option.default}\`` : '**required**';
    return `| \`${option.env}\` | \`${flagName(key)}\` | ${fallback} | ${option.description.replace(/\|/g, '\\|')} |`;
  });
  return ['| Variable | Flag | Default | Meaning |', '|---|---|---|---|', ...rows].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) process.stdout.write(`${optionsTable()}\n`);

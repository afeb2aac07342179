import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const RESULTS = fileURLToPath(new URL('../results', import.meta.url));

/** Writes a report to bench/results/<date>-<name>.md (-2, -3, ... when the day has one already) and prints it with its path. */
export function writeMarkdownResult(name: string, lines: readonly string[]): void {
  if (!existsSync(RESULTS)) mkdirSync(RESULTS, { recursive: true });
  const date = new Date().toISOString().slice(0, 10);
  let file = join(RESULTS, `${date}-${name}.md`);
  for (let n = 2; existsSync(file); n += 1) file = join(RESULTS, `${date}-${name}-${n}.md`);
  writeFileSync(file, lines.join('\n'));
  process.stdout.write(`${lines.join('\n')}\nwritten to ${file}\n`);
}

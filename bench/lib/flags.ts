import type { Parser } from '../../src/config/parsers.js';

/** A command-line flag's value through the relay's own parsers, or an error naming the flag and what it takes. */
export function flag<T>(name: string, raw: string, parser: Parser<T>): T {
  try {
    return parser.parse(raw);
  } catch (error) {
    throw new Error(`--${name}=${JSON.stringify(raw)} ${(error as Error).message}; expected ${parser.expected}`);
  }
}

/** `--<name>="..."`: Node options for a bench's child processes, each starting with "--" (a stray word would be taken for the script). */
export function nodeFlags(name: string, raw: string): string[] {
  const words = raw.split(/\s+/).filter(Boolean);
  const stray = words.find((word) => !word.startsWith('--'));
  if (stray !== undefined) throw new Error(`--${name}: ${JSON.stringify(stray)} is not a Node option; expected options such as "--max-old-space-size=128"`);
  return words;
}

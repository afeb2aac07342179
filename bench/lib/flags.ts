import type { Parser } from '../../src/config/parsers.js';

/** A command-line flag's value through the relay's own parsers, or an error naming the flag and what it takes. */
export function flag<T>(name: string, raw: string, parser: Parser<T>): T {
  try {
    return parser.parse(raw);
  } catch (error) {
    throw new Error(`--${name}=${JSON.stringify(raw)} ${(error as Error).message}; expected ${parser.expected}`);
  }
}

/**
 * Value parsers for config options. Each returns the typed value or throws a message saying
 * what was expected; the loader adds which option it was.
 */
export type Parser<T> = { readonly parse: (raw: string) => T; readonly expected: string };

export const text: Parser<string> = {
  expected: 'a non-empty string',
  parse: (raw) => {
    if (raw.trim() === '') throw new Error('is empty');
    return raw.trim();
  },
};

export const list: Parser<readonly string[]> = {
  expected: 'a comma-separated list, e.g. host1:9092,host2:9092',
  parse: (raw) => {
    const items = raw.split(',').map((item) => item.trim()).filter(Boolean);
    if (items.length === 0) throw new Error('is empty');
    return items;
  },
};

export function integer(min: number, max: number): Parser<number> {
  return {
    expected: `an integer from ${min} to ${max}`,
    parse: (raw) => {
      const value = Number(raw);
      if (!Number.isInteger(value) || value < min || value > max) throw new Error(`is not an integer from ${min} to ${max}`);
      return value;
    },
  };
}

export function oneOf<const T extends string>(...choices: T[]): Parser<T> {
  return {
    expected: `one of ${choices.join(' | ')}`,
    parse: (raw) => {
      if (!(choices as string[]).includes(raw)) throw new Error(`is not one of ${choices.join(' | ')}`);
      return raw as T;
    },
  };
}

export const boolean: Parser<boolean> = {
  expected: 'true or false',
  parse: (raw) => {
    if (['true', '1', 'yes', 'on', ''].includes(raw.toLowerCase())) return true;
    if (['false', '0', 'no', 'off'].includes(raw.toLowerCase())) return false;
    throw new Error('is not true or false');
  },
};

const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/;
const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** Durations are written `500ms`, `10s`, `5m`, `1h`, `7d` (a bare number is milliseconds) and compiled to ms. */
export const duration: Parser<number> = {
  expected: 'a duration such as 500ms, 10s, 5m, 1h or 7d',
  parse: (raw) => {
    const match = DURATION.exec(raw.trim());
    if (!match) throw new Error('is not a duration');
    const unit = (match[2] ?? 'ms') as keyof typeof UNIT_MS;
    return Math.round(Number(match[1]) * UNIT_MS[unit]);
  },
};

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_$]*$/;

/** A plain Postgres identifier; quoting tricks are refused rather than escaped. */
export const identifier: Parser<string> = {
  expected: 'a plain SQL identifier (letters, digits, _)',
  parse: (raw) => {
    if (!IDENTIFIER.test(raw)) throw new Error('is not a plain SQL identifier');
    return raw;
  },
};

/** `schema.table` or `table` (schema public). */
export const qualifiedTable: Parser<{ readonly schema: string; readonly name: string }> = {
  expected: 'a table name, optionally schema-qualified: event_outbox or billing.event_outbox',
  parse: (raw) => {
    const parts = raw.split('.');
    if (parts.length > 2 || !parts.every((part) => IDENTIFIER.test(part))) throw new Error('is not a table name');
    return parts.length === 2 ? { schema: parts[0]!, name: parts[1]! } : { schema: 'public', name: parts[0]! };
  },
};

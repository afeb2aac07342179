import { isPlainIdentifier } from '../outbox-table.js';

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

export function commaList(example: string): Parser<readonly string[]> {
  return {
    expected: `a comma-separated list, e.g. ${example}`,
    parse: (raw) => {
      const items = raw.split(',').map((item) => item.trim()).filter(Boolean);
      if (items.length === 0) throw new Error('is empty');
      return items;
    },
  };
}

export const list = commaList('host1:9092,host2:9092');

/** host:port, the host a name, an IPv4 address or a bracketed IPv6 one ([::1]:9092). */
const HOST_PORT = /^(?:\[[0-9A-Fa-f:.]+\]|[^\s:[\]/]+):(\d{1,5})$/;

/**
 * Kafka bootstrap servers. Each needs its port: kafkajs takes `host` alone as a broker it cannot
 * reach and retries it for ever as a connection error, instead of the typo it is.
 */
export const brokers: Parser<readonly string[]> = {
  expected: 'comma-separated host:port pairs, e.g. kafka-1:9092,kafka-2:9092',
  parse: (raw) =>
    list.parse(raw).map((entry) => {
      const port = HOST_PORT.exec(entry)?.[1];
      if (port === undefined) throw new Error(`has "${entry}", which is not host:port${/^[^:]+$/.test(entry) ? ' (no port)' : ''}`);
      if (Number(port) < 1 || Number(port) > 65_535) throw new Error(`has "${entry}", whose port is not from 1 to 65535`);
      return entry;
    }),
};

/** A value that may be left empty: null then. */
export function optional<T>(parser: Parser<T>): Parser<T | null> {
  return { expected: `${parser.expected}, or empty`, parse: (raw) => (raw.trim() === '' ? null : parser.parse(raw)) };
}

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
      if (!(choices as string[]).includes(raw)) throw new Error('is not an allowed value');
      return raw as T;
    },
  };
}

export const boolean: Parser<boolean> = {
  expected: 'true or false',
  parse: (raw) => {
    if (['true', '1', 'yes', 'on'].includes(raw.toLowerCase())) return true;
    if (['false', '0', 'no', 'off'].includes(raw.toLowerCase())) return false;
    throw new Error('is not true or false');
  },
};

const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/;
const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

function parseDuration(raw: string): number {
  const match = DURATION.exec(raw.trim());
  if (!match) throw new Error('is not a duration');
  const unit = (match[2] ?? 'ms') as keyof typeof UNIT_MS;
  return Math.round(Number(match[1]) * UNIT_MS[unit]);
}

/**
 * The longest timer Node can run: past 2^31-1 ms (about 24.8 days) setTimeout and setInterval
 * fire after 1 ms instead, so `--every 25d` would run a pass every millisecond.
 */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * A duration the relay waits or repeats on, written `500ms`, `10s`, `5m`, `1h`, `7d` (a bare
 * number is milliseconds), compiled to ms; at most 24d.
 */
export const duration: Parser<number> = {
  expected: 'a duration such as 500ms, 10s, 5m, 1h or 7d, at most 24d',
  parse: (raw) => {
    const ms = parseDuration(raw);
    if (ms > MAX_TIMER_MS) throw new Error('is longer than 24d, the longest wait a timer can hold');
    return ms;
  },
};

/** A JSON object of strings (HTTP headers). */
export const jsonStringMap: Parser<Readonly<Record<string, string>>> = {
  expected: 'a JSON object of strings, e.g. {"authorization":"Bearer abc"}',
  parse: (raw) => {
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch {
      throw new Error('is not JSON');
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Error('is not a JSON object');
    for (const [name, item] of Object.entries(value)) if (typeof item !== 'string') throw new Error(`has "${name}", whose value is not a string`);
    return value as Record<string, string>;
  },
};

/** Durations in order, comma-separated (a retry schedule). */
export const durationList: Parser<readonly number[]> = {
  expected: 'comma-separated durations, e.g. 0s,5s,5m,30m,2h',
  parse: (raw) => {
    const items = raw.split(',').map((item) => item.trim());
    if (items.length === 0 || items.some((item) => item === '')) throw new Error('has an empty entry');
    return items.map((item) => {
      try {
        return duration.parse(item);
      } catch (error) {
        throw new Error(`has "${item}", which ${(error as Error).message}`);
      }
    });
  },
};

/** A duration of at least `minMs`: a watchdog or a stall bound of 0 would fire at once. */
export function durationAtLeast(minMs: number, shown: string): Parser<number> {
  return {
    expected: `a duration from ${shown} to 24d, such as 30s, 5m or 1h`,
    parse: (raw) => {
      const ms = duration.parse(raw);
      if (ms < minMs) throw new Error(`is shorter than ${shown}`);
      return ms;
    },
  };
}

/** A point in time, e.g. where a replay starts; anything `Date` reads, as ISO 8601 is meant. */
export const time: Parser<Date> = {
  expected: 'ISO 8601, e.g. 2026-11-29T10:00:00Z',
  parse: (raw) => {
    const date = new Date(raw);
    if (Number.isNaN(date.getTime())) throw new Error('is not a time');
    return date;
  },
};

/** A time, or `all`: from the beginning (null). */
export const timeOrAll: Parser<Date | null> = {
  expected: `${time.expected}, or all`,
  parse: (raw) => (raw.trim() === 'all' ? null : time.parse(raw)),
};

/** A span of time that is compared, not waited on (a retention): any length. */
export const age: Parser<number> = {
  expected: 'a duration such as 12h, 7d or 90d',
  parse: parseDuration,
};


/** A plain Postgres identifier; quoting tricks are refused rather than escaped. */
export const identifier: Parser<string> = {
  expected: 'a plain SQL identifier (letters, digits, _)',
  parse: (raw) => {
    if (!isPlainIdentifier(raw)) throw new Error('is not a plain SQL identifier');
    return raw;
  },
};

/** `schema.table` or `table` (schema public). */
export const qualifiedTable: Parser<{ readonly schema: string; readonly name: string }> = {
  expected: 'a table name, optionally schema-qualified: event_outbox or billing.event_outbox',
  parse: (raw) => {
    const parts = raw.split('.');
    if (parts.length > 2 || !parts.every(isPlainIdentifier)) throw new Error('is not a table name');
    return parts.length === 2 ? { schema: parts[0]!, name: parts[1]! } : { schema: 'public', name: parts[0]! };
  },
};

import pg from 'pg';
import type { TableOutbox } from '../outboxes.js';
import type { ColumnParser, ColumnParserFor } from '../source/pgoutput.js';
import { JsonText } from './json-text.js';

const JSON_OID = 114;
const JSONB_OID = 3802;
const TIMESTAMPTZ_OID = 1184;

export interface ColumnParserOptions {
  readonly format: 'json' | 'avro';
  readonly columnPayload: string;
  readonly columnCreatedAt: string;
}

/**
 * The relay's own parsers for two outbox columns, both on the per-event path:
 * - a json or jsonb payload stays the bytes Postgres sent (a JsonText), whatever the format:
 *   the JSON format publishes them as they are (parsing them only to serialize them again was
 *   the costliest step per event, and lost digits of numbers beyond double precision), the
 *   Avro format transcodes them without building the object graph;
 * - created_at is parsed without pg's regular expressions when it is in the ISO form
 *   Postgres prints by default.
 */
/** An outbox table as a command reads its rows: each column parsed as the stream parses it. */
export interface TableReading {
  readonly outbox: TableOutbox;
  readonly columnParsers: ColumnParserFor;
}

export function tableReading(outbox: TableOutbox): TableReading {
  return { outbox, columnParsers: columnParsersFor({ format: outbox.format, columnPayload: outbox.columns.payload, columnCreatedAt: outbox.columns.createdAt }) };
}

export function columnParsersFor(config: ColumnParserOptions): ColumnParserFor {
  return ({ name, typeOid }) => {
    if (name === config.columnPayload && (typeOid === JSON_OID || typeOid === JSONB_OID)) return JSON_TEXT;
    if (name === config.columnCreatedAt && typeOid === TIMESTAMPTZ_OID) return parseTimestamptz;
    return undefined;
  };
}

const JSON_TEXT: ColumnParser = Object.assign((text: string) => new JsonText(text), { fromBytes: JsonText.fromBytes });

const pgTimestamptz = pg.types.getTypeParser(TIMESTAMPTZ_OID) as (text: string) => Date | number | null;

/**
 * A timestamptz in Postgres's ISO output ("2026-11-30 01:08:21.123456+00", offsets such as
 * "+05:30" or "-03:30:45") as the ISO 8601 UTC text the created_at header carries, to the
 * millisecond, truncated as pg's parser does. Anything else (BC dates, years before 100,
 * infinity, another DateStyle) goes to pg's own parser, which gives a Date.
 */
export function parseTimestamptz(text: string): string | Date | number | null {
  const year = digits(text, 0, 4);
  if (!(year >= 100) || text.charCodeAt(4) !== DASH || text.charCodeAt(7) !== DASH || text.charCodeAt(10) !== SPACE || text.charCodeAt(13) !== COLON || text.charCodeAt(16) !== COLON) return pgTimestamptz(text);
  let at = 19;
  let millis = 0;
  if (text.charCodeAt(at) === DOT) {
    // Milliseconds are the first three digits; the microseconds after them are dropped.
    for (let scale = 100, first = (at += 1); isDigit(text.charCodeAt(at)); at++, scale /= 10) {
      if (at < first + 3) millis += (text.charCodeAt(at) - ZERO) * scale;
    }
  }
  // Three or more fraction digits: the text holds the millisecond field as printed.
  const wholeMillis = at >= 23;
  const sign = text.charCodeAt(at) === PLUS ? 1 : text.charCodeAt(at) === DASH ? -1 : 0;
  let offsetSeconds = digits(text, at + 1, 2) * 3600;
  at += 3;
  if (text.charCodeAt(at) === COLON) {
    offsetSeconds += digits(text, at + 1, 2) * 60;
    at += 3;
    if (text.charCodeAt(at) === COLON) {
      offsetSeconds += digits(text, at + 1, 2);
      at += 3;
    }
  }
  const month = digits(text, 5, 2);
  const day = digits(text, 8, 2);
  const hour = digits(text, 11, 2);
  const minute = digits(text, 14, 2);
  const second = digits(text, 17, 2);
  // NaN anywhere (a non-digit) makes the sum NaN.
  if (sign === 0 || at !== text.length || Number.isNaN(month + day + hour + minute + second + offsetSeconds)) return pgTimestamptz(text);
  // At UTC (the usual server setting) the text already holds every field of the ISO form.
  if (offsetSeconds === 0) return wholeMillis ? `${text.slice(0, 10)}T${text.slice(11, 23)}Z` : `${text.slice(0, 10)}T${text.slice(11, 19)}.${String(millis).padStart(3, '0')}Z`;
  return new Date(Date.UTC(year, month - 1, day, hour, minute, second, millis) - sign * offsetSeconds * 1000).toISOString();
}

const ZERO = 48;
const DASH = 45;
const PLUS = 43;
const SPACE = 32;
const COLON = 58;
const DOT = 46;

function isDigit(code: number): boolean {
  return code >= ZERO && code <= ZERO + 9;
}

/** The decimal number in text[from, from + count), or NaN unless all are digits. */
function digits(text: string, from: number, count: number): number {
  let value = 0;
  for (let i = from; i < from + count; i++) {
    const code = text.charCodeAt(i);
    if (!isDigit(code)) return NaN;
    value = value * 10 + code - ZERO;
  }
  return value;
}

import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { columnParsersFor, parseTimestamptz } from './column-parsers.js';
import { JsonText } from './json-text.js';

const pgParser = pg.types.getTypeParser(1184) as (text: string) => Date | number | null;

function iso(value: string | Date | number | null): string | number | null {
  return value instanceof Date ? value.toISOString() : value;
}

describe('timestamptz parser', () => {
  it('reads the ISO output to the millisecond, with any offset, as ISO 8601 UTC text', () => {
    expect(parseTimestamptz('2026-11-30 01:08:21.123456+00')).toBe('2026-11-30T01:08:21.123Z');
    expect(parseTimestamptz('2026-11-30 01:08:21.05+00')).toBe('2026-11-30T01:08:21.050Z');
    expect(parseTimestamptz('2026-11-30 01:08:21.123+00')).toBe('2026-11-30T01:08:21.123Z');
    expect(parseTimestamptz('2026-11-30 01:08:21.1234+00:00')).toBe('2026-11-30T01:08:21.123Z');
    expect(iso(parseTimestamptz('2026-11-30 01:08:21.123456+00'))).toBe('2026-11-30T01:08:21.123Z');
    expect(iso(parseTimestamptz('2026-11-30 01:08:21.9+00'))).toBe('2026-11-30T01:08:21.900Z');
    expect(iso(parseTimestamptz('2026-11-30 01:08:21+00'))).toBe('2026-11-30T01:08:21.000Z');
    expect(iso(parseTimestamptz('2026-11-30 06:38:21.5+05:30'))).toBe('2026-11-30T01:08:21.500Z');
    expect(iso(parseTimestamptz('2026-11-29 21:37:36.25-03:30:45'))).toBe('2026-11-30T01:08:21.250Z');
    expect(iso(parseTimestamptz('2024-02-29 23:59:59.999999-01'))).toBe('2024-03-01T00:59:59.999Z');
  });

  it("agrees with pg's parser, and leaves every other form to it", () => {
    const cases = [
      '1970-01-01 00:00:00+00', '1999-12-31 23:59:59.999+01', '2000-01-01 00:00:00.000001-12', '2038-01-19 03:14:08.5+14',
      '0099-06-01 12:00:00+00', '0500-06-01 12:00:00+00', '2020-06-01 12:00:00+00 BC', 'infinity', '-infinity',
      '2026-11-30T01:08:21Z', '2026-11-30 01:08:21', '2026-11-30 01:08', 'garbage',
    ];
    for (let i = 0; i < 300; i++) {
      const at = new Date(Date.UTC(1950 + (i % 120), i % 12, 1 + (i % 28), i % 24, (i * 7) % 60, (i * 13) % 60, (i * 37) % 1000));
      const offset = ((i % 27) - 13) * 60 + (i % 2 ? 30 : 0);
      const local = new Date(at.getTime() + offset * 60_000).toISOString();
      const sign = offset < 0 ? '-' : '+';
      const hours = String(Math.trunc(Math.abs(offset) / 60)).padStart(2, '0');
      const minutes = String(Math.abs(offset) % 60).padStart(2, '0');
      cases.push(`${local.slice(0, 10)} ${local.slice(11, 23)}${String(i % 1000).padStart(3, '0')}${sign}${hours}${minutes === '00' ? '' : `:${minutes}`}`);
    }
    for (const text of cases) expect(iso(parseTimestamptz(text)), text).toEqual(iso(pgParser(text)));
  });
});

describe('column parsers', () => {
  const config = { format: 'json' as const, columnPayload: 'payload', columnCreatedAt: 'created_at' };

  it('keeps a json or jsonb payload as its text, for either format', () => {
    const parserFor = columnParsersFor(config);
    for (const typeOid of [114, 3802]) {
      const value = parserFor({ name: 'payload', typeOid })!('{"amount": 1.10}');
      expect(value).toBeInstanceOf(JsonText);
      expect((value as JsonText).text).toBe('{"amount": 1.10}');
      expect(JSON.stringify({ value })).toBe('{"value":{"amount":1.1}}');
    }
    expect(parserFor({ name: 'payload', typeOid: 25 })).toBeUndefined();
    expect(columnParsersFor({ ...config, format: 'avro' })({ name: 'payload', typeOid: 3802 })!('{"a": 1}')).toEqual(new JsonText('{"a": 1}'));
    expect(parserFor({ name: 'other', typeOid: 3802 })).toBeUndefined();
  });

  it('parses created_at only when it is a timestamptz', () => {
    const parserFor = columnParsersFor(config);
    expect(parserFor({ name: 'created_at', typeOid: 1184 })).toBe(parseTimestamptz);
    expect(parserFor({ name: 'created_at', typeOid: 1114 })).toBeUndefined();
  });
});

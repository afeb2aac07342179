import { PoisonEventError } from '../errors.js';
import { NO_HEADERS, type OutboxEvent } from '../event.js';
import type { ColumnMap } from '../outbox-table.js';
import type { RowValues } from '../source/messages.js';

/** Where the values come from, for the errors: an outbox row's columns, or a message's fields. */
export interface ValueSource {
  /** `column "payload"`, `message field "payload"`. */
  readonly noun: string;
  readonly badValue: 'DECODE_BAD_VALUE' | 'DECODE_BAD_MESSAGE';
  readonly missing: (name: string) => PoisonEventError;
}

export const TABLE_ROW: ValueSource = {
  noun: 'column',
  badValue: 'DECODE_BAD_VALUE',
  missing: (column) => new PoisonEventError('DECODE_MISSING_COLUMN', `column "${column}" is not in the row; check the OUTBOX_COLUMN_* settings (or the table's "columns" in OUTBOX_SOURCES) against the table`, { details: { column } }),
};

/**
 * pgoutput row (or a message's fields) -> OutboxEvent. Values that do not fit make a poison
 * event (thrown as PoisonEventError naming the column and what was expected), never a crash
 * of the stream.
 */
export class RowDecoder {
  constructor(
    private readonly columns: ColumnMap,
    private readonly source: ValueSource = TABLE_ROW,
  ) {}

  decode(row: RowValues): OutboxEvent {
    const c = this.columns;
    return {
      eventId: this.requiredText(row, c.eventId),
      aggregateType: c.aggregateType === null ? null : this.requiredText(row, c.aggregateType),
      aggregateId: this.requiredText(row, c.aggregateId),
      eventType: this.requiredText(row, c.eventType),
      payload: this.payload(row),
      headers: this.headers(row),
      createdAt: this.createdAt(row),
    };
  }

  private bad(message: string, options: { readonly details: Readonly<Record<string, unknown>> }): PoisonEventError {
    return new PoisonEventError(this.source.badValue, message, options);
  }

  private requiredText(row: RowValues, column: string): string {
    const value = row[column];
    if (value === undefined) throw this.source.missing(column);
    // int8, numeric and uuid columns arrive as strings; int4 as a number.
    if (typeof value === 'number' && Number.isFinite(value)) return String(value);
    if (typeof value !== 'string' || value === '') {
      throw this.bad(`${this.source.noun} "${column}": expected a non-empty text value, got ${describe(value)}`, { details: { column } });
    }
    return value;
  }

  private payload(row: RowValues): unknown {
    const value = row[this.columns.payload];
    if (value === undefined) throw this.source.missing(this.columns.payload);
    if (value === null) {
      throw this.bad(`${this.source.noun} "${this.columns.payload}": expected a JSON payload, got null`, { details: { column: this.columns.payload } });
    }
    return value;
  }

  private headers(row: RowValues): Record<string, string> {
    const column = this.columns.headers;
    const value = row[column];
    if (value === undefined || value === null) return NO_HEADERS;
    if (typeof value !== 'object' || Array.isArray(value)) {
      throw this.bad(`${this.source.noun} "${column}": expected a JSON object of headers, got ${describe(value)}`, { details: { column } });
    }
    // No prototype: a header named "constructor" or "__proto__" is a header like any other.
    const headers: Record<string, string> = Object.create(null) as Record<string, string>;
    for (const [name, headerValue] of Object.entries(value as Record<string, unknown>)) {
      headers[name] = typeof headerValue === 'string' ? headerValue : JSON.stringify(headerValue);
    }
    return headers;
  }

  /** As ISO 8601 UTC text to the millisecond: what the created_at header carries. */
  private createdAt(row: RowValues): string | null {
    const column = this.columns.createdAt;
    const value = row[column];
    if (value === undefined || value === null) return null;
    // The column parser already gives this form for a timestamptz in Postgres's ISO output.
    if (typeof value === 'string' && isIsoUtcMillis(value)) return value;
    const date = value instanceof Date ? value : new Date(String(value));
    if (Number.isNaN(date.getTime())) {
      throw this.bad(`${this.source.noun} "${column}": expected a timestamp, got ${describe(value)}`, { details: { column } });
    }
    return date.toISOString();
  }
}

/** `2026-11-30T01:08:21.123Z` (what the regular expression /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/ takes, checked by hand: once per event). */
function isIsoUtcMillis(text: string): boolean {
  if (text.length !== 24) return false;
  for (let i = 0; i < 24; i++) {
    const code = text.charCodeAt(i);
    const expected = ISO_PATTERN.charCodeAt(i);
    if (expected === DIGIT ? code < 48 || code > 57 : code !== expected) return false;
  }
  return true;
}

const ISO_PATTERN = '0000-00-00T00:00:00.000Z';
const DIGIT = 48;

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (value === '') return 'an empty string';
  if (Array.isArray(value)) return 'an array';
  return typeof value;
}

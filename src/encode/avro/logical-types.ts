import avro from 'avsc';

/** ISO 8601 date-time with an explicit zone: a bare local time would depend on the relay's TZ. */
const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})$/i;

/**
 * `timestamp-millis` on a `long`. Accepts a Date, an ISO 8601 string with a zone, or epoch
 * milliseconds (a safe integer) — what a jsonb payload can hold; gives back a Date when reading.
 * Anything else is not valid (undefined from `_toValue`, which avsc reports with its path).
 */
export class TimestampMillisType extends avro.types.LogicalType {
  constructor(schema: avro.Schema, opts?: unknown) {
    super(schema, opts);
    if (!avro.Type.isType(this.underlyingType, 'long')) {
      throw new Error('timestamp-millis must annotate a long');
    }
  }

  protected override _fromValue(value: number): Date {
    return new Date(value);
  }

  protected override _toValue(value: unknown): number | undefined {
    return toEpochMillis(value);
  }

  protected override _resolve(type: avro.Type): ((value: unknown) => unknown) | undefined {
    if (avro.Type.isType(type, 'long', 'int', 'logical:timestamp-millis')) return (value) => this._fromValue(Number(value));
    return undefined;
  }
}

export function toEpochMillis(value: unknown): number | undefined {
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? undefined : value.getTime();
  if (typeof value === 'number') return Number.isSafeInteger(value) ? value : undefined;
  if (typeof value === 'string' && ISO_DATE_TIME.test(value)) {
    const millis = Date.parse(value);
    return Number.isNaN(millis) ? undefined : millis;
  }
  return undefined;
}

/** Logical types the relay implements; any other `logicalType` in a schema is refused. */
export const LOGICAL_TYPES = { 'timestamp-millis': TimestampMillisType } as const;

/** Logical types that need no conversion (the underlying value is the JSON value). */
export const PASS_THROUGH_LOGICAL_TYPES: ReadonlySet<string> = new Set(['uuid']);

/** Options for every `Type.forSchema` of the relay: its logical types, and no silent fallback. */
export const FOR_SCHEMA_OPTIONS = { logicalTypes: LOGICAL_TYPES, assertLogicalTypes: true, wrapUnions: 'auto' } as const;

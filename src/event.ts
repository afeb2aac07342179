
/** One outbox row, decoded. The payload stays as Postgres gave it: parsed jsonb, or a JsonText for the JSON format. */
export interface OutboxEvent {
  readonly eventId: string;
  /** Null when the table has no aggregate type column (OUTBOX_COLUMN_AGGREGATE_TYPE empty): no such header. */
  readonly aggregateType: string | null;
  readonly aggregateId: string;
  readonly eventType: string;
  readonly payload: unknown;
  /** The row's own headers (trace context and the like), values as strings. */
  readonly headers: Readonly<Record<string, string>>;
  /** ISO 8601 UTC, to the millisecond. */
  readonly createdAt: string | null;
}

/** The headers of a row that has none: one shared object, as most rows have none. */
export const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

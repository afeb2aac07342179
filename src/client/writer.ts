import pg from 'pg';
import { OPTIONS, type OptionKey } from '../config/options.js';
import { DEFAULT_COLUMNS, isPlainIdentifier, type ColumnMap, type ColumnRole } from '../outbox-table.js';
import { HEADER } from '../transform/headers.js';
import { OutboxClientError, sqlState } from './errors.js';
import { assertPayloadFits, type SchemaSet } from './schemas.js';
import { traceparentProblem } from './trace-context.js';

/** A `pg.Client`, a `pg.PoolClient`, or anything with node-postgres' `query(text, params)`. */
export interface Queryable {
  query(text: string, params?: unknown[]): Promise<unknown>;
}

/** One event to write. Field names follow the outbox columns (sql/001_event_outbox.sql). */
export interface OutboxEventInput {
  /** Primary key; consumers dedup on it. Use `deterministicEventId` so a retried transaction conflicts. */
  readonly eventId: string;
  /**
   * Routes the event: the default topic is `outbox.{aggregate_type}`. Required, unless the table
   * has no aggregate type (`columns: { aggregateType: null }`, or OUTBOX_COLUMN_AGGREGATE_TYPE set
   * empty, as the relay reads it): then it must be left out.
   */
  readonly aggregateType?: string;
  /** The Kafka key: one aggregate's events stay in order on one partition. */
  readonly aggregateId: string;
  /** Selects the Avro schema (`schemas/**\/<event_type>.avsc`). */
  readonly eventType: string;
  /** A JSON object. Dates become ISO strings (what `timestamp-millis` accepts). */
  readonly payload: Readonly<Record<string, unknown>>;
  /** Extra Kafka headers (string values). The relay's own names (`event_id`, ...) are refused. */
  readonly headers?: Readonly<Record<string, string>>;
  /** W3C trace context of the business transaction, carried to the consumer as headers. */
  readonly traceparent?: string;
  readonly tracestate?: string;
}

export interface OutboxWriterOptions {
  /**
   * The outbox table, optionally schema-qualified (`billing.event_outbox`).
   * @default OUTBOX_TABLE when set (the relay's variable), else 'event_outbox'
   */
  readonly table?: string;
  /**
   * Your table's column names, where they differ from sql/001_event_outbox.sql's.
   * @default each OUTBOX_COLUMN_* variable that is set (the relay's), else the standard names
   */
  readonly columns?: Partial<ColumnMap>;
  /**
   * The relay's schemas (`loadOutboxSchemas('schemas')`): every payload is checked against the
   * schema of its event type before the insert, and an event type without a schema is refused.
   * Leave out when the relay runs with `OUTBOX_FORMAT=json`.
   */
  readonly schemas?: SchemaSet;
  /**
   * Verify that `tx` is inside an explicit transaction (one `SAVEPOINT` + `RELEASE` round trip
   * each). Turn off only when your code guarantees it and the round trip matters.
   * @default true
   */
  readonly checkTransaction?: boolean;
  /**
   * Write table-less events instead of rows: `pg_logical_emit_message(true, messagePrefix, <the
   * event as JSON>)`, a message outbox the relay declares in OUTBOX_SOURCES (`{"messages":
   * "<prefix>"}`). Cheaper for the database (no row, no index, nothing to prune) but no table:
   * no `replay` or `recover` from it, and no primary key to refuse a duplicate event_id (only
   * one repeated within a batch is refused). `table` and `columns` do not apply.
   */
  readonly messagePrefix?: string;
}

/** At most this many rows per INSERT statement (7 parameters each, far below Postgres' 65,535). */
const ROWS_PER_STATEMENT = 1_000;
const CHECK_SAVEPOINT = 'outbox_relay_transaction_check';
const RESERVED_HEADERS: ReadonlySet<string> = new Set(Object.values(HEADER));

/**
 * Inserts one event into the outbox inside the caller's transaction (`tx` after `BEGIN`). The
 * event is validated first — fields, headers, trace context, and the payload against its Avro
 * schema when `options.schemas` is given — so a bad event throws here, failing the caller's
 * transaction, instead of becoming a dead letter at the relay.
 *
 * Throws `OutboxClientError` with code `OUTBOX_NOT_IN_TRANSACTION` in autocommit (a pool, or a
 * client without `BEGIN`): the domain change and the event would commit separately, the very
 * dual write the outbox removes. `OUTBOX_DUPLICATE_EVENT` when the event_id is already there
 * (the caller's transaction is then aborted: roll it back).
 */
export async function writeOutboxEvent(tx: Queryable, event: OutboxEventInput, options: OutboxWriterOptions = {}): Promise<void> {
  await writeOutboxEvents(tx, [event], options);
}

/** The batch form of `writeOutboxEvent`: all events validated before anything is inserted. */
export async function writeOutboxEvents(tx: Queryable, events: readonly OutboxEventInput[], options: OutboxWriterOptions = {}): Promise<void> {
  if (options.messagePrefix !== undefined) return emitOutboxMessages(tx, events, options, options.messagePrefix);
  const { table, columnList, withAggregateType } = insertTarget(options);
  const rows = validRows(events, options, withAggregateType);
  if (rows.length === 0) return;
  if (options.checkTransaction ?? true) await assertInTransaction(tx);
  for (let start = 0; start < rows.length; start += ROWS_PER_STATEMENT) {
    const chunk = rows.slice(start, start + ROWS_PER_STATEMENT);
    const params: unknown[] = [];
    const tuples = chunk.map((row) => {
      const base = params.length;
      params.push(...row);
      // Untyped parameters take the column's type: json, jsonb, text or varchar payloads alike.
      return `(${row.map((_, i) => `$${base + i + 1}`).join(', ')})`;
    });
    try {
      await tx.query(`INSERT INTO ${table} (${columnList}) VALUES ${tuples.join(', ')}`, params);
    } catch (error) {
      if (sqlState(error) === '23505') {
        const eventId = /=\((.*)\)/.exec((error as { detail?: string }).detail ?? '')?.[1] ?? chunk[0]![0];
        throw new OutboxClientError(
          'OUTBOX_DUPLICATE_EVENT',
          `event_id "${eventId}" is already in ${table}: this business transaction already ran (deterministic event id); roll back`,
          { cause: error, details: { eventId } },
        );
      }
      throw error;
    }
  }
}

/** Every event checked, and no event_id twice in the batch, before anything is written. */
function validRows(events: readonly OutboxEventInput[], options: OutboxWriterOptions, withAggregateType: boolean): Row[] {
  const rows = events.map((event) => toRow(event, options.schemas, withAggregateType));
  const duplicateInBatch = firstDuplicate(rows.map((row) => row[0]));
  if (duplicateInBatch !== undefined) {
    throw new OutboxClientError('OUTBOX_DUPLICATE_EVENT', `event_id "${duplicateInBatch}" appears twice in one batch`, { details: { eventId: duplicateInBatch } });
  }
  return rows;
}

/**
 * The message outbox: each event a transactional logical decoding message, its content the
 * JSON object the relay reads (the default table's columns as fields). In one statement, in
 * the order given (a function scan of the array, aggregated in scan order).
 */
async function emitOutboxMessages(tx: Queryable, events: readonly OutboxEventInput[], options: OutboxWriterOptions, prefix: string): Promise<void> {
  if (typeof prefix !== 'string' || prefix === '') throw new OutboxClientError('CLIENT_CONFIG_INVALID', `messagePrefix ${JSON.stringify(prefix)}: expected the non-empty prefix the relay declares in OUTBOX_SOURCES`, { details: { field: 'messagePrefix' } });
  const contents = validRows(events, options, true).map(([eventId, aggregateType, aggregateId, eventType, payload, headers]) =>
    `{"event_id":${JSON.stringify(eventId)},"aggregate_type":${JSON.stringify(aggregateType)},"aggregate_id":${JSON.stringify(aggregateId)},"event_type":${JSON.stringify(eventType)},"payload":${payload!}${headers === null ? '' : `,"headers":${headers}`}}`,
  );
  if (contents.length === 0) return;
  // Outside a transaction the message would be its own transaction: the dual write again.
  if (options.checkTransaction ?? true) await assertInTransaction(tx);
  await tx.query('SELECT count(pg_logical_emit_message(true, $1, content)) FROM unnest($2::text[]) AS content', [prefix, contents]);
}

/** Binds options once: `const outbox = createOutboxWriter({ schemas }); await outbox.write(tx, event)`. */
export function createOutboxWriter(options: OutboxWriterOptions = {}): {
  write(tx: Queryable, event: OutboxEventInput): Promise<void>;
  writeMany(tx: Queryable, events: readonly OutboxEventInput[]): Promise<void>;
} {
  insertTarget(options);
  return {
    write: (tx, event) => writeOutboxEvent(tx, event, options),
    writeMany: (tx, events) => writeOutboxEvents(tx, events, options),
  };
}

/** The relay's option naming each role's column (OUTBOX_COLUMN_*): the writer reads the same variables. */
const COLUMN_OPTIONS: Readonly<Record<ColumnRole, OptionKey>> = {
  eventId: 'columnEventId',
  aggregateType: 'columnAggregateType',
  aggregateId: 'columnAggregateId',
  eventType: 'columnEventType',
  payload: 'columnPayload',
  headers: 'columnHeaders',
  createdAt: 'columnCreatedAt',
};

/** The columns the writer fills, in the order of a row's values. */
const WRITTEN_COLUMNS = ['eventId', 'aggregateType', 'aggregateId', 'eventType', 'payload', 'headers'] as const satisfies readonly ColumnRole[];

/**
 * Table and column names from the options, else from the relay's own variables (OUTBOX_TABLE,
 * OUTBOX_COLUMN_*), so one environment configures the relay and the services that write for it.
 */
function insertTarget(options: OutboxWriterOptions): { table: string; columnList: string; withAggregateType: boolean } {
  const env = process.env;
  const table = qualifiedTable(options.table ?? (env[OPTIONS.table.env] || 'event_outbox'));
  // A table without an aggregate type: null in the options, or the relay's variable set empty.
  const typeOption = options.columns?.aggregateType;
  const withAggregateType = typeOption === undefined ? env[OPTIONS.columnAggregateType.env]?.trim() !== '' : typeOption !== null;
  const columnList = WRITTEN_COLUMNS.filter((role) => withAggregateType || role !== 'aggregateType').map((role) => {
    const name = options.columns?.[role] ?? (env[OPTIONS[COLUMN_OPTIONS[role]].env] || DEFAULT_COLUMNS[role]);
    if (!isPlainIdentifier(name)) {
      throw new OutboxClientError('CLIENT_CONFIG_INVALID', `column for ${role} ${JSON.stringify(name)}: expected a column name (letters, digits, _, $; not starting with a digit)`, { details: { field: `columns.${role}` } });
    }
    return pg.escapeIdentifier(name);
  }).join(', ');
  return { table, columnList, withAggregateType };
}

/**
 * Postgres itself says whether a transaction block is open: `SAVEPOINT` outside one fails with
 * SQLSTATE 25P01 (no_active_sql_transaction) — in autocommit, through a pool, and in the implicit
 * transaction of a multi-statement query or an unsynced pipeline, which also commit without the
 * caller's say. Inside `BEGIN ... ` it succeeds whatever ran before (also as the first statement).
 * It is released at once, before the insert: no subtransaction id is ever assigned, so it costs
 * one round trip and none of the subtransaction overhead. Timestamp comparisons
 * (`transaction_timestamp() <> statement_timestamp()`, `xact_start <> query_start`) only guess:
 * they are equal for BEGIN and a statement sent in one message.
 */
async function assertInTransaction(tx: Queryable): Promise<void> {
  try {
    await tx.query(`SAVEPOINT ${CHECK_SAVEPOINT}`);
  } catch (error) {
    if (sqlState(error) === '25P01') {
      throw new OutboxClientError(
        'OUTBOX_NOT_IN_TRANSACTION',
        'writeOutboxEvent must run inside the transaction that changes your data (BEGIN on one client, then the change and the event, then COMMIT); outside one, the event and the change would commit separately',
        { cause: error },
      );
    }
    throw error;
  }
  await tx.query(`RELEASE SAVEPOINT ${CHECK_SAVEPOINT}`);
}

/** A row's values in WRITTEN_COLUMNS' order, without the aggregate type where the table has none. */
type Row = [eventId: string, ...rest: (string | null)[]];

function toRow(event: OutboxEventInput, schemas: SchemaSet | undefined, withAggregateType: boolean): Row {
  const label = typeof event?.eventId === 'string' && event.eventId !== '' ? `event ${event.eventId}` : 'event';
  const invalid = (message: string, field: string) => new OutboxClientError('OUTBOX_INVALID_EVENT', `${label}: ${message}`, { details: { field } });
  if (event === null || typeof event !== 'object') throw invalid('expected an object', '(event)');
  for (const field of ['eventId', ...(withAggregateType ? (['aggregateType'] as const) : []), 'aggregateId', 'eventType'] as const) {
    const value: unknown = event[field];
    if (typeof value !== 'string' || value.trim() === '') throw invalid(`${field} is required (a non-empty string), got ${JSON.stringify(value) ?? 'nothing'}`, field);
  }
  if (!withAggregateType && event.aggregateType !== undefined) throw invalid('aggregateType is given, but the table has no aggregate type column (OUTBOX_COLUMN_AGGREGATE_TYPE is empty); leave it out', 'aggregateType');
  const payload: unknown = event.payload;
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) throw invalid('payload must be a JSON object', 'payload');
  let json: string;
  try {
    json = JSON.stringify(payload);
  } catch (error) {
    throw new OutboxClientError('OUTBOX_INVALID_EVENT', `${label}: payload cannot be written as JSON: ${(error as Error).message}`, { cause: error, details: { field: 'payload' } });
  }
  // What the relay reads back from jsonb is the JSON, not the object: check that.
  if (schemas) assertPayloadFits(schemas, event.eventType, event.eventId, JSON.parse(json));

  // No prototype: a header named "__proto__" is a header like any other.
  const headers = Object.create(null) as Record<string, string>;
  for (const [name, value] of Object.entries(event.headers ?? {})) {
    if (name === '') throw invalid('a header name is empty', 'headers');
    if (RESERVED_HEADERS.has(name)) throw invalid(`header "${name}" is set by the relay; choose another name`, `headers.${name}`);
    if (typeof value !== 'string') throw invalid(`header "${name}" must be a string, got ${typeof value}`, `headers.${name}`);
    headers[name] = value;
  }
  if (event.traceparent !== undefined) {
    const problem = traceparentProblem(event.traceparent);
    if (problem) throw invalid(`traceparent ${JSON.stringify(event.traceparent)}: ${problem}`, 'traceparent');
    headers.traceparent = event.traceparent;
  }
  if (event.tracestate !== undefined) {
    if (event.traceparent === undefined) throw invalid('tracestate needs a traceparent', 'tracestate');
    headers.tracestate = event.tracestate;
  }
  const headerJson = Object.keys(headers).length === 0 ? null : JSON.stringify(headers);
  return withAggregateType ? [event.eventId, event.aggregateType!, event.aggregateId, event.eventType, json, headerJson] : [event.eventId, event.aggregateId, event.eventType, json, headerJson];
}

function firstDuplicate(ids: readonly string[]): string | undefined {
  const seen = new Set<string>();
  for (const id of ids) {
    if (seen.has(id)) return id;
    seen.add(id);
  }
  return undefined;
}

/** `name` or `schema.name`, each part quoted; anything else is refused. */
export function qualifiedTable(table: string): string {
  const parts = table.split('.');
  if (parts.length > 2 || parts.some((part) => !isPlainIdentifier(part))) {
    throw new OutboxClientError('CLIENT_CONFIG_INVALID', `table ${JSON.stringify(table)}: expected name or schema.name (letters, digits, _)`, { details: { field: 'table' } });
  }
  return parts.map((part) => pg.escapeIdentifier(part)).join('.');
}

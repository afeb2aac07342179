import type { Logger } from 'pino';
import type { TableReading } from '../decode/column-parsers.js';
import type { EncoderOptions, PayloadEncoders } from '../encode/create-encoder.js';
import type { DeliveryOptions } from '../delivery-chain.js';
import type { DatabaseAccess } from '../pg-connection.js';
import { RelayError } from '../errors.js';
import { outboxName } from '../outboxes.js';
import pg from 'pg';
import { connectForText, republish } from './republish.js';
import { outboxTables, rowsInOrder } from './snapshot-handover.js';

/** Which rows; at least one is set (`replay`'s declared check refuses an empty filter). */
export interface ReplayFilter {
  readonly since?: Date;
  readonly until?: Date;
  readonly eventTypes?: readonly string[];
  readonly eventIds?: readonly string[];
}

export interface ReplayOptions {
  readonly logLevel: string;
  readonly database: DatabaseAccess;
  readonly filter: ReplayFilter;
  readonly encoder: EncoderOptions;
  readonly delivery: DeliveryOptions;
}

/**
 * Publishes retained outbox rows again, chosen by time range, event type or event id, from every
 * outbox table (each tenant's of a pattern; one table: OUTBOX_SOURCES holding its entry alone),
 * in created_at order across them, through the same decode, routing, encoding and dead-letter
 * path as the stream, with their original `event_id` (idempotent consumers drop what they
 * already applied). Replayed records carry `outbox_commit_lsn: 0/0`: they come from the tables,
 * not the WAL. The rows are read in one snapshot: rows committed meanwhile are the stream's (a
 * long replay holds that snapshot, and vacuum's horizon, for its length: narrow it with --since
 * and --until).
 */
export async function replay(options: ReplayOptions, encoders: PayloadEncoders, logger: Logger): Promise<{ published: number }> {
  const { delivery } = options;
  const unreplayable = delivery.outboxes.filter((outbox) => outbox.kind === 'messages').map(outboxName);
  for (const outbox of unreplayable) logger.warn({ outbox }, `replay: message outbox ${outbox} has no rows to publish again; its events are in Kafka only`);
  // No per-query bound: counting and reading a large outbox may take minutes.
  const client = await connectForText(options.database, 'outbox-relay-replay', 0);
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    // Idle between batches while Kafka acknowledges: a server's idle timeout would end a long replay half way.
    await client.query('SET LOCAL idle_in_transaction_session_timeout = 0');
    const tables = await outboxTables(client, delivery.outboxes);
    if (tables.length === 0) throw new RelayError('CONFIG_INVALID', `replay publishes rows of outbox tables again, and the outboxes have none (${unreplayable.length > 0 ? 'a message outbox has no table' : 'a pattern matched no table yet'})`);
    const { condition, values } = filtered(options.filter);
    const published = await republish(rowsInOrder(client, tables.map((table) => ({ table, condition: condition(table) })), 'created_at', values), { delivery, encoders, logger, stage: 'replay' });
    await client.query('COMMIT');
    return { published };
  } finally {
    await client.end();
  }
}

/** The filter as a condition on each table's own columns, with the same bind parameters for all. */
function filtered(filter: ReplayFilter): { readonly condition: (table: TableReading) => string; readonly values: readonly unknown[] } {
  const values: unknown[] = [];
  const parts: ((table: TableReading) => string)[] = [];
  const add = (value: unknown, sql: (table: TableReading, parameter: string) => string) => {
    values.push(value);
    const parameter = `$${values.length}`;
    parts.push((table) => sql(table, parameter));
  };
  const column = (table: TableReading, role: 'createdAt' | 'eventType' | 'eventId') => pg.escapeIdentifier(table.outbox.columns[role]);
  if (filter.since) add(filter.since, (table, parameter) => `${column(table, 'createdAt')} >= ${parameter}::timestamptz`);
  if (filter.until) add(filter.until, (table, parameter) => `${column(table, 'createdAt')} < ${parameter}::timestamptz`);
  if (filter.eventTypes?.length) add(filter.eventTypes, (table, parameter) => `${column(table, 'eventType')}::text = ANY(${parameter}::text[])`);
  if (filter.eventIds?.length) add(filter.eventIds, (table, parameter) => `${column(table, 'eventId')}::text = ANY(${parameter}::text[])`);
  return { condition: (table) => (parts.length === 0 ? 'true' : parts.map((part) => part(table)).join(' AND ')), values };
}

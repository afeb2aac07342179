import pg from 'pg';
import type { Logger } from 'pino';
import type { DeliveryOptions, ReplayOptions } from '../config/compile.js';
import type { PayloadEncoders } from '../encode/create-encoder.js';
import { parseRow, republish, connectForText, soleTable, type TableRow } from './republish.js';

/** Which rows; at least one is set (`replay`'s declared check refuses an empty filter). */
export interface ReplayFilter {
  readonly since?: Date;
  readonly until?: Date;
  readonly eventTypes?: readonly string[];
  readonly eventIds?: readonly string[];
}

const PAGE_ROWS = 1_000;
const CURSOR = 'outbox_replay_cursor';

/**
 * Publishes retained outbox rows again, chosen by time range, event type or event id, through
 * the same decode, routing, encoding and dead-letter path as the stream, with their original
 * `event_id` (idempotent consumers drop what they already applied). Replayed records carry
 * `outbox_commit_lsn: 0/0`: they come from the table, not the WAL.
 */
export async function replay(options: ReplayOptions, encoders: PayloadEncoders, logger: Logger): Promise<{ published: number }> {
  const { delivery } = options;
  const client = await connectForText(options.database, 'outbox-relay-replay');
  try {
    const published = await republish(pages(client, delivery, options.filter), { delivery, encoders, logger, stage: 'replay' });
    return { published };
  } finally {
    await client.end();
  }
}

/** Keyset pagination in (created_at, event_id) order: stable under concurrent inserts. */
async function* pages(client: pg.Client, delivery: DeliveryOptions, filter: ReplayFilter): AsyncGenerator<TableRow[]> {
  const { outbox: { table: relation, columns }, columnParsers } = soleTable(delivery);
  const table = `${pg.escapeIdentifier(relation.schema)}.${pg.escapeIdentifier(relation.name)}`;
  const createdAt = pg.escapeIdentifier(columns.createdAt);
  const eventId = pg.escapeIdentifier(columns.eventId);
  const conditions: string[] = [];
  const values: unknown[] = [];
  const add = (sql: string, value: unknown) => {
    values.push(value);
    conditions.push(sql.replace('?', `$${values.length}`));
  };
  if (filter.since) add(`${createdAt} >= ?`, filter.since);
  if (filter.until) add(`${createdAt} < ?`, filter.until);
  if (filter.eventTypes?.length) add(`${pg.escapeIdentifier(columns.eventType)} = ANY(?)`, filter.eventTypes);
  if (filter.eventIds?.length) add(`${eventId}::text = ANY(?)`, filter.eventIds);
  let after: [unknown, unknown] | null = null;
  for (;;) {
    const page = [...values];
    let where = conditions.join(' AND ');
    if (after) {
      page.push(after[0], after[1]);
      where = `${where ? `${where} AND ` : ''}(${createdAt}, ${eventId}) > ($${page.length - 1}::timestamptz, $${page.length})`;
    }
    const { rows: texts, fields } = await client.query<Record<string, string | null>>(
      // The cursor keeps created_at as text: a JS Date would drop the microseconds.
      `SELECT *, ${createdAt}::text AS ${CURSOR} FROM ${table} ${where ? `WHERE ${where}` : ''} ORDER BY ${createdAt}, ${eventId} LIMIT ${PAGE_ROWS}`,
      page,
    );
    const rows = texts.map((row) => parseRow(row, fields, columnParsers));
    if (rows.length === 0) return;
    const last = rows[rows.length - 1]!;
    after = [last[CURSOR], last[columns.eventId]];
    yield rows.map(({ [CURSOR]: _cursor, ...row }) => ({ relation, row }));
    if (rows.length < PAGE_ROWS) return;
  }
}

import pg from 'pg';
import { pgConnectionConfig } from '../pg-connection.js';
import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import { Checkpointer } from '../checkpoint/checkpointer.js';
import { CommitTracker } from '../checkpoint/commit-tracker.js';
import type { DeliveryOptions, ReplayOptions } from '../config/compile.js';
import { RowDecoder } from '../decode/row-decoder.js';
import type { PayloadEncoder } from '../encode/encoder.js';
import { ZERO_LSN } from '../lsn.js';
import { createRelayMetrics } from '../observe/metrics.js';
import { Pipeline } from '../pipeline.js';
import { RecordBuilder } from '../sink/record-builder.js';
import { createKafkaProducer } from '../sink/kafka-client.js';
import { KafkaSink } from '../sink/kafka-sink.js';
import { TopicCatalog } from '../sink/topic-catalog.js';
import { compileTopicTemplate } from '../sink/topic-router.js';
import type { ColumnParserFor } from '../source/pgoutput.js';

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
export async function replay(options: ReplayOptions, encoder: PayloadEncoder, logger: Logger): Promise<{ published: number }> {
  const { delivery } = options;
  // Rows from the table, not the WAL: nothing to confirm to Postgres.
  const tracker = new CommitTracker(ZERO_LSN);
  const checkpointer = new Checkpointer(tracker, { sendStatus: () => undefined }, 0);
  const sinkLogger = logger.child({ stage: 'sink' });
  const producer = createKafkaProducer({ ...delivery.producer, logger: sinkLogger });
  const topics = new TopicCatalog((topic) => producer.describeTopic(topic), { ...delivery.topics, logger: sinkLogger });
  const sink = new KafkaSink({
    ...delivery.sink,
    producer,
    logger: sinkLogger,
    onAcknowledged: (batch) => {
      checkpointer.acknowledged(batch);
      topics.acknowledged(batch);
    },
  });
  const replayLogger = logger.child({ stage: 'replay' });
  const builder = new RecordBuilder(delivery.builder, {
    topics,
    decoder: new RowDecoder(delivery.columns),
    router: compileTopicTemplate(delivery.topicTemplate),
    encoder,
    metrics: createRelayMetrics(new Registry()),
    logger: replayLogger,
  });
  const pipeline = new Pipeline(delivery.pipeline, { checkpointer, tracker, builder, sink, logger: replayLogger });
  // Every column as Postgres's text, then parsed as the stream parses it (delivery.columnParsers):
  // a replayed record carries the same bytes as the streamed one (a jsonb payload as its text).
  const client = new pg.Client({ ...pgConnectionConfig(options.database, 'outbox-relay-replay'), types: { getTypeParser: () => (text: string) => text } } as pg.ClientConfig);
  await client.connect();
  await sink.start();
  let published = 0;
  try {
    await pipeline.handle({ kind: 'begin', commitLsn: ZERO_LSN, commitTime: new Date() });
    for await (const rows of pages(client, delivery, options.filter)) {
      for (const row of rows) await pipeline.handle({ kind: 'insert', relation: delivery.pipeline.table, row });
      published += rows.length;
      logger.info({ published }, 'replay: progress');
    }
    await pipeline.handle({ kind: 'commit', commitLsn: ZERO_LSN, endLsn: ZERO_LSN, commitTime: new Date() });
    await sink.drain();
    return { published };
  } finally {
    await sink.stop();
    await client.end();
  }
}

/** Keyset pagination in (created_at, event_id) order: stable under concurrent inserts. */
async function* pages(client: pg.Client, delivery: DeliveryOptions, filter: ReplayFilter): AsyncGenerator<Record<string, unknown>[]> {
  const { columns, pipeline: { table: relation } } = delivery;
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
    const rows = texts.map((row) => parseRow(row, fields, delivery.columnParsers));
    if (rows.length === 0) return;
    const last = rows[rows.length - 1]!;
    after = [last[CURSOR], last[columns.eventId]];
    yield rows.map(({ [CURSOR]: _cursor, ...row }) => row);
    if (rows.length < PAGE_ROWS) return;
  }
}

/** A row of column texts, each parsed as the replication stream parses that column. */
function parseRow(row: Record<string, string | null>, fields: readonly pg.FieldDef[], parserFor: ColumnParserFor): Record<string, unknown> {
  const parsed: Record<string, unknown> = {};
  for (const { name, dataTypeID } of fields) {
    const text = row[name];
    const parse = parserFor({ name, typeOid: dataTypeID }) ?? (pg.types.getTypeParser(dataTypeID) as (value: string) => unknown);
    parsed[name] = text === null || text === undefined ? null : parse(text);
  }
  return parsed;
}

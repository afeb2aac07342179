import pg from 'pg';
import { pgConnectionConfig } from '../pg-connection.js';
import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import { Checkpointer } from '../checkpoint/checkpointer.js';
import { CommitTracker } from '../checkpoint/commit-tracker.js';
import type { RelayConfig } from '../config/options.js';
import { columnParsersFor } from '../decode/column-parsers.js';
import { rowDecoderFor } from '../decode/row-decoder.js';
import type { PayloadEncoder } from '../encode/encoder.js';
import { RelayError } from '../errors.js';
import { ZERO_LSN } from '../lsn.js';
import { createRelayMetrics } from '../observe/metrics.js';
import { Pipeline, pipelineOptions } from '../pipeline.js';
import { RecordBuilder, recordBuilderOptions } from '../sink/record-builder.js';
import { createKafkaProducer, producerOptions } from '../sink/kafka-client.js';
import { KafkaSink, sinkOptions } from '../sink/kafka-sink.js';
import { TopicCatalog } from '../sink/topic-catalog.js';
import { compileTopicTemplate } from '../sink/topic-router.js';
import type { ColumnParserFor } from '../source/pgoutput.js';

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
export async function replay(config: RelayConfig, filter: ReplayFilter, encoder: PayloadEncoder, logger: Logger): Promise<{ published: number }> {
  if (!filter.since && !filter.until && !filter.eventTypes?.length && !filter.eventIds?.length) {
    throw new RelayError('CONFIG_INVALID', 'replay needs at least one of --since, --until, --event-type, --event-id (refusing to republish the whole outbox by accident)');
  }
  // Rows from the table, not the WAL: nothing to confirm to Postgres.
  const tracker = new CommitTracker(ZERO_LSN);
  const checkpointer = new Checkpointer(tracker, { sendStatus: () => undefined }, 0);
  const sinkLogger = logger.child({ stage: 'sink' });
  const producer = createKafkaProducer({ ...producerOptions(config), clientId: `${config.kafkaClientId}-replay`, logger: sinkLogger });
  const topics = new TopicCatalog((topic) => producer.describeTopic(topic), { maxMessageBytes: config.maxMessageBytes, autoCreate: config.kafkaAutoCreateTopics, logger: sinkLogger });
  const sink = new KafkaSink({
    ...sinkOptions(config),
    producer,
    logger: sinkLogger,
    onAcknowledged: (batch) => {
      checkpointer.acknowledged(batch);
      topics.acknowledged(batch);
    },
  });
  const replayLogger = logger.child({ stage: 'replay' });
  const builder = new RecordBuilder(recordBuilderOptions(config), {
    topics,
    decoder: rowDecoderFor(config),
    router: compileTopicTemplate(config.topicTemplate),
    encoder,
    metrics: createRelayMetrics(new Registry()),
    logger: replayLogger,
  });
  const pipeline = new Pipeline(pipelineOptions(config), { checkpointer, tracker, builder, sink, logger: replayLogger });
  // Every column as Postgres's text, then parsed as the stream parses it (columnParsersFor):
  // a replayed record carries the same bytes as the streamed one (a jsonb payload as its text).
  const client = new pg.Client({ ...pgConnectionConfig(config.databaseUrl, 'outbox-relay-replay'), types: { getTypeParser: () => (text: string) => text } } as pg.ClientConfig);
  await client.connect();
  await sink.start();
  let published = 0;
  try {
    await pipeline.handle({ kind: 'begin', commitLsn: ZERO_LSN, commitTime: new Date() });
    for await (const rows of pages(client, config, filter)) {
      for (const row of rows) await pipeline.handle({ kind: 'insert', relation: config.table, row });
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
async function* pages(client: pg.Client, config: RelayConfig, filter: ReplayFilter): AsyncGenerator<Record<string, unknown>[]> {
  const parserFor = columnParsersFor(config);
  const table = `${pg.escapeIdentifier(config.table.schema)}.${pg.escapeIdentifier(config.table.name)}`;
  const createdAt = pg.escapeIdentifier(config.columnCreatedAt);
  const eventId = pg.escapeIdentifier(config.columnEventId);
  const conditions: string[] = [];
  const values: unknown[] = [];
  const add = (sql: string, value: unknown) => {
    values.push(value);
    conditions.push(sql.replace('?', `$${values.length}`));
  };
  if (filter.since) add(`${createdAt} >= ?`, filter.since);
  if (filter.until) add(`${createdAt} < ?`, filter.until);
  if (filter.eventTypes?.length) add(`${pg.escapeIdentifier(config.columnEventType)} = ANY(?)`, filter.eventTypes);
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
    const rows = texts.map((row) => parseRow(row, fields, parserFor));
    if (rows.length === 0) return;
    const last = rows[rows.length - 1]!;
    after = [last[CURSOR], last[config.columnEventId]];
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

import pg from 'pg';
import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import { Checkpointer } from '../checkpoint/checkpointer.js';
import { CommitTracker } from '../checkpoint/commit-tracker.js';
import type { DeliveryOptions } from '../delivery-chain.js';
import type { PayloadEncoders } from '../encode/create-encoder.js';
import { ZERO_LSN } from '../lsn.js';
import { createRelayMetrics } from '../observe/metrics.js';
import { connectPostgres, type DatabaseAccess } from '../pg-connection.js';
import { DeliveryChain } from '../delivery-chain.js';
import { OutboxRoutes } from '../transform/outbox-routes.js';
import type { RelationRef } from '../source/messages.js';
import type { ColumnParserFor } from '../source/pgoutput.js';

export interface RepublishContext {
  readonly delivery: DeliveryOptions;
  readonly encoders: PayloadEncoders;
  readonly logger: Logger;
  /** `replay`, `recover` or `cutover`: the log's stage, and the progress line. */
  readonly stage: string;
  /** How many rows are coming, when known: the progress line says how far along it is. */
  readonly total?: number;
}

/** A row read from an outbox table, and the table. */
export interface TableRow {
  readonly relation: RelationRef;
  readonly row: Record<string, unknown>;
}

/**
 * Outbox rows read from their tables (not the WAL), published in the order given through the
 * stream's own path: decode, route, encode, dead letters, one request in flight. Returns how
 * many rows went out, once Kafka acknowledged all of them. Nothing is confirmed to Postgres.
 */
export async function republish(batches: AsyncIterable<readonly TableRow[]>, { delivery, encoders, logger, stage, total }: RepublishContext): Promise<number> {
  const tracker = new CommitTracker(ZERO_LSN);
  const checkpointer = new Checkpointer(tracker, { sendStatus: () => undefined }, 0);
  const sinkLogger = logger.child({ stage: 'sink' });
  // Exactly-once: each request a transaction under replay's or recover's own id; no progress (nothing is confirmed).
  const exactlyOnce = delivery.exactlyOnce && { transactionalId: delivery.exactlyOnce.transactionalId, transactionTimeoutMs: delivery.exactlyOnce.transactionTimeoutMs, progress: null };
  if (exactlyOnce) {
    logger.warn({ transactionalId: exactlyOnce.transactionalId }, `${stage}: publishes rows again on purpose, in transactions of its own: read_committed consumers receive these events a second time (exactly-once covers the stream, not a ${stage}); they dedupe on event_id`);
  }
  const chain = new DeliveryChain({
    delivery,
    routes: new OutboxRoutes(delivery.outboxes, encoders),
    metrics: createRelayMetrics(new Registry()),
    exactlyOnce,
    tracker,
    checkpointer,
    sinkLogger,
    pipelineLogger: logger.child({ stage }),
  });
  const { sink } = chain;
  const pipeline = chain.pipeline();
  await chain.start();
  let published = 0;
  try {
    await pipeline.handle({ kind: 'begin', commitLsn: ZERO_LSN, commitTime: new Date() });
    for await (const rows of batches) {
      for (const { relation, row } of rows) await pipeline.handle({ kind: 'insert', relation, row });
      published += rows.length;
      logger.info(total === undefined ? { published } : { published, of: total, percent: Math.floor((published / Math.max(total, 1)) * 100) }, `${stage}: progress`);
    }
    await pipeline.handle({ kind: 'commit', commitLsn: ZERO_LSN, endLsn: ZERO_LSN, commitTime: new Date() });
    await sink.drain();
    return published;
  } finally {
    await chain.stop();
  }
}

/**
 * A SQL connection that hands every column over as Postgres's text, for parseRow: a row read
 * from the table then carries the same bytes as the streamed one (a jsonb payload as its text).
 */
export function connectForText(database: DatabaseAccess, applicationName: string, queryTimeoutMs?: number): Promise<pg.Client> {
  return connectPostgres(database, applicationName, { types: { getTypeParser: () => (text: string) => text } as pg.CustomTypesConfig, ...(queryTimeoutMs === undefined ? {} : { queryTimeoutMs }) });
}

/** A row of column texts, each parsed as the replication stream parses that column. */
export function parseRow(row: Record<string, string | null>, fields: readonly pg.FieldDef[], parserFor: ColumnParserFor): Record<string, unknown> {
  const parsed: Record<string, unknown> = {};
  for (const { name, dataTypeID } of fields) {
    const text = row[name];
    const parse = parserFor({ name, typeOid: dataTypeID }) ?? (pg.types.getTypeParser(dataTypeID) as (value: string) => unknown);
    parsed[name] = text === null || text === undefined ? null : parse(text);
  }
  return parsed;
}

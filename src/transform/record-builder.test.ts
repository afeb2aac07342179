import pino from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { CommitTracker } from '../checkpoint/commit-tracker.js';
import type { PayloadEncoders } from '../encode/create-encoder.js';
import { JsonEncoder } from '../encode/json-encoder.js';
import type { OutgoingMessage } from '../kafka/record.js';
import type { Lsn } from '../lsn.js';
import { createRelayMetrics } from '../observe/metrics.js';
import { DEFAULT_COLUMNS } from '../outbox-table.js';
import type { Outbox } from '../outboxes.js';
import { OutboxRoutes } from './outbox-routes.js';
import { RecordBuilder } from './record-builder.js';

/** JSON's encoder, and a stand-in for Avro's: which format a record has is visible in its value. */
const ENCODERS: PayloadEncoders = {
  formats: ['json', 'avro'],
  of: (format) => (format === 'json' ? new JsonEncoder() : { format: 'avro', encode: (event) => Buffer.from(`avro:${event.eventId}`) }),
};

const BILLING = { schema: 'billing', name: 'outbox' };
const PAYMENTS = { schema: 'payments', name: 'outbox' };
const OUTBOXES: Outbox[] = [
  { kind: 'table', table: BILLING, columns: DEFAULT_COLUMNS, topicTemplate: 'events.{aggregate_type}', format: 'json' },
  { kind: 'table', table: PAYMENTS, columns: DEFAULT_COLUMNS, topicTemplate: 'events.{event_type}', format: 'avro' },
];

function builder() {
  const metrics = createRelayMetrics(new Registry());
  const built = new RecordBuilder({ deadLetterTopic: 'dead-letter', onPoison: 'dead-letter', maxMessageBytes: 1_000_000 }, { topics: { recordLimit: () => 1_000_000 }, metrics, logger: pino({ level: 'silent' }) });
  const routes = new OutboxRoutes(OUTBOXES, ENCODERS);
  const transaction = new CommitTracker(0n as Lsn).begin(100n as Lsn, new Date());
  const build = (table: typeof BILLING, id: string, aggregateType: string, eventType: string) =>
    built.build(routes.forRelation(table)!, { event_id: id, aggregate_type: aggregateType, aggregate_id: 'a-1', event_type: eventType, payload: '{}', headers: null, created_at: null }, transaction, 1) as OutgoingMessage;
  return { build, metrics };
}

describe('RecordBuilder', () => {
  it('keeps one format per topic: an event of another format for a topic an outbox already writes is a dead letter naming both outboxes, and the stream goes on', () => {
    const { build } = builder();
    expect(build(BILLING, 'e1', 'invoice', 'invoice.paid')).toMatchObject({ topic: 'events.invoice', deadLetter: false });
    expect(build(PAYMENTS, 'e2', 'payment', 'payment.made')).toMatchObject({ topic: 'events.payment.made', deadLetter: false });
    // payments' template meets billing's topic: {event_type} "invoice" makes events.invoice.
    const refused = build(PAYMENTS, 'e3', 'payment', 'invoice');
    expect(refused).toMatchObject({ topic: 'dead-letter', deadLetter: true });
    expect(refused.headers.dead_letter_code).toBe('ROUTE_FORMAT_CONFLICT');
    expect(refused.headers.dead_letter_reason).toBe(
      'topic events.invoice is written as json by outbox billing.outbox (topic template "events.{aggregate_type}"); outbox payments.outbox (topic template "events.{event_type}") would write it as avro: its consumers would read two formats. Give one of them a "topicTemplate" of its own in OUTBOX_SOURCES (or both the same "format"), then replay the event',
    );
    // Both outboxes go on: each to the topics that are its own.
    expect(build(BILLING, 'e4', 'invoice', 'invoice.paid')).toMatchObject({ topic: 'events.invoice', deadLetter: false });
    expect(build(PAYMENTS, 'e5', 'payment', 'payment.made')).toMatchObject({ topic: 'events.payment.made', deadLetter: false });
  });
});

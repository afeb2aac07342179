import pino from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { Checkpointer } from './checkpoint/checkpointer.js';
import { CommitTracker } from './checkpoint/commit-tracker.js';
import type { PayloadEncoders } from './encode/create-encoder.js';
import { JsonEncoder } from './encode/json-encoder.js';
import { RelayError } from './errors.js';
import type { OutgoingMessage } from './kafka/record.js';
import type { Lsn } from './lsn.js';
import { createRelayMetrics } from './observe/metrics.js';
import { Pipeline } from './pipeline.js';
import type { EventSink } from './sink/kafka-sink.js';
import type { ResumePoint } from './sink/progress.js';
import { RecordBuilder, type RecordBuilderOptions } from './transform/record-builder.js';
import { OutboxRoutes } from './transform/outbox-routes.js';
import type { SourceMessage } from './source/messages.js';

const at = (n: number) => BigInt(n) as Lsn;
const TABLE = { schema: 'public', name: 'event_outbox' };
const COLUMNS = { eventId: 'event_id', aggregateType: 'aggregate_type', aggregateId: 'aggregate_id', eventType: 'event_type', payload: 'payload', headers: 'headers', createdAt: 'created_at' };

/** The sink port: records what it was given, and what was drained before what. */
class RecordingSink implements EventSink {
  readonly sent: OutgoingMessage[] = [];
  readonly log: string[] = [];
  get buffered(): number {
    return this.sent.length;
  }
  send(message: OutgoingMessage): void {
    this.sent.push(message);
    this.log.push(`send ${message.headers.event_id ?? message.label}`);
  }
  waitForRoom(): Promise<void> {
    return Promise.resolve();
  }
  async drain(): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, 5));
    this.log.push('drained');
  }
}

/** JSON's encoder, and a stand-in for Avro's that marks what it encoded: which outbox used which is visible in the records. */
const ENCODERS: PayloadEncoders = {
  formats: ['json', 'avro'],
  of: (format) => (format === 'json' ? new JsonEncoder() : { format: 'avro', encode: (event) => Buffer.from(`avro:${event.eventId}`) }),
};

const OUTBOXES = new OutboxRoutes([{ kind: 'table', table: TABLE, columns: COLUMNS, topicTemplate: 'outbox.{aggregate_type}', format: 'json' }], ENCODERS);

function pipelineWith(options: Partial<RecordBuilderOptions> & { recordLimit?: number; resumeAfter?: ResumePoint; routes?: OutboxRoutes } = {}) {
  const sink = new RecordingSink();
  const tracker = new CommitTracker(at(0));
  const statuses: Lsn[] = [];
  const logger = pino({ level: 'silent' });
  const metrics = createRelayMetrics(new Registry());
  const builder = new RecordBuilder(
    { deadLetterTopic: 'outbox.dead-letter', onPoison: 'dead-letter', maxMessageBytes: 1_000_000, ...options },
    { topics: { recordLimit: () => options.recordLimit ?? 1_000_000 }, metrics, logger },
  );
  const pipeline = new Pipeline(
    { onUnexpectedChange: 'warn', maxBufferedEvents: 10_000 },
    { checkpointer: new Checkpointer(tracker, { sendStatus: (lsn) => statuses.push(lsn) }, 0), tracker, routes: options.routes ?? OUTBOXES, builder, sink, logger, resumeAfter: options.resumeAfter ?? null },
  );
  return { pipeline, sink, tracker, metrics, statuses };
}

function row(id: string, payload: unknown = '{"amount":1}') {
  return { event_id: id, aggregate_type: 'invoice', aggregate_id: 'inv-1', event_type: 'invoice.paid', payload, headers: null, created_at: null };
}

/** One transaction at `commitLsn` holding `rows`, as the source delivers it. */
function transaction(commitLsn: number, rows: ReturnType<typeof row>[]): SourceMessage[] {
  return [
    { kind: 'begin', commitLsn: at(commitLsn), commitTime: new Date() },
    ...rows.map((values): SourceMessage => ({ kind: 'insert', relation: TABLE, row: values })),
    { kind: 'commit', commitLsn: at(commitLsn), endLsn: at(commitLsn + 10), commitTime: new Date() },
  ];
}

async function feed(pipeline: Pipeline, messages: SourceMessage[]): Promise<void> {
  for (const message of messages) await pipeline.handle(message);
}

describe('Pipeline', () => {
  it('passes rows to the sink as records in commit order, each registered with the tracker first', async () => {
    const { pipeline, sink, tracker } = pipelineWith();
    await feed(pipeline, [...transaction(100, [row('e1'), row('e2')]), ...transaction(200, [row('e3')])]);
    expect(sink.sent.map((m) => [m.topic, m.headers.event_id, m.key])).toEqual([
      ['outbox.invoice', 'e1', 'inv-1'],
      ['outbox.invoice', 'e2', 'inv-1'],
      ['outbox.invoice', 'e3', 'inv-1'],
    ]);
    // Nothing acknowledged: nothing confirmable past the start.
    expect(tracker.confirmed).toBe(at(0));
    for (const message of sink.sent) tracker.acknowledge(message.transaction);
    expect(tracker.confirmed).toBe(at(210));
  });

  it('sends a poison row to the dead-letter topic in its place and goes on', async () => {
    const { pipeline, sink, metrics } = pipelineWith();
    await feed(pipeline, transaction(100, [row('e1'), row('e2', { not: 'json text' }), row('e3')]));
    expect(sink.sent.map((m) => [m.topic, m.deadLetter, m.headers.event_id])).toEqual([
      ['outbox.invoice', false, 'e1'],
      ['outbox.dead-letter', true, 'e2'],
      ['outbox.invoice', false, 'e3'],
    ]);
    expect(sink.sent[1]!.headers.dead_letter_code).toBe('DECODE_BAD_VALUE');
    expect((await metrics.deadLettered.get()).values.map((v) => [v.labels.reason, v.value])).toContainEqual(['DECODE_BAD_VALUE', 1]);
  });

  it('with OUTBOX_ON_POISON=fail, drains everything before the poison event, then stops with its code', async () => {
    const { pipeline, sink } = pipelineWith({ onPoison: 'fail' });
    const error = await feed(pipeline, transaction(100, [row('e1'), row('e2', { not: 'json text' }), row('e3')])).then(() => null, (e: unknown) => e);
    expect(error).toBeInstanceOf(RelayError);
    expect((error as RelayError).code).toBe('DECODE_BAD_VALUE');
    expect((error as RelayError).retriable).toBe(false);
    // e1 was drained before the stop; the poison event and what follows never reached the sink.
    expect(sink.log).toEqual(['send e1', 'drained']);
  });

  it('dead-letters a record larger than its topic takes, naming the bound, instead of failing its batch forever', async () => {
    const { pipeline, sink } = pipelineWith({ recordLimit: 400 });
    await feed(pipeline, transaction(100, [row('small'), row('big', JSON.stringify({ note: 'x'.repeat(1_000) }))]));
    expect(sink.sent.map((m) => [m.headers.event_id, m.deadLetter])).toEqual([['small', false], ['big', true]]);
    expect(sink.sent[1]!.headers.dead_letter_code).toBe('SINK_TOO_LARGE');
    expect(sink.sent[1]!.headers.dead_letter_reason).toMatch(/topic outbox\.invoice's max\.message\.bytes \(400\)/);
  });

  it("numbers each row by its place in the transaction, poison rows included", async () => {
    const { pipeline, sink } = pipelineWith();
    await feed(pipeline, [...transaction(100, [row('e1'), row('e2', { not: 'json text' }), row('e3')]), ...transaction(200, [row('e4')])]);
    expect(sink.sent.map((m) => [m.headers.event_id, m.position])).toEqual([['e1', 1], ['e2', 2], ['e3', 3], ['e4', 1]]);
  });

  it('exactly-once: skips the events a committed transaction holds, and still confirms their transactions', async () => {
    // Kafka holds the transaction at 100 up to its second row.
    const { pipeline, sink, tracker } = pipelineWith({ resumeAfter: { commitLsn: at(100), position: 2, timeline: 1 } });
    await feed(pipeline, [...transaction(50, [row('e0')]), ...transaction(100, [row('e1'), row('e2'), row('e3')]), ...transaction(200, [row('e4')])]);
    expect(sink.sent.map((m) => [m.headers.event_id, m.position])).toEqual([['e3', 3], ['e4', 1]]);
    // The transaction at 50 had nothing left to send: confirmable at once; 100 waits for e3.
    expect(tracker.confirmed).toBe(at(60));
    for (const message of sink.sent) tracker.acknowledge(message.transaction);
    expect(tracker.confirmed).toBe(at(210));
  });

  describe('with several outboxes', () => {
    const OTHER = { schema: 'payments', name: 'outbox' };
    const routes = new OutboxRoutes(
      [
        { kind: 'table', table: TABLE, columns: COLUMNS, topicTemplate: 'outbox.{aggregate_type}', format: 'json' },
        { kind: 'table', table: OTHER, columns: { ...COLUMNS, eventId: 'id' }, topicTemplate: 'payments.{event_type}', format: 'avro' },
        { kind: 'messages', prefix: 'outbox', topicTemplate: 'events.{aggregate_type}', format: 'avro' },
      ],
      ENCODERS,
    );
    const content = (id: string) => Buffer.from(JSON.stringify({ event_id: id, aggregate_type: 'invoice', aggregate_id: 'inv-1', event_type: 'invoice.paid', payload: { n: 1 } }));
    const message = (id: string, transactional = true, prefix = 'outbox', lsn = 150): SourceMessage => ({ kind: 'message', transactional, lsn: at(lsn), prefix, content: content(id) });

    it("routes each row by its table and each message by its prefix, numbered in the transaction's order", async () => {
      const { pipeline, sink } = pipelineWith({ routes });
      const { event_id: _id, ...other } = row('unused');
      await feed(pipeline, [
        { kind: 'begin', commitLsn: at(100), commitTime: new Date() },
        { kind: 'insert', relation: TABLE, row: row('e1') },
        message('e2'),
        { kind: 'insert', relation: OTHER, row: { ...other, id: 'e3' } },
        { kind: 'commit', commitLsn: at(100), endLsn: at(110), commitTime: new Date() },
      ]);
      expect(sink.sent.map((m) => [m.topic, m.headers.event_id, m.headers.outbox_source, m.position])).toEqual([
        ['outbox.invoice', 'e1', 'public.event_outbox', 1],
        ['events.invoice', 'e2', 'message:outbox', 2],
        ['payments.invoice.paid', 'e3', 'payments.outbox', 3],
      ]);
      // Each in its outbox's format: the JSON table's payload as JSON, the Avro outboxes' through Avro's encoder.
      expect(sink.sent.map((m) => m.value.toString())).toEqual(['{"amount":1}', 'avro:e2', 'avro:e3']);
    });

    it("labels each record with its outbox as declared: a tenant's table by its pattern, one series for every tenant", async () => {
      const tenants = new OutboxRoutes([{ kind: 'tables', pattern: { schema: 'tenant_*', name: 'event_outbox' }, columns: COLUMNS, topicTemplate: '{schema}.{event_type}', format: 'json' }], ENCODERS);
      const { pipeline, sink } = pipelineWith({ routes: tenants });
      await feed(pipeline, [
        { kind: 'begin', commitLsn: at(100), commitTime: new Date() },
        { kind: 'insert', relation: { schema: 'tenant_0001', name: 'event_outbox' }, row: row('t1') },
        { kind: 'insert', relation: { schema: 'tenant_0002', name: 'event_outbox' }, row: row('t2') },
        { kind: 'commit', commitLsn: at(100), endLsn: at(110), commitTime: new Date() },
      ]);
      expect(sink.sent.map((m) => [m.topic, m.headers.outbox_source, m.outbox])).toEqual([
        ['tenant_0001.invoice.paid', 'tenant_0001.event_outbox', 'tenant_*.event_outbox'],
        ['tenant_0002.invoice.paid', 'tenant_0002.event_outbox', 'tenant_*.event_outbox'],
      ]);
    });

    it("quarantines a tenant's table whose description lacks a mapped column: its rows are dead letters naming it, the other tenants stream on, and a fixed description lifts it", async () => {
      const events: [string, string | null][] = [];
      const tenants = new OutboxRoutes([{ kind: 'tables', pattern: { schema: 'tenant_*', name: 'event_outbox' }, columns: COLUMNS, topicTemplate: '{schema}.{event_type}', format: 'json' }], ENCODERS, (table, reason) => events.push([table, reason]));
      const { pipeline, sink } = pipelineWith({ routes: tenants });
      const described = (schema: string, columns: readonly string[]) => ({ schema, name: 'event_outbox', columns: columns.map((name) => ({ name })) });
      const all = Object.values(COLUMNS);
      const healthy = described('tenant_0001', all);
      const dropped = described('tenant_0002', all.filter((column) => column !== 'event_type'));
      const fixed = described('tenant_0002', all);
      await feed(pipeline, [
        { kind: 'begin', commitLsn: at(100), commitTime: new Date() },
        { kind: 'insert', relation: healthy, row: row('t1') },
        { kind: 'insert', relation: dropped, row: { ...row('t2'), event_type: undefined } },
        { kind: 'insert', relation: dropped, row: { ...row('t3'), event_type: undefined } },
        { kind: 'insert', relation: fixed, row: row('t4') },
        { kind: 'commit', commitLsn: at(100), endLsn: at(110), commitTime: new Date() },
      ]);
      expect(sink.sent.map((m) => [m.topic, m.headers.event_id, m.headers.dead_letter_code ?? 'published', m.headers.dead_letter_source_table])).toEqual([
        ['tenant_0001.invoice.paid', 't1', 'published', undefined],
        ['outbox.dead-letter', 't2', 'OUTBOX_TABLE_QUARANTINED', 'tenant_0002.event_outbox'],
        ['outbox.dead-letter', 't3', 'OUTBOX_TABLE_QUARANTINED', 'tenant_0002.event_outbox'],
        ['tenant_0002.invoice.paid', 't4', 'published', undefined],
      ]);
      expect(sink.sent[1]!.headers.dead_letter_reason).toMatch(/^outbox table tenant_0002\.event_outbox is quarantined: it has no column "event_type" \(OUTBOX_COLUMN_EVENT_TYPE\)/);
      // Told once when it went bad, once when it came back; a healthy table is never a series.
      expect(events).toEqual([['tenant_0002.event_outbox', expect.stringContaining('no column "event_type"')], ['tenant_0002.event_outbox', null]]);
    });

    it('dead-letters a message of an undeclared prefix, and tracks a non-transactional one at its own LSN, confirmed just past it', async () => {
      const { pipeline, sink, tracker } = pipelineWith({ routes });
      await feed(pipeline, [message('loose', false, 'outbox', 150), ...transaction(200, [row('e1')])]);
      await feed(pipeline, [{ kind: 'begin', commitLsn: at(300), commitTime: new Date() }, message('typo', true, 'outbx'), { kind: 'commit', commitLsn: at(300), endLsn: at(310), commitTime: new Date() }]);
      expect(sink.sent.map((m) => [m.topic, m.headers.dead_letter_code ?? 'published', m.headers.dead_letter_source_table, m.headers.event_id])).toEqual([
        ['outbox.dead-letter', 'SOURCE_MESSAGE_NOT_TRANSACTIONAL', 'message:outbox', 'loose'],
        ['outbox.invoice', 'published', undefined, 'e1'],
        ['outbox.dead-letter', 'SOURCE_MESSAGE_UNDECLARED', 'message:outbx', 'typo'],
      ]);
      tracker.acknowledge(sink.sent[0]!.transaction);
      // Past the message, never at it: a restart would decode it again from its own LSN.
      expect(tracker.confirmed).toBe(at(151));
      for (const sent of sink.sent.slice(1)) tracker.acknowledge(sent.transaction);
      expect(tracker.confirmed).toBe(at(310));
    });
  });
});

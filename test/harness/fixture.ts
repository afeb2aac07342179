import { afterAll, beforeAll, expect } from 'vitest';
import type { KafkaClientName } from '../../src/kafka/ports.js';
import { createTopics, TopicReader, type ConsumedRecord } from './kafka.js';
import { TestOutbox } from './outbox.js';

export interface FixtureOptions {
  /** Aggregate types whose topics are created up front (default: invoice). */
  readonly aggregateTypes?: readonly string[];
  /** Also create the dead-letter topic. */
  readonly deadLetters?: boolean;
  /** Start a reader on the topics before the test. */
  readonly read?: boolean;
  /** The Kafka client of the relays the outbox starts (the guarantee suites run on each). */
  readonly kafkaClient?: KafkaClientName;
}

/**
 * A test file's own outbox (table, publication, slot), its topics and optionally a reader,
 * created before the file's tests and removed after them.
 */
export function useTestOutbox(options: FixtureOptions = {}): { outbox: TestOutbox; reader: TopicReader } {
  const outbox = new TestOutbox({ kafkaClient: options.kafkaClient });
  const reader = new TopicReader();
  beforeAll(async () => {
    await outbox.create();
    const topics = (options.aggregateTypes ?? ['invoice']).map((type) => outbox.topic(type));
    if (options.deadLetters) topics.push(outbox.deadLetterTopic);
    await createTopics(topics);
    if (options.read) await reader.start(topics);
  });
  afterAll(async () => {
    await reader.stop();
    await outbox.destroy();
  });
  return { outbox, reader };
}

/**
 * The no-loss check: a fresh reader sees every event id committed to the outbox table (the
 * table is the truth, whatever a fault did to in-flight commits), and nothing else.
 */
export async function expectEveryCommittedEventDelivered(outbox: TestOutbox, context: () => string, brokers?: string): Promise<readonly ConsumedRecord[]> {
  const committed = await outbox.committedIds();
  const reader = await new TopicReader(brokers).start([outbox.topic('invoice')]);
  try {
    const timedOut = await reader
      .until(`all ${committed.length} committed events`, (records) => new Set(records.map((r) => r.headers.event_id)).size >= committed.length, 120_000)
      .then(() => null, (error: Error) => error);
    const delivered = new Set(reader.records.map((record) => record.headers.event_id));
    const missing = committed.filter((id) => !delivered.has(id));
    expect(missing, `${missing.length} of ${committed.length} committed events never arrived${timedOut ? ` (${timedOut.message})` : ''}\n${context()}`).toEqual([]);
    expect([...delivered].sort()).toEqual([...committed].sort());
    return reader.records;
  } finally {
    await reader.stop();
  }
}

/** Per aggregate (record key), first deliveries come in the writer's sequence order; a resend after a restart may repeat, never reorder. */
export function expectOrderPerAggregate(records: readonly ConsumedRecord[]): void {
  const seen = new Set<string>();
  const lastSequence = new Map<string, number>();
  for (const record of records) {
    const eventId = record.headers.event_id!;
    if (seen.has(eventId)) continue;
    seen.add(eventId);
    const { sequence } = JSON.parse(record.value!.toString('utf8')) as { sequence: number };
    const previous = lastSequence.get(record.key!) ?? 0;
    expect(sequence, `aggregate ${record.key}: event ${eventId}`).toBeGreaterThan(previous);
    lastSequence.set(record.key!, sequence);
  }
}

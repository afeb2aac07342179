import { expect } from 'vitest';
import type { KafkaClientName } from '../../src/kafka/ports.js';
import { expectOrderPerAggregate, useTestOutbox } from './fixture.js';
import { TopicReader, type ConsumedRecord } from './kafka.js';
import type { TestOutbox } from './outbox.js';
import { delay } from './relay-process.js';

/**
 * OUTBOX_DELIVERY=exactly-once against the real broker: whatever killed the relay, a consumer
 * reading committed records sees every event committed to the outbox (on the server the test's
 * SQL goes to now) once, in order per aggregate, and no rolled-back one. Returns the
 * read_committed records and how many copies a read_uncommitted consumer saw (what
 * at-least-once consumers would have had to dedupe).
 */
export async function expectExactlyOnce(outbox: TestOutbox, rolledBackIds: readonly string[], context: () => string): Promise<{ records: readonly ConsumedRecord[]; uncommittedDuplicates: number }> {
  const committed = await outbox.committedIds();
  const topics = [outbox.topic('invoice')];
  const committedReader = await new TopicReader().start(topics);
  const uncommittedReader = await new TopicReader(undefined, true).start(topics);
  try {
    await committedReader.until(`all ${committed.length} committed events`, (records) => records.length >= committed.length, 120_000, context);
    // Anything more (a duplicate) would come with the same fetches: wait a little for it.
    await delay(2_000);
    await uncommittedReader.until('the uncommitted reader to catch up', (records) => new Set(records.map((r) => r.headers.event_id)).size >= committed.length, 60_000);
    const ids = committedReader.records.map((record) => record.headers.event_id!);
    const counts = new Map<string, number>();
    for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
    const duplicated = [...counts].filter(([, count]) => count > 1).map(([id]) => id);
    expect(duplicated, `${duplicated.length} events delivered more than once to a read_committed consumer\n${context()}`).toEqual([]);
    expect([...counts.keys()].sort()).toEqual([...committed].sort());
    const rolledBack = new Set(rolledBackIds);
    expect(ids.filter((id) => rolledBack.has(id))).toEqual([]);
    expectOrderPerAggregate(committedReader.records);
    return { records: committedReader.records, uncommittedDuplicates: uncommittedReader.records.length - new Set(uncommittedReader.records.map((r) => r.headers.event_id)).size };
  } finally {
    await committedReader.stop();
    await uncommittedReader.stop();
  }
}

export const EXACTLY_ONCE = { OUTBOX_DELIVERY: 'exactly-once' } as const;

/** A fresh outbox (table, slot, topics) per test: each counts its own events; the relay's env with exactly-once and the outbox's own progress topic. */
export function useExactlyOnceOutbox(kafkaClient: KafkaClientName): { outbox: TestOutbox; env: () => Record<string, string> } {
  const { outbox } = useTestOutbox({ kafkaClient });
  return { outbox, env: () => outbox.relayEnv({ ...EXACTLY_ONCE, OUTBOX_PROGRESS_TOPIC: `${outbox.topicPrefix}.progress` }) };
}

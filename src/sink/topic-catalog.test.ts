import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { TopicDescription } from '../kafka/ports.js';
import { TopicCatalog } from './topic-catalog.js';

const safe: TopicDescription = { replicationFactor: 3, minInsyncReplicas: 2, uncleanLeaderElection: false, maxMessageBytes: 50_000, cleanupPolicy: 'delete' };

/** `brokersCreate`: what the brokers' auto.create.topics.enable says (null: it cannot be read). */
function catalogOf(topics: Record<string, TopicDescription | null | Error>, autoCreate = true, brokersCreate: boolean | null = true) {
  const calls: string[] = [];
  const lines: { level: number; msg: string }[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => lines.push(JSON.parse(line) as { level: number; msg: string }) });
  const kafka = {
    describeTopic: async (topic: string) => {
      calls.push(topic);
      const found = topics[topic];
      if (found instanceof Error) throw found;
      return found ?? null;
    },
    brokersCreateTopics: async () => brokersCreate,
  };
  const catalog = new TopicCatalog(kafka, { maxMessageBytes: 1_000_000, autoCreate, logger });
  return { catalog, calls, lines };
}

describe('TopicCatalog', () => {
  it("bounds a record by the topic's own max.message.bytes, learned once, then answered at once", async () => {
    const { catalog, calls } = catalogOf({ small: safe, large: { ...safe, maxMessageBytes: 5_000_000 } });
    const [first, second] = [catalog.recordLimit('small'), catalog.recordLimit('small')];
    expect(await first).toBe(50_000);
    expect(await second).toBe(50_000);
    expect(catalog.recordLimit('small')).toBe(50_000);
    expect(await catalog.recordLimit('large')).toBe(1_000_000);
    expect(calls).toEqual(['small', 'large']);
  });

  it('with auto-creation off, makes every event for a missing topic a SINK_TOPIC_MISSING poison naming it', async () => {
    const { catalog, lines } = catalogOf({ gone: null }, false);
    await expect(catalog.recordLimit('gone')).rejects.toMatchObject({ code: 'SINK_TOPIC_MISSING', message: expect.stringContaining('topic "gone" does not exist') });
    expect(() => catalog.recordLimit('gone')).toThrow(expect.objectContaining({ code: 'SINK_TOPIC_MISSING' }));
    expect(lines.filter((line) => line.level === 40).map((line) => line.msg)).toEqual([expect.stringContaining('topic gone does not exist')]);
  });

  it('with auto-creation on but brokers that create no topics, makes the events a SINK_TOPIC_MISSING poison naming the broker setting', async () => {
    const { catalog, lines } = catalogOf({ gone: null }, true, false);
    await expect(catalog.recordLimit('gone')).rejects.toMatchObject({ code: 'SINK_TOPIC_MISSING', message: 'topic "gone" does not exist and the brokers do not create topics (auto.create.topics.enable=false); create it, then replay the event' });
    expect(lines.filter((line) => line.level === 40).map((line) => line.msg)).toEqual([expect.stringContaining('topic gone does not exist and the brokers do not create topics')]);
    // Brokers whose setting cannot be read are trusted to create it (and src/kafka/topic-inspector.ts warns once).
    const unknown = catalogOf({ fresh: null }, true, null);
    expect(await unknown.catalog.recordLimit('fresh')).toBe(1_000_000);
  });

  it('with auto-creation on, lets a missing topic be created, and checks its settings once Kafka acknowledged a record', async () => {
    const topics: Record<string, TopicDescription | null> = { fresh: null };
    const { catalog, calls, lines } = catalogOf(topics);
    expect(await catalog.recordLimit('fresh')).toBe(1_000_000);
    topics.fresh = { ...safe, replicationFactor: 1, minInsyncReplicas: 1 };
    catalog.acknowledged([{ topic: 'fresh' }, { topic: 'fresh' }]);
    catalog.acknowledged([{ topic: 'fresh' }]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(calls).toEqual(['fresh', 'fresh']);
    expect(lines.some((line) => line.level === 40 && line.msg.startsWith('topic fresh can lose acknowledged events'))).toBe(true);
  });

  it("falls back to the relay's own bound when the topic cannot be described, and says so", async () => {
    const { catalog, lines } = catalogOf({ secret: new Error('TOPIC_AUTHORIZATION_FAILED') });
    expect(await catalog.recordLimit('secret')).toBe(1_000_000);
    expect(lines.some((line) => line.level === 40 && line.msg.startsWith("could not read the topic's settings"))).toBe(true);
  });
});

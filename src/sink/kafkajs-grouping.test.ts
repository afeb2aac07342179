import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import './kafkajs-grouping.js';

const require = createRequire(import.meta.url);

describe('kafkajs partition grouping', () => {
  it("is replaced in kafkajs's module cache, and groups like the original, in order", () => {
    const group = require('kafkajs/src/producer/groupMessagesPerPartition.js') as (args: unknown) => Record<number, { id: number }[]>;
    expect(group.name).toBe('groupMessagesPerPartition');
    expect(group.toString()).not.toContain('[...current, message]');
    const messages = Array.from({ length: 7 }, (_, id) => ({ id }));
    const grouped = group({ topic: 't', partitionMetadata: [{}, {}, {}], messages, partitioner: ({ message }: { message: { id: number } }) => message.id % 3 });
    expect(grouped).toEqual({ 0: [{ id: 0 }, { id: 3 }, { id: 6 }], 1: [{ id: 1 }, { id: 4 }], 2: [{ id: 2 }, { id: 5 }] });
    expect(group({ topic: 't', partitionMetadata: [], messages, partitioner: () => 0 })).toEqual({});
  });

  it('stays linear: 100,000 messages group in well under a second', () => {
    const group = require('kafkajs/src/producer/groupMessagesPerPartition.js') as (args: unknown) => Record<number, unknown[]>;
    const messages = Array.from({ length: 100_000 }, (_, id) => ({ id }));
    const started = performance.now();
    const grouped = group({ topic: 't', partitionMetadata: [{}, {}, {}], messages, partitioner: ({ message }: { message: { id: number } }) => message.id % 3 });
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(Object.values(grouped).reduce((sum, list) => sum + list.length, 0)).toBe(100_000);
  });
});

import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { KAFKAJS_REPLACEMENTS } from './kafkajs-patches.js';

const require = createRequire(import.meta.url);

/** What kafkajs's module exports now (the replacement, if installed). */
function installed<T>(module: string): T {
  return require(module) as T;
}

/** kafkajs's own export of the module, loaded fresh from disk, leaving the cache as it was. */
function original<T>(module: string): T {
  const path = require.resolve(module);
  const cached = require.cache[path];
  delete require.cache[path];
  try {
    return require(path) as T;
  } finally {
    if (cached) require.cache[path] = cached;
  }
}

const GROUPING = 'kafkajs/src/producer/groupMessagesPerPartition.js';
const RECORD = 'kafkajs/src/protocol/recordBatch/record/v0/index.js';
const CRC = 'kafkajs/src/protocol/recordBatch/crc32C/index.js';

type Group = (args: unknown) => Record<number, unknown[]>;
type Encode = (fields: unknown) => { buffer: Buffer };

describe('kafkajs internals replaced in its module cache', () => {
  it('installs every replacement', () => {
    for (const [module, replacement] of Object.entries(KAFKAJS_REPLACEMENTS)) expect(installed(module), module).toBe(replacement);
  });

  it('groups messages by partition like the original, in order', () => {
    const messages = Array.from({ length: 7 }, (_, id) => ({ id }));
    const partitioner = ({ message }: { message: { id: number } }) => message.id % 3;
    for (const group of [installed<Group>(GROUPING), original<Group>(GROUPING)]) {
      expect(group({ topic: 't', partitionMetadata: [{}, {}, {}], messages, partitioner })).toEqual({ 0: [{ id: 0 }, { id: 3 }, { id: 6 }], 1: [{ id: 1 }, { id: 4 }], 2: [{ id: 2 }, { id: 5 }] });
      expect(group({ topic: 't', partitionMetadata: [], messages, partitioner })).toEqual({});
    }
  });

  it('groups linearly: 100,000 messages in well under a second', () => {
    const messages = Array.from({ length: 100_000 }, (_, id) => ({ id }));
    const started = performance.now();
    const grouped = installed<Group>(GROUPING)({ topic: 't', partitionMetadata: [{}, {}, {}], messages, partitioner: ({ message }: { message: { id: number } }) => message.id % 3 });
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(Object.values(grouped).reduce((sum, list) => sum + list.length, 0)).toBe(100_000);
  });

  it('encodes records byte for byte as kafkajs does', () => {
    const cases: unknown[] = [
      { key: 'agg-1', value: '{"amount":1}', headers: { event_id: 'e-1', event_type: 'invoice.paid' } },
      { offsetDelta: 0, timestampDelta: 0, key: null, value: Buffer.from([0, 0, 0, 0, 1, 2]) },
      { offsetDelta: 3_999, timestampDelta: 1_234, key: Buffer.from('k'), value: 'v', headers: {} },
      { offsetDelta: 70_000, timestampDelta: -5, key: 'ключ', value: 'значение €', headers: { 'заголовок': 'ü', repeated: ['a', 'b', Buffer.from('c')] } },
      { offsetDelta: 1, timestampDelta: 2 ** 40, key: 'k', value: 'x'.repeat(300), headers: { traceparent: '00-'.padEnd(55, 'a') } },
      { offsetDelta: 2, timestampDelta: -(2 ** 35), key: 'k', value: randomBytes(20_000), headers: { h: '' } },
      { offsetDelta: 2 ** 31 - 1, key: '', value: '' },
    ];
    const ours = installed<Encode>(RECORD);
    const theirs = original<Encode>(RECORD);
    expect(theirs).not.toBe(ours);
    for (const fields of cases) expect(ours(fields).buffer.equals(theirs(fields).buffer), JSON.stringify(fields).slice(0, 120)).toBe(true);
  });

  it('checksums like kafkajs, for every length around the 8-byte step', () => {
    const ours = installed<(data: Buffer) => number>(CRC);
    const theirs = original<(data: Buffer) => number>(CRC);
    expect(theirs).not.toBe(ours);
    expect(ours(Buffer.from('123456789'))).toBe(0xe3069283); // the CRC-32C check value
    for (let length = 0; length < 40; length++) {
      const data = randomBytes(length);
      expect(ours(data), `length ${length}`).toBe(theirs(data));
    }
    const large = randomBytes(1_000_003);
    expect(ours(large)).toBe(theirs(large));
  });
});

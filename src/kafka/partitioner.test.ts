import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { kafkajs } from './kafkajs/kafkajs.js';
import { describe, expect, it } from 'vitest';
import { keyHashPartitioner } from './kafkajs/producer.js';
import { murmur2 } from './partitioner.js';

const require = createRequire(import.meta.url);
const kafkajsMurmur2 = require('kafkajs/src/producer/partitioners/default/murmur2.js') as (key: Buffer | string) => number;

function partitions(count: number) {
  return Array.from({ length: count }, (_, partitionId) => ({ partitionId, leader: 1, replicas: [1], isr: [1], partitionErrorCode: 0 }));
}

describe('key hash partitioner', () => {
  it('hashes like kafkajs (and the Java client) for text and binary keys of every length', () => {
    // Known values of Kafka's murmur2 (from the Java client's tests).
    expect(murmur2('21')).toBe(-973932308);
    expect(murmur2('foobar')).toBe(-790332482);
    const keys: (string | Buffer)[] = ['', 'a', 'ab', 'abc', 'abcd', 'agg-1', 'ключ', 'κλειδί €', 'x'.repeat(300), '🙂'.repeat(100)];
    for (let length = 0; length < 40; length++) keys.push(randomBytes(length), randomBytes(length).toString('base64'));
    for (const key of keys) expect(murmur2(key), String(key)).toBe(kafkajsMurmur2(key));
  });

  it('picks the same partition as kafkajs for keyed messages, and leaves the rest to it', () => {
    const ours = keyHashPartitioner();
    const theirs = kafkajs().Partitioners.DefaultPartitioner();
    for (const count of [1, 3, 12]) {
      const partitionMetadata = partitions(count);
      for (let i = 0; i < 500; i++) {
        const message = { key: `customer-${i}`, value: 'v' };
        expect(ours({ topic: 't', partitionMetadata, message })).toBe(theirs({ topic: 't', partitionMetadata, message }));
      }
      expect(ours({ topic: 't', partitionMetadata, message: { key: 'k', value: 'v', partition: count - 1 } })).toBe(count - 1);
      const unkeyed = ours({ topic: 't', partitionMetadata, message: { key: null, value: 'v' } });
      expect(unkeyed).toBeGreaterThanOrEqual(0);
      expect(unkeyed).toBeLessThan(count);
    }
  });
});

import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { describe, expect, inject, it } from 'vitest';
import type { TrackedTransaction } from '../../src/checkpoint/commit-tracker.js';
import { openKafkaProducer } from '../../src/kafka/open.js';
import { murmur2, partitionForKey } from '../../src/kafka/partitioner.js';
import { encodeHeaders } from '../../src/kafka/record-format.js';
import type { OutgoingMessage } from '../../src/kafka/record.js';
import { kafkajs } from '../../src/kafka/kafkajs/kafkajs.js';
import { testKafkaClients } from '../harness/kafka-clients.js';
import { waitForLeaders } from '../harness/leaders.js';

/**
 * A key lands on the same partition whichever client produced it (Java's murmur2, positive,
 * modulo the partition count: partitioner.ts): switching OUTBOX_KAFKA_CLIENT keeps an
 * aggregate's events on one partition, in order. Keys of every length (the hash's tail) and
 * keys whose hash is negative (a client that made it positive otherwise would differ) are among them.
 */
const PARTITIONS = 7;
const KEYS = Array.from({ length: 200 }, (_, index) => `${'k'.repeat(index % 9)}aggregate-${index}-é`);

describe.each(testKafkaClients())('record keys produced on %s', (client) => {
  it('land on the partition murmur2 chooses, as on the other clients and the Java client', async () => {
    const topic = `key-placement-${client}-${randomUUID().slice(0, 8)}`;
    // The relay's kafkajs (its fork installed) for the topic and the read: this process opens a
    // kafkajs producer, which refuses a kafkajs loaded before it (test/harness/kafka.ts loads it plain).
    const kafka = new (kafkajs().Kafka)({ clientId: 'key-placement-test', brokers: inject('services').kafkaBrokers.split(','), logLevel: kafkajs().logLevel.NOTHING });
    const admin = kafka.admin();
    await admin.connect();
    try {
      await admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }], waitForLeaders: false });
      await waitForLeaders(admin, [topic]);
    } finally {
      await admin.disconnect();
    }
    const headers = { event_type: 'invoice.paid' };
    const headerBlock = encodeHeaders(headers);
    const messages: OutgoingMessage[] = KEYS.map((key, index) => ({ topic, key, value: `{"n":${index}}`, headers, headerBlock, size: 100, transaction: {} as TrackedTransaction, position: 1, label: 'invoice.paid', outbox: 'public.outbox', deadLetter: false, batchLimit: 1_000_000 }));
    const producer = openKafkaProducer({ client, brokers: inject('services').kafkaBrokers.split(','), clientId: 'key-placement-test', fastEncoder: true, compression: 'none', maxMessageBytes: 1_000_000, autoCreateTopics: false, logger: pino({ level: 'silent' }) });
    try {
      await producer.connect();
      await producer.produce(messages);
    } finally {
      await producer.disconnect();
    }
    const records: { key: string; partition: number }[] = [];
    const consumer = kafka.consumer({ groupId: `key-placement-${randomUUID()}` });
    await consumer.connect();
    try {
      await consumer.subscribe({ topics: [topic], fromBeginning: true });
      await consumer.run({ eachMessage: async ({ partition, message }) => void records.push({ key: message.key!.toString(), partition }) });
      for (const deadline = Date.now() + 60_000; records.length < KEYS.length && Date.now() < deadline; ) await new Promise((resolve) => setTimeout(resolve, 100));
    } finally {
      await consumer.disconnect();
    }
    const misplaced = records.filter(({ key, partition }) => partition !== partitionForKey(key, PARTITIONS)).map(({ key, partition }) => `${key}: on ${partition}, murmur2 says ${partitionForKey(key, PARTITIONS)}`);
    expect(misplaced).toEqual([]);
    expect(new Set(records.map(({ key }) => key))).toEqual(new Set(KEYS));
    // The keys include some whose hash is negative, where `>>> 0` (the library's own default partitioner) chooses another partition.
    expect(KEYS.some((key) => partitionForKey(key, PARTITIONS) !== (murmur2(key) >>> 0) % PARTITIONS)).toBe(true);
  });
});


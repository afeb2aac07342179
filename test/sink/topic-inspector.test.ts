import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { describe, expect, inject, it } from 'vitest';
import { openKafkaProducer } from '../../src/kafka/open.js';
import { kafkajs } from '../../src/kafka/kafkajs/kafkajs.js';
import { testKafkaClients } from '../harness/kafka-clients.js';
import { waitForLeaders } from '../harness/leaders.js';

/**
 * What the topic catalogue and the exactly-once checks read from the brokers, the same on both
 * clients: librdkafka's through the DescribeConfigs scripts/librdkafka.sh adds to its binding.
 */
describe.each(testKafkaClients())('the topic checks on %s', (client) => {
  it("read a topic's durability, size limit and cleanup policy, null for a missing topic, and the brokers' auto-creation", async () => {
    const topic = `inspected-${client}-${randomUUID().slice(0, 8)}`;
    // Made with the relay's kafkajs (its fork installed): this process opens a kafkajs producer,
    // which refuses a kafkajs loaded before it (test/harness/kafka.ts loads it plain).
    const admin = new (kafkajs().Kafka)({ clientId: 'topic-inspector-test', brokers: inject('services').kafkaBrokers.split(','), logLevel: kafkajs().logLevel.NOTHING }).admin();
    await admin.connect();
    try {
      const configEntries = [
        { name: 'min.insync.replicas', value: '1' },
        { name: 'unclean.leader.election.enable', value: 'true' },
        { name: 'max.message.bytes', value: '300000' },
        { name: 'cleanup.policy', value: 'compact,delete' },
      ];
      await admin.createTopics({ topics: [{ topic, numPartitions: 2, replicationFactor: 1, configEntries }], waitForLeaders: false });
      await waitForLeaders(admin, [topic]);
    } finally {
      await admin.disconnect();
    }

    const producer = openKafkaProducer({ client, brokers: inject('services').kafkaBrokers.split(','), clientId: 'topic-inspector-test', fastEncoder: true, compression: 'none', maxMessageBytes: 1_000_000, autoCreateTopics: false, logger: pino({ level: 'silent' }) });
    try {
      expect(await producer.describeTopic(topic)).toEqual({ replicationFactor: 1, minInsyncReplicas: 1, uncleanLeaderElection: true, maxMessageBytes: 300_000, cleanupPolicy: 'compact,delete' });
      expect(await producer.describeTopic(`missing-${randomUUID()}`)).toBeNull();
      // The test Kafka creates topics (scripts/stack/kafka.sh).
      expect(await producer.brokersCreateTopics()).toBe(true);
    } finally {
      await producer.disconnect();
    }
  });
});

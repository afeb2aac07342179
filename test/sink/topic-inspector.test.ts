import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { describe, expect, inject, it } from 'vitest';
import { kafkajsTopicAdmin } from '../../src/kafka/kafkajs/admin.js';
import { kafkajsClient } from '../../src/kafka/kafkajs/client.js';
import { kafkajs } from '../../src/kafka/kafkajs/kafkajs.js';
import { librdkafkaTopicAdmin } from '../../src/kafka/librdkafka/admin.js';
import { loadLibrdkafka } from '../../src/kafka/librdkafka/binding.js';
import { openKafkaProducer } from '../../src/kafka/open.js';
import { PLAINTEXT } from '../../src/security/kafka-security.js';
import { createTopicInspector, type TopicAdmin } from '../../src/kafka/topic-inspector.js';
import { testKafkaClients } from '../harness/kafka-clients.js';
import { waitForLeaders } from '../harness/leaders.js';

/**
 * What the topic catalogue and the exactly-once checks read from the brokers, the same on both
 * clients: librdkafka's through the DescribeConfigs scripts/kafka-javascript.patch adds to its binding.
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

  it('creates a missing progress topic once when two relays prepare it at the same time: both go on; its configs read by name', async () => {
    const brokers = inject('services').kafkaBrokers.split(',');
    // @platformatic/kafka imported only when its case runs (it needs Node 22.22).
    const platformatic = client === 'platformatic' ? { ...(await import('../../src/kafka/platformatic/admin.js')), ...(await import('../../src/kafka/platformatic/library.js')) } : null;
    const topicAdmin = (): TopicAdmin =>
      platformatic
        ? platformatic.platformaticTopicAdmin(platformatic.platformaticClientOptions({ clientId: 'topic-inspector-test', brokers }))
        : client === 'librdkafka'
          ? librdkafkaTopicAdmin(loadLibrdkafka(), { 'bootstrap.servers': brokers.join(','), 'client.id': 'topic-inspector-test' })
          : kafkajsTopicAdmin(kafkajsClient({ clientId: 'topic-inspector-test', brokers, security: PLAINTEXT }).admin());
    const topic = `progress-${client}-${randomUUID().slice(0, 8)}`;
    const inspectors = [createTopicInspector(topicAdmin(), pino({ level: 'silent' })), createTopicInspector(topicAdmin(), pino({ level: 'silent' }))];
    try {
      await Promise.all(inspectors.map((inspector) => inspector.prepareProgressTopic(topic)));
      expect(await inspectors[0]!.describeTopic(topic)).toMatchObject({ replicationFactor: 1, minInsyncReplicas: 1, cleanupPolicy: 'compact' });
    } finally {
      await Promise.all(inspectors.map((inspector) => inspector.disconnect()));
    }
    // The configs asked for, and only those: the broker is asked for those names alone.
    const admin = topicAdmin();
    try {
      expect(Object.fromEntries(await admin.topicConfigs(topic, ['cleanup.policy', 'min.insync.replicas']))).toEqual({ 'cleanup.policy': 'compact', 'min.insync.replicas': '1' });
    } finally {
      await admin.disconnect();
    }
  });
});

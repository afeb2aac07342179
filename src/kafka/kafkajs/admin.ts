import { kafkajs, type Admin } from './kafkajs.js';
import { kafkaErrorName } from '../failure.js';
import type { TopicAdmin } from '../topic-inspector.js';

/** The TopicInspector's requests on kafkajs's admin client, connected at the first. */
export function kafkajsTopicAdmin(admin: Admin): TopicAdmin {
  let connected: Promise<void> | null = null;
  const connect = async () => {
    connected ??= admin.connect();
    await connected;
    return admin;
  };
  const configs = async (type: 'TOPIC' | 'BROKER', name: string, names: readonly string[]) => {
    const described = await (await connect()).describeConfigs({ includeSynonyms: false, resources: [{ type: kafkajs().ConfigResourceTypes[type], name, configNames: [...names] }] });
    return new Map(described.resources[0]?.configEntries.map((entry) => [entry.configName, entry.configValue]) ?? []);
  };

  return {
    async partitions(topic) {
      let metadata;
      try {
        metadata = await (await connect()).fetchTopicMetadata({ topics: [topic] });
      } catch (error) {
        if (kafkaErrorName(error) === 'UNKNOWN_TOPIC_OR_PARTITION') return null;
        throw error;
      }
      return (metadata.topics[0]?.partitions ?? []).map((partition) => ({ replicas: partition.replicas, leader: partition.leader >= 0 ? partition.leader : null }));
    },
    topicConfigs: (topic, names) => configs('TOPIC', topic, names),
    brokerConfigs: (brokerId, names) => configs('BROKER', String(brokerId), names),
    async brokerIds() {
      const { brokers } = await (await connect()).describeCluster();
      return brokers.map((broker) => broker.nodeId);
    },
    async createTopic({ name, partitions, replicationFactor, configs: entries }) {
      // false for a topic that exists already; the inspector waits for the leaders.
      await (await connect()).createTopics({
        waitForLeaders: false,
        topics: [{ topic: name, numPartitions: partitions, replicationFactor, configEntries: Object.entries(entries).map(([entry, value]) => ({ name: entry, value })) }],
      });
    },
    async disconnect() {
      if (connected) await admin.disconnect().catch(() => undefined);
    },
  };
}

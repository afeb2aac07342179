import { Admin, ConfigResourceTypes, type Base, type BaseOptions, type ClusterMetadata } from '@platformatic/kafka';
import type { TopicAdmin } from '../topic-inspector.js';
import { namedPlatformaticError } from './library.js';

/** The library's answer to a metadata request naming a topic the brokers do not have (it drops Kafka's error code for this message). */
const UNKNOWN_TOPIC = /^Unknown topic /;

/** The cluster's metadata for `topics`, fresh; null if one of them does not exist. */
export async function topicMetadata(client: Base, topics: string[]): Promise<ClusterMetadata | null> {
  try {
    // No retries first: the library retries an unknown topic as it would a leader election, ~23 s for a topic that is not there.
    return await client.metadata({ topics, forceUpdate: true, retries: 0 });
  } catch (error) {
    if (UNKNOWN_TOPIC.test((error as Error).message) || namedPlatformaticError(error).type === 'UNKNOWN_TOPIC_OR_PARTITION') return null;
  }
  try {
    return await client.metadata({ topics, forceUpdate: true });
  } catch (error) {
    if (UNKNOWN_TOPIC.test((error as Error).message)) return null;
    throw namedPlatformaticError(error);
  }
}

/** The TopicInspector's requests on the library's Admin client (it connects at the first request). */
export function platformaticTopicAdmin(options: BaseOptions): TopicAdmin {
  let admin: Admin | null = null;
  const client = () => (admin ??= new Admin(options));
  const configs = async (resourceType: number, resourceName: string, names: readonly string[]): Promise<ReadonlyMap<string, string>> => {
    let described;
    try {
      described = await client().describeConfigs({ resources: [{ resourceType: resourceType as 2, resourceName, configurationKeys: [...names] }], includeSynonyms: false });
    } catch (error) {
      throw namedPlatformaticError(error);
    }
    return new Map((described[0]?.configs ?? []).flatMap((entry) => (typeof entry.value === 'string' ? [[entry.name, entry.value] as const] : [])));
  };

  return {
    async partitions(topic) {
      const metadata = await topicMetadata(client(), [topic]);
      const found = metadata?.topics.get(topic);
      if (!found) return null;
      return found.partitions.map((partition) => ({ replicas: partition.replicas, leader: partition.leader >= 0 ? partition.leader : null }));
    },
    topicConfigs: (topic, names) => configs(ConfigResourceTypes.TOPIC, topic, names),
    brokerConfigs: (brokerId, names) => configs(ConfigResourceTypes.BROKER, String(brokerId), names),
    async brokerIds() {
      try {
        return [...(await client().metadata({ topics: [], forceUpdate: true })).brokers.keys()];
      } catch (error) {
        throw namedPlatformaticError(error);
      }
    },
    async createTopic({ name, partitions, replicationFactor, configs: entries }) {
      try {
        await client().createTopics({ topics: [name], partitions, replicas: replicationFactor, configs: Object.entries(entries).map(([entry, value]) => ({ name: entry, value })) });
      } catch (error) {
        const named = namedPlatformaticError(error);
        // Another process created it first (two relays starting at once): as kafkajs's createTopics, not a failure.
        if (named.type !== 'TOPIC_ALREADY_EXISTS') throw named;
      }
    },
    async disconnect() {
      const closing = admin;
      admin = null;
      await closing?.close().catch(() => undefined);
    },
  };
}

import type * as Rdkafka from '@confluentinc/kafka-javascript';
import { kafkaErrorName } from '../failure.js';
import type { TopicAdmin } from '../topic-inspector.js';
import { called, CONNECT_TIMEOUT_MS, namedLibrdkafkaError, type RdkafkaConfig } from './binding.js';

/** librdkafka's resource types (rdkafka.h rd_kafka_ResourceType_t). */
const RESOURCE_TOPIC = 2;
const RESOURCE_BROKER = 4;

/** A described config resource (scripts/kafka-javascript.patch). */
interface DescribedResource {
  readonly name: string;
  readonly error: { readonly code: number; readonly message: string } | null;
  readonly configs: readonly { readonly name: string; readonly value: string | null }[];
}

/** What scripts/librdkafka.sh adds to the binding's AdminClient (confluentinc/confluent-kafka-javascript#444). */
interface PatchedAdminClient extends Rdkafka.IAdminClient {
  describeConfigs(resources: { type: number; name: string; configNames?: readonly string[] }[], options: { timeout?: number }, cb: (error: Rdkafka.LibrdKafkaError | null, described: DescribedResource[]) => void): void;
  describeCluster(options: { timeout?: number }, cb: (error: Rdkafka.LibrdKafkaError | null, cluster: { brokers: { id: number }[] }) => void): void;
}

/** The TopicInspector's requests on an admin client of its own, made at the first. */
export function librdkafkaTopicAdmin(rdkafka: typeof Rdkafka, common: RdkafkaConfig): TopicAdmin {
  let client: PatchedAdminClient | null = null;
  const admin = () => (client ??= rdkafka.AdminClient.create(common as Rdkafka.GlobalConfig) as PatchedAdminClient);

  const partitions: TopicAdmin['partitions'] = async (topic) => {
    const [description] = await called<Rdkafka.TopicDescription[]>((done) => admin().describeTopics([topic], { timeout: CONNECT_TIMEOUT_MS }, done));
    if (description?.error) {
      if (description.error.code === rdkafka.CODES.ERRORS.ERR_UNKNOWN_TOPIC_OR_PART) return null;
      throw namedLibrdkafkaError(description.error);
    }
    return (description?.partitions ?? []).map((partition) => ({ replicas: partition.replicas.map((node) => node.id), leader: partition.leader?.id ?? null }));
  };

  const configs = async (type: number, name: string, names: readonly string[]): Promise<ReadonlyMap<string, string>> => {
    const [described] = await called<DescribedResource[]>((done) => admin().describeConfigs([{ type, name, configNames: names }], { timeout: CONNECT_TIMEOUT_MS }, done));
    if (described?.error) throw namedLibrdkafkaError(described.error);
    return new Map((described?.configs ?? []).flatMap((entry) => (entry.value === null ? [] : [[entry.name, entry.value] as const])));
  };

  return {
    partitions,
    topicConfigs: (topic, names) => configs(RESOURCE_TOPIC, topic, names),
    // One broker per request: librdkafka sends a broker's configs request to that broker.
    brokerConfigs: (brokerId, names) => configs(RESOURCE_BROKER, String(brokerId), names),
    async brokerIds() {
      const { brokers } = await called<{ brokers: { id: number }[] }>((done) => admin().describeCluster({ timeout: CONNECT_TIMEOUT_MS }, done));
      return brokers.map((broker) => broker.id);
    },
    async createTopic({ name, partitions: count, replicationFactor, configs: entries }) {
      try {
        await called((done) => admin().createTopic({ topic: name, num_partitions: count, replication_factor: replicationFactor, config: entries }, CONNECT_TIMEOUT_MS, done));
      } catch (error) {
        // Another process created it first (two relays starting at once): as kafkajs's createTopics, not a failure.
        if (kafkaErrorName(error) !== 'TOPIC_ALREADY_EXISTS') throw error;
      }
    },
    async disconnect() {
      client?.disconnect();
      client = null;
    },
  };
}

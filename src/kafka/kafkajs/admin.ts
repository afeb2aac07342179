import { kafkajs, type Admin } from './kafkajs.js';
import type { Logger } from 'pino';
import { RelayError } from '../../errors.js';
import { kafkaErrorName } from '../failure.js';
import { durabilityProblems } from '../topic-durability.js';
import type { TopicDescription, TopicInspector } from '../ports.js';

const KAFKA_DEFAULT_MAX_MESSAGE_BYTES = 1_048_588;

export function createTopicInspector(admin: Admin, logger: Logger): TopicInspector {
  let connected: Promise<void> | null = null;
  const connect = async () => {
    connected ??= admin.connect();
    await connected;
    return admin;
  };

  const describeTopic = async (topic: string): Promise<TopicDescription | null> => {
    await connect();
    let metadata;
    try {
      metadata = await admin.fetchTopicMetadata({ topics: [topic] });
    } catch (error) {
      if (kafkaErrorName(error) === 'UNKNOWN_TOPIC_OR_PARTITION') return null;
      throw error;
    }
    const configs = await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: kafkajs().ConfigResourceTypes.TOPIC, name: topic, configNames: ['min.insync.replicas', 'unclean.leader.election.enable', 'max.message.bytes', 'cleanup.policy'] }] });
    const entries = new Map(configs.resources[0]?.configEntries.map((entry) => [entry.configName, entry.configValue]) ?? []);
    return {
      replicationFactor: Math.min(...(metadata.topics[0]?.partitions ?? []).map((partition) => partition.replicas.length)),
      minInsyncReplicas: Number(entries.get('min.insync.replicas') ?? 1),
      uncleanLeaderElection: entries.get('unclean.leader.election.enable') === 'true',
      // Kafka's default when a topic does not say (1 MB minus the batch overhead it allows for).
      maxMessageBytes: Number(entries.get('max.message.bytes') ?? KAFKA_DEFAULT_MAX_MESSAGE_BYTES),
      cleanupPolicy: entries.get('cleanup.policy') ?? 'delete',
    };
  };

  // Read once: it is a broker setting no producer can change (Kafka does not update it dynamically).
  let brokersCreate: Promise<boolean | null> | null = null;
  const brokersCreateTopics = (): Promise<boolean | null> =>
    (brokersCreate ??= (async () => {
      await connect();
      const { brokers } = await admin.describeCluster();
      const configs = await admin.describeConfigs({ includeSynonyms: false, resources: brokers.map((broker) => ({ type: kafkajs().ConfigResourceTypes.BROKER, name: String(broker.nodeId), configNames: ['auto.create.topics.enable'] })) });
      const values = configs.resources.flatMap((resource) => resource.configEntries.filter((entry) => entry.configName === 'auto.create.topics.enable').map((entry) => entry.configValue));
      // A broker that creates no topic is enough for a record to wait on one for ever.
      return values.length === 0 ? null : values.every((value) => value === 'true');
    })().catch((error: unknown) => {
      logger.warn({ err: (error as Error).message }, "could not read the brokers' auto.create.topics.enable (the relay's principal needs DESCRIBE_CONFIGS on the cluster): if they create no topics, events for a topic that does not exist wait for it; set OUTBOX_KAFKA_AUTO_CREATE_TOPICS=false to dead-letter them instead");
      return null;
    }));

  /**
   * The progress topic: created compacted, one partition, as replicated as the cluster allows, if
   * missing; refused if no write to it can ever be acknowledged. Warned about if a record could be
   * deleted by retention (the relay then resends everything after its confirmed position:
   * duplicates, not loss) or lost with one broker.
   */
  const prepareProgressTopic = async (topic: string): Promise<void> => {
    let description = await describeTopic(topic);
    if (description === null) {
      const brokers = (await (await connect()).describeCluster()).brokers.length;
      const replicationFactor = Math.min(3, brokers);
      await admin.createTopics({
        waitForLeaders: true,
        topics: [{ topic, numPartitions: 1, replicationFactor, configEntries: [{ name: 'cleanup.policy', value: 'compact' }, { name: 'min.insync.replicas', value: String(Math.max(1, replicationFactor - 1)) }] }],
      });
      logger.info({ topic, replicationFactor }, `created the exactly-once progress topic ${topic} (compacted, one partition)`);
      description = await describeTopic(topic);
      if (description === null) throw new RelayError('SINK_EXACTLY_ONCE', `the progress topic ${topic} was created but the broker does not describe it`);
    }
    const problems = durabilityProblems(description);
    if (description.minInsyncReplicas > description.replicationFactor) throw new RelayError('SINK_EXACTLY_ONCE', `the progress topic ${topic}: ${problems.join('; ')}; no transaction could commit`);
    if (!description.cleanupPolicy.split(',').includes('compact')) problems.push(`cleanup.policy=${description.cleanupPolicy} may delete the relay's last progress record (then a restart resends what it covered: duplicates); use cleanup.policy=compact`);
    if (problems.length > 0) logger.warn({ topic, problems }, `the exactly-once progress topic ${topic}: ${problems.join('; ')}`);
  };

  return {
    describeTopic,
    brokersCreateTopics,
    prepareProgressTopic,
    async disconnect() {
      if (connected) await admin.disconnect().catch(() => undefined);
    },
  };
}

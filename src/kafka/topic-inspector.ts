import type { Logger } from 'pino';
import { RelayError } from '../errors.js';
import { sleep } from '../time.js';
import type { TopicDescription, TopicInspector } from './ports.js';
import { durabilityProblems } from './topic-durability.js';

/** Kafka's default when a topic does not say (1 MB minus the batch overhead it allows for). */
const KAFKA_DEFAULT_MAX_MESSAGE_BYTES = 1_048_588;
const TOPIC_CONFIGS = ['min.insync.replicas', 'unclean.leader.election.enable', 'max.message.bytes', 'cleanup.policy'] as const;
/** How long a topic just created may take to have a leader for every partition, and how often that is looked at. */
const LEADERS_TIMEOUT_MS = 30_000;
const LEADERS_POLL_MS = 200;

/**
 * The admin requests the TopicInspector needs, as each client makes them (kafkajs/admin.ts,
 * librdkafka/admin.ts). A request Kafka refuses rejects with the client's error, named as Kafka
 * names it (kafkaErrorName).
 */
export interface TopicAdmin {
  /** The topic's partitions, each with its replicas and its leader (null: none elected); null if the topic does not exist. */
  partitions(topic: string): Promise<{ readonly replicas: readonly number[]; readonly leader: number | null }[] | null>;
  /** Of `names`, those the topic's configs hold (a config left out has no value the broker reports). */
  topicConfigs(topic: string, names: readonly string[]): Promise<ReadonlyMap<string, string>>;
  /** The same, of one broker's configs. */
  brokerConfigs(brokerId: number, names: readonly string[]): Promise<ReadonlyMap<string, string>>;
  brokerIds(): Promise<number[]>;
  /** Resolves once the controller created the topic, or found it created already (by another process). */
  createTopic(topic: { name: string; partitions: number; replicationFactor: number; configs: Readonly<Record<string, string>> }): Promise<void>;
  disconnect(): Promise<void>;
}

/** What the topic catalogue and the durability checks read from the brokers, on either client's admin. */
export function createTopicInspector(admin: TopicAdmin, logger: Logger): TopicInspector {
  const describeTopic = async (topic: string): Promise<TopicDescription | null> => {
    const partitions = await admin.partitions(topic);
    if (partitions === null) return null;
    const configs = await admin.topicConfigs(topic, TOPIC_CONFIGS);
    return {
      replicationFactor: Math.min(...partitions.map((partition) => partition.replicas.length)),
      minInsyncReplicas: Number(configs.get('min.insync.replicas') ?? 1),
      uncleanLeaderElection: configs.get('unclean.leader.election.enable') === 'true',
      maxMessageBytes: Number(configs.get('max.message.bytes') ?? KAFKA_DEFAULT_MAX_MESSAGE_BYTES),
      cleanupPolicy: configs.get('cleanup.policy') ?? 'delete',
    };
  };

  // Read once: it is a broker setting no producer can change (Kafka does not update it dynamically).
  let brokersCreate: Promise<boolean | null> | null = null;
  const brokersCreateTopics = (): Promise<boolean | null> =>
    (brokersCreate ??= (async () => {
      const brokers = await admin.brokerIds();
      const configs = await Promise.all(brokers.map((broker) => admin.brokerConfigs(broker, ['auto.create.topics.enable'])));
      const values = configs.flatMap((config) => config.get('auto.create.topics.enable') ?? []);
      // A broker that creates no topic is enough for a record to wait on one for ever.
      return values.length === 0 ? null : values.every((value) => value === 'true');
    })().catch((error: unknown) => {
      logger.warn({ err: (error as Error).message }, "could not read the brokers' auto.create.topics.enable (the relay's principal needs DESCRIBE_CONFIGS on the cluster): if they create no topics, events for a topic that does not exist wait for it; set OUTBOX_KAFKA_AUTO_CREATE_TOPICS=false to dead-letter them instead");
      return null;
    }));

  /**
   * A topic just created has its partitions' leaders elected after the controller answered, and a
   * broker may not know the topic yet: waited for here, with either client (kafkajs's own
   * waitForLeaders gives up at a broker that does not know the topic yet).
   */
  const leadersElected = async (topic: string): Promise<void> => {
    const deadline = Date.now() + LEADERS_TIMEOUT_MS;
    for (;;) {
      const partitions = await admin.partitions(topic).catch(() => null);
      if (partitions !== null && partitions.length > 0 && partitions.every((partition) => partition.leader !== null)) return;
      if (Date.now() > deadline) throw new RelayError('SINK_EXACTLY_ONCE', `the progress topic ${topic} was created, but not every partition had a leader after ${LEADERS_TIMEOUT_MS / 1000} s`);
      await sleep(LEADERS_POLL_MS);
    }
  };

  /**
   * The progress topic: created compacted, one partition, as replicated as the cluster allows, if
   * missing; refused if no write to it can ever be acknowledged. Warned about if a record could be
   * deleted by retention (the relay then resends everything after its confirmed position:
   * duplicates, not loss) or lost with one broker.
   */
  const prepareProgressTopic = async (topic: string): Promise<void> => {
    let description = await describeTopic(topic);
    if (description === null) {
      const replicationFactor = Math.min(3, (await admin.brokerIds()).length);
      await admin.createTopic({ name: topic, partitions: 1, replicationFactor, configs: { 'cleanup.policy': 'compact', 'min.insync.replicas': String(Math.max(1, replicationFactor - 1)) } });
      await leadersElected(topic);
      logger.info({ topic, replicationFactor }, `created the exactly-once progress topic ${topic} (compacted, one partition)`);
      description = await describeTopic(topic);
      if (description === null) throw new RelayError('SINK_EXACTLY_ONCE', `the progress topic ${topic} was created but the broker does not describe it`);
    }
    const problems = durabilityProblems(description);
    if (description.minInsyncReplicas > description.replicationFactor) throw new RelayError('SINK_EXACTLY_ONCE', `the progress topic ${topic}: ${problems.join('; ')}; no transaction could commit`);
    if (!description.cleanupPolicy.split(',').includes('compact')) problems.push(`cleanup.policy=${description.cleanupPolicy} may delete the relay's last progress record (then a restart resends what it covered: duplicates); use cleanup.policy=compact`);
    if (problems.length > 0) logger.warn({ topic, problems }, `the exactly-once progress topic ${topic}: ${problems.join('; ')}`);
  };

  return { describeTopic, brokersCreateTopics, prepareProgressTopic, disconnect: () => admin.disconnect() };
}

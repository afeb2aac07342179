import { RelayError } from '../../errors.js';
import type { KafkaSecurity } from '../../security/kafka-security.js';
import type { OpenGroupConsumer, TopicLister } from '../group-consumer.js';
import type { KafkaConnection, KafkaProducerOptions, RecordProducer } from '../ports.js';

/**
 * The @platformatic/kafka clients behind a dynamic import: the library needs Node 22.22 or later,
 * and is loaded only when a client of it is made (the first call of one), so a process on
 * another client (and the unit tests, which CI runs on Node 20 too) never loads it.
 */

/** A module of this folder; the library failing to load (an older Node, a missing install) is named as such. */
function load<M>(module: () => Promise<M>): Promise<M> {
  return module().catch((error: unknown) => {
    throw new RelayError('SINK_CLIENT', `OUTBOX_KAFKA_CLIENT=platformatic: @platformatic/kafka does not load on Node ${process.versions.node} (${(error as Error).message}); it needs Node 22.22 or later and \`npm ci\`, or use OUTBOX_KAFKA_CLIENT=kafkajs`, { cause: error });
  });
}

const producerModule = () => load(() => import('./producer.js'));

/** The RecordProducer on @platformatic/kafka, made at its first call. */
export function lazyPlatformaticProducer(options: KafkaProducerOptions): RecordProducer {
  let made: Promise<RecordProducer> | null = null;
  const producer = () => (made ??= producerModule().then((module) => module.createPlatformaticProducer(options)));
  const exactlyOnce = options.exactlyOnce;
  return {
    connect: async () => (await producer()).connect(),
    produce: async (messages) => (await producer()).produce(messages),
    ...(exactlyOnce && { commit: async () => (await producer()).commit!() }),
    describeTopic: async (topic) => (await producer()).describeTopic(topic),
    brokersCreateTopics: async () => (await producer()).brokersCreateTopics(),
    ...(exactlyOnce?.progress && { readProgress: async () => (await producer()).readProgress!() }),
    disconnect: async () => {
      // A producer that never loaded has nothing to close (its connect failed, saying why).
      const producer = await made?.catch(() => null);
      await producer?.disconnect();
    },
  };
}

export async function countRecordsPlatformatic(brokers: readonly string[], topic: string, security: KafkaSecurity): Promise<number> {
  return (await producerModule()).countRecordsPlatformatic(brokers, topic, security);
}

/** Consumers in a group and the cluster's topic list on @platformatic/kafka, each loading the library at its first call. */
export function platformaticGroupConsumers(connection: KafkaConnection): { readonly open: OpenGroupConsumer; readonly topics: () => TopicLister } {
  const consumers = load(() => import('./group-consumer.js')).then((module) => module.platformaticGroupConsumers(connection));
  // Not awaited by anyone until used: a failure to load surfaces at the first call, not as an unhandled rejection.
  consumers.catch(() => undefined);
  return {
    open: (groupId, events) => {
      const consumer = consumers.then((made) => made.open(groupId, events));
      consumer.catch(() => undefined);
      return {
        start: async (topics, take) => (await consumer).start(topics, take),
        stop: async () => (await consumer).stop(),
      };
    },
    topics: () => {
      const lister = consumers.then((made) => made.topics());
      lister.catch(() => undefined);
      return { listTopics: async () => (await lister).listTopics(), close: async () => (await lister).close() };
    },
  };
}

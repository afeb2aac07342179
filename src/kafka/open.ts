import type { KafkaSecurity } from '../security/kafka-security.js';
import type { OpenGroupConsumer, TopicLister } from './group-consumer.js';
import { kafkajsGroupConsumers } from './kafkajs/group-consumer.js';
import { countRecords, createKafkaProducer } from './kafkajs/producer.js';
import { librdkafkaGroupConsumers } from './librdkafka/group-consumer.js';
import { countRecordsLibrdkafka, createLibrdkafkaProducer } from './librdkafka/producer.js';
import { countRecordsPlatformatic, lazyPlatformaticProducer, platformaticGroupConsumers } from './platformatic/lazy.js';
import type { KafkaClientName, KafkaConnection, KafkaProducerOptions, RecordProducer } from './ports.js';

/**
 * What the rest of the relay opens Kafka clients with, on the client OUTBOX_KAFKA_CLIENT names.
 * No client's library is loaded before a client of it is made (kafkajs/kafkajs.ts,
 * librdkafka/binding.ts, platformatic/lazy.ts): a process on one never loads another.
 */

/** The RecordProducer: what every command that produces opens. */
export function openKafkaProducer(options: KafkaProducerOptions): RecordProducer {
  if (options.client === 'platformatic') return lazyPlatformaticProducer(options);
  return options.client === 'librdkafka' ? createLibrdkafkaProducer(options) : createKafkaProducer(options);
}

/** Records in a topic (0 if it does not exist): `status`'s dead-letter count. */
export function countTopicRecords(client: KafkaClientName, brokers: readonly string[], topic: string, security: KafkaSecurity): Promise<number> {
  if (client === 'platformatic') return countRecordsPlatformatic(brokers, topic, security);
  return client === 'librdkafka' ? countRecordsLibrdkafka(brokers, topic, security) : countRecords(brokers, topic, security);
}

/** Consumers in a group, and the cluster's topic list: the webhooks intake's way in. */
export function openGroupConsumers(client: KafkaClientName, connection: KafkaConnection): { readonly open: OpenGroupConsumer; readonly topics: () => TopicLister } {
  if (client === 'platformatic') return platformaticGroupConsumers(connection);
  return client === 'librdkafka' ? librdkafkaGroupConsumers(connection) : kafkajsGroupConsumers(connection);
}

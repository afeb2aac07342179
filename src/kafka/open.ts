import type { KafkaSecurity } from '../security/kafka-security.js';
import { countRecords, createKafkaProducer } from './kafkajs/producer.js';
import { countRecordsLibrdkafka, createLibrdkafkaProducer } from './librdkafka/producer.js';
import type { KafkaClientName, KafkaProducerOptions, RecordProducer } from './ports.js';

/** The RecordProducer on the client OUTBOX_KAFKA_CLIENT names: what every command that produces opens. */
export function openKafkaProducer(options: KafkaProducerOptions): RecordProducer {
  return options.client === 'librdkafka' ? createLibrdkafkaProducer(options) : createKafkaProducer(options);
}

/** Records in a topic (0 if it does not exist), read with the chosen client: `status`'s dead-letter count. */
export function countTopicRecords(client: KafkaClientName, brokers: readonly string[], topic: string, security: KafkaSecurity): Promise<number> {
  return client === 'librdkafka' ? countRecordsLibrdkafka(brokers, topic, security) : countRecords(brokers, topic, security);
}

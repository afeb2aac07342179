import { KAFKA_CLIENT_NAMES, KAFKA_CLIENTS, type KafkaClientName } from '../../src/kafka/ports.js';

/**
 * The Kafka clients a suite runs on (its `describe.each`): KAFKA_CLIENTS, or those
 * OUTBOX_TEST_KAFKA_CLIENTS names, comma-separated (any of KAFKA_CLIENT_NAMES). The Postgres version matrix
 * (scripts/test-postgres-versions.sh) runs on kafkajs alone: what it tests is the server (WAL
 * decoding, slots, pgoutput, catalog views), and no client depends on the server's version.
 */
export function testKafkaClients(): readonly KafkaClientName[] {
  const named = process.env.OUTBOX_TEST_KAFKA_CLIENTS;
  if (named === undefined || named === '') return KAFKA_CLIENTS;
  const clients = named.split(',').map((name) => name.trim());
  if (!clients.every((name): name is KafkaClientName => (KAFKA_CLIENT_NAMES as readonly string[]).includes(name))) {
    throw new Error(`OUTBOX_TEST_KAFKA_CLIENTS=${named}: expected Kafka clients separated by commas, of ${KAFKA_CLIENT_NAMES.join(', ')}`);
  }
  return clients;
}

import { createRequire } from 'node:module';
import { inject } from 'vitest';
import { KAFKA_CLIENT_NAMES, KAFKA_CLIENTS, type KafkaClientName } from '../../src/kafka/ports.js';

declare module 'vitest' {
  export interface ProvidedContext {
    kafkaClients: readonly KafkaClientName[];
  }
}

/**
 * The Kafka clients a suite runs on (its `describe.each`), chosen once per run by
 * global-setup.ts (chooseTestKafkaClients) and handed to the files.
 */
export function testKafkaClients(): readonly KafkaClientName[] {
  return inject('kafkaClients');
}

/**
 * The clients of the run: those OUTBOX_TEST_KAFKA_CLIENTS names, comma-separated (any of
 * KAFKA_CLIENT_NAMES), each of which must load; else KAFKA_CLIENTS, without librdkafka when its
 * binding is not built (an opt-in npm ci does not build: said once, with how to build it, and
 * CI names all three so that a failed build fails the run). The Postgres version matrix
 * (scripts/test-postgres-versions.sh) runs on kafkajs alone: what it tests is the server (WAL
 * decoding, slots, pgoutput, catalog views), and no client depends on the server's version.
 */
export function chooseTestKafkaClients(named = process.env.OUTBOX_TEST_KAFKA_CLIENTS): readonly KafkaClientName[] {
  const librdkafka = librdkafkaLoadFailure();
  if (named === undefined || named === '') {
    if (librdkafka === null) return KAFKA_CLIENTS;
    process.stdout.write(`Kafka clients: the librdkafka client is not built (${librdkafka}): its suites do not run in this run; \`npm run build:librdkafka\` builds it (an opt-in)\n`);
    return KAFKA_CLIENTS.filter((client) => client !== 'librdkafka');
  }
  const clients = named.split(',').map((name) => name.trim());
  if (!clients.every((name): name is KafkaClientName => (KAFKA_CLIENT_NAMES as readonly string[]).includes(name))) {
    throw new Error(`OUTBOX_TEST_KAFKA_CLIENTS=${named}: expected Kafka clients separated by commas, of ${KAFKA_CLIENT_NAMES.join(', ')}`);
  }
  if (clients.includes('librdkafka') && librdkafka !== null) {
    throw new Error(`OUTBOX_TEST_KAFKA_CLIENTS=${named} names librdkafka, whose client (@confluentinc/kafka-javascript) does not load: ${librdkafka}; build it with \`npm run build:librdkafka\` (an opt-in npm ci does not build)`);
  }
  return clients;
}

/** Why the librdkafka binding does not load, or null if it does. */
function librdkafkaLoadFailure(): string | null {
  try {
    createRequire(import.meta.url)('@confluentinc/kafka-javascript');
    return null;
  } catch (error) {
    // The binding's own first line ends in "Tried:", the paths following on the next lines.
    return (error as Error).message.split('\n')[0]!.replace(/\. Tried:$/, '');
  }
}

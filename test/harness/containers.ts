import { GenericContainer, Wait, type StartedTestContainer } from 'testcontainers';
import { freePort } from './ports.js';
import type { ServiceEndpoints } from './services.js';

/**
 * The same three services as the local stack, in containers, for machines with a Docker
 * engine. Host ports are fixed for the run (picked free up front) so a container that a fault
 * test stops and starts again comes back on the address the relay already knows.
 */
export async function startContainers(): Promise<{ endpoints: ServiceEndpoints; stop: () => Promise<void> }> {
  const [pgPort, kafkaPort, registryPort] = [await freePort(), await freePort(), await freePort()];
  const postgres = await new GenericContainer('postgres:15')
    .withEnvironment({ POSTGRES_HOST_AUTH_METHOD: 'trust', POSTGRES_DB: 'outbox' })
    .withCommand(['postgres', '-c', 'wal_level=logical', '-c', 'max_replication_slots=20', '-c', 'max_wal_senders=20'])
    .withExposedPorts({ container: 5432, host: pgPort })
    .withWaitStrategy(Wait.forLogMessage(/database system is ready to accept connections/, 2))
    .start();
  const kafka = await new GenericContainer('apache/kafka:4.1.0')
    .withEnvironment({
      KAFKA_NODE_ID: '1',
      KAFKA_PROCESS_ROLES: 'broker,controller',
      KAFKA_LISTENERS: 'PLAINTEXT://:9092,CONTROLLER://:9093',
      KAFKA_ADVERTISED_LISTENERS: `PLAINTEXT://127.0.0.1:${kafkaPort}`,
      KAFKA_CONTROLLER_LISTENER_NAMES: 'CONTROLLER',
      KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: 'CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT',
      KAFKA_CONTROLLER_QUORUM_VOTERS: '1@localhost:9093',
      KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: '1',
      KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: '1',
      KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: '1',
      KAFKA_NUM_PARTITIONS: '3',
      KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS: '0',
    })
    .withExposedPorts({ container: 9092, host: kafkaPort })
    .withWaitStrategy(Wait.forLogMessage(/Kafka Server started/))
    .start();
  const registry = await new GenericContainer('apicurio/apicurio-registry:3.0.9')
    .withEnvironment({ APICURIO_CCOMPAT_MAX_SUBJECTS: '100000' })
    .withExposedPorts({ container: 8080, host: registryPort })
    .withWaitStrategy(Wait.forHttp('/apis/ccompat/v7/subjects', 8080))
    .start();
  const started: StartedTestContainer[] = [postgres, kafka, registry];
  return {
    endpoints: {
      databaseUrl: `postgres://postgres@127.0.0.1:${pgPort}/outbox`,
      kafkaBrokers: `127.0.0.1:${kafkaPort}`,
      schemaRegistryUrl: `http://127.0.0.1:${registryPort}/apis/ccompat/v7`,
      control: { kind: 'docker', containers: { pg: postgres.getId(), kafka: kafka.getId(), registry: registry.getId() } },
    },
    stop: async () => {
      await Promise.all(started.map((container) => container.stop()));
    },
  };
}

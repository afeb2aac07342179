import { Agent } from 'node:https';
import type { KafkaConfig } from '../kafka/kafkajs/kafkajs.js';
import { KAFKA_SECURITY, type ArgSpec, type KafkaSecurityKey } from '../config/commands.js';
import { kafkaSecurity } from '../config/compile.js';
import { load } from '../config/load.js';
import { kafkaClientSecurity } from '../security/kafka-security.js';
import { readPem } from '../security/pem.js';
import { avroRegistry } from './consumer.js';

type NoArgs = Record<never, ArgSpec>;

/**
 * A consumer or service next to the relay, configured by the relay's own variables: the same
 * KAFKA_BROKERS, KAFKA_SSL*, KAFKA_SASL* (and their *_FILE secrets) give the same connection,
 * checked the same way (a CONFIG_INVALID naming each bad variable).
 * `new Kafka({ clientId: 'billing-consumer', ...kafkaConfigFromEnv() })`
 */
export function kafkaConfigFromEnv(env: Readonly<Record<string, string | undefined>> = process.env): Pick<KafkaConfig, 'brokers' | 'ssl' | 'sasl'> {
  const config = load<'kafkaBrokers' | KafkaSecurityKey, never, NoArgs>({ summary: 'kafka connection', options: ['kafkaBrokers', ...KAFKA_SECURITY] }, { env });
  // kafkajs declares its own copies of these types; the values are what it takes.
  return { brokers: [...config.kafkaBrokers], ...(kafkaClientSecurity(kafkaSecurity(config)) as Pick<KafkaConfig, 'ssl' | 'sasl'>) };
}

/** The schema registry as the relay reaches it: SCHEMA_REGISTRY_URL, _CA_FILE, _USERNAME, _PASSWORD[_FILE]. */
export function avroRegistryFromEnv(env: Readonly<Record<string, string | undefined>> = process.env): ReturnType<typeof avroRegistry> {
  type RegistryKey = 'schemaRegistryUrl' | 'schemaRegistryCaFile' | 'schemaRegistryUsername' | 'schemaRegistryPassword';
  const config = load<RegistryKey, never, NoArgs>({ summary: 'schema registry', options: ['schemaRegistryUrl', 'schemaRegistryCaFile', 'schemaRegistryUsername', 'schemaRegistryPassword'] }, { env });
  if (!config.schemaRegistryUrl) throw new Error('SCHEMA_REGISTRY_URL is required');
  const { schemaRegistryUsername: username, schemaRegistryPassword: password, schemaRegistryCaFile: caFile } = config;
  return avroRegistry(config.schemaRegistryUrl.reveal(), {
    ...(username && password ? { auth: { username, password: password.reveal() } } : {}),
    ...(caFile ? { agent: new Agent({ ca: readPem('SCHEMA_REGISTRY_CA_FILE', caFile), keepAlive: true }) } : {}),
  });
}

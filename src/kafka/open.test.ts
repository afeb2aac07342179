import { createRequire } from 'node:module';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { openGroupConsumers, openKafkaProducer } from './open.js';
import { PLAINTEXT } from '../security/kafka-security.js';

const require = createRequire(import.meta.url);
/** The files of `pkg` loaded in this process (this file runs in a process of its own). */
const loadedFiles = (pkg: string) => Object.keys(require.cache).filter((path) => path.includes(`/node_modules/${pkg}/`));

describe('opening Kafka clients', () => {
  const connection = { brokers: ['127.0.0.1:1'], clientId: 'open-test', security: PLAINTEXT, logger: pino({ level: 'silent' }) };

  it('a process on librdkafka loads no kafkajs for the webhooks consumer, its topic list or its producer; kafkajs loads, its fork installed, at its first client', async () => {
    const librdkafka = openGroupConsumers('librdkafka', connection);
    librdkafka.open('open-test', { joined: () => undefined, failed: () => undefined });
    const lister = librdkafka.topics();
    await lister.close();
    expect(loadedFiles('kafkajs')).toEqual([]);

    // The relay's producer on kafkajs: kafkajs loaded now, with the fork in place (verified when the producer is made).
    openKafkaProducer({ ...connection, client: 'kafkajs', fastEncoder: true, compression: 'none', maxMessageBytes: 1_000_000, autoCreateTopics: false });
    expect(loadedFiles('kafkajs')).toContain(require.resolve('kafkajs'));
  });
});

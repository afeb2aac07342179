/**
 * kafkajs, for every module of the relay: the only one that loads it (eslint.config.js refuses
 * an import of kafkajs anywhere else in src/). kafkajs's modules capture the ones the relay
 * replaces as they load (fork/install.ts), so the fork is installed here, right before kafkajs
 * is required: import order cannot matter. Loaded at the first call, not at import: a process
 * on librdkafka that never opens a kafkajs client never loads kafkajs.
 */
import { createRequire } from 'node:module';
import type * as Kafkajs from 'kafkajs';
import { installKafkajsFork } from './fork/install.js';

let loaded: typeof Kafkajs | null = null;

/** kafkajs, the fork installed. */
export function kafkajs(): typeof Kafkajs {
  if (!loaded) {
    installKafkajsFork();
    loaded = createRequire(import.meta.url)('kafkajs') as typeof Kafkajs;
  }
  return loaded;
}

export type { Admin, Consumer, ConsumerConfig, EachMessagePayload, ICustomPartitioner, IHeaders, Kafka, KafkaConfig, KafkaMessage, Message, PartitionerArgs, ProducerBatch, TopicMessages, Transaction } from 'kafkajs';

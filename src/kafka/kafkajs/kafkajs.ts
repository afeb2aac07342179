/**
 * kafkajs, for every module of the relay: the only one that loads it (eslint.config.js refuses
 * an import of kafkajs anywhere else in src/). kafkajs's modules capture the ones the relay
 * replaces as they load (fork/install.ts), so the fork is installed here, in this module's body,
 * right before kafkajs is required: import order can no longer matter.
 */
import { createRequire } from 'node:module';
import type * as Kafkajs from 'kafkajs';
import { installKafkajsFork } from './fork/install.js';

installKafkajsFork();
const kafkajs = createRequire(import.meta.url)('kafkajs') as typeof Kafkajs;

export const { Kafka, logLevel, CompressionTypes, Partitioners, ConfigResourceTypes, KafkaJSConnectionError, KafkaJSNumberOfRetriesExceeded } = kafkajs;
/** A Kafka client, as `import { Kafka } from 'kafkajs'` names its type too. */
export type Kafka = Kafkajs.Kafka;
export type { Admin, Consumer, ConsumerConfig, EachMessagePayload, ICustomPartitioner, IHeaders, KafkaConfig, KafkaMessage, Message, PartitionerArgs, ProducerBatch, TopicMessages, Transaction } from 'kafkajs';

import { KAFKAJS_VERSION, verifyKafkajsPatches } from './fork/install.js';
import { kafkajs, type ICustomPartitioner, type Message, type PartitionerArgs, type ProducerBatch, type TopicMessages, type Transaction } from './kafkajs.js';
import { kafkajsClient, kafkajsLevel, type KafkajsLine, type KafkajsLineLevel } from './client.js';
import type { KafkaSecurity } from '../../security/kafka-security.js';
import type { OutgoingMessage } from '../record.js';
import { progressReading } from '../committed-progress.js';
import { createTopicInspector } from '../topic-inspector.js';
import { kafkajsTopicAdmin } from './admin.js';
import { checkTransactionalIdAccess, readLastCommitted } from './exactly-once.js';
import { kafkaFailure } from '../failure.js';
import { OutageLog, PRODUCE_REQUEST_FAILED } from '../outage-log.js';
import { partitionForKey } from '../partitioner.js';
import type { KafkaProducerOptions, RecordProducer } from '../ports.js';
import { connectProducer } from '../producer-connect.js';
import { Transactions } from '../transactions.js';
import { finishesWithin } from '../../time.js';

/**
 * The relay's only use of kafkajs on the produce side: the RecordProducer the sink runs on,
 * and the dead-letter count `status` reads. (The consumer helper in src/client uses kafkajs
 * for consuming, with kafkajs's own modules.)
 */

/** Each send waits this long for acks=all before the request counts as failed and is retried. */
const PRODUCE_TIMEOUT_MS = 30_000;
const DISCONNECT_TIMEOUT_MS = 5_000;

/**
 * A kafkajs producer with the relay's replacements (checked here: SINK_CLIENT if not in place),
 * idempotent with one request in flight: the broker drops duplicates of a retried request, and
 * a partition's order is the send order.
 */
export function createKafkaProducer(options: KafkaProducerOptions): RecordProducer {
  const { logger } = options;
  const outage = new OutageLog(logger);
  const kafka = kafkajsClient({
    clientId: options.clientId,
    brokers: options.brokers,
    ...(options.security && { security: options.security }),
    log: {
      logger,
      levelOf: (line) => {
        if (line.message !== PRODUCE_REQUEST_FAILED) return producerLineLevel(line);
        options.onRequestFailed?.(String(line.extra.error));
        outage.failed(line.extra);
        return null;
      },
    },
    // ~23 s of retries for one batch, at most 2 s apart: a partition whose leader died is sent
    // to the new one within 2 s of the metadata naming it.
    retry: { initialRetryTime: 200, retries: 14, maxRetryTime: 2_000 },
  });
  // After the client: making it loaded kafkajs, the fork installed first (kafkajs.ts).
  const replacements = verifyKafkajsPatches({ fastEncoder: options.fastEncoder });
  const { exactlyOnce } = options;
  const producer = kafka.producer({
    createPartitioner: keyHashPartitioner,
    idempotent: true,
    maxInFlightRequests: 1,
    allowAutoTopicCreation: options.autoCreateTopics,
    ...(exactlyOnce && { transactionalId: exactlyOnce.transactionalId, transactionTimeout: exactlyOnce.transactionTimeoutMs }),
  });
  const topics = createTopicInspector(kafkajsTopicAdmin(kafka.admin()), logger);

  const { CompressionTypes } = kafkajs();
  const compression = options.compression === 'gzip' ? CompressionTypes.GZIP : CompressionTypes.None;
  const sendBatch = (messages: readonly OutgoingMessage[], send: (request: ProducerBatch) => Promise<unknown>) =>
    send({ acks: -1, timeout: PRODUCE_TIMEOUT_MS, compression, topicMessages: groupByTopic(messages) });

  let transaction: Transaction | null = null;
  const transactions =
    exactlyOnce &&
    new Transactions(
      {
        begin: async () => {
          transaction = await producer.transaction();
        },
        send: async (messages) => {
          await sendBatch(messages, (request) => transaction!.sendBatch(request));
        },
        sendTombstone: async ({ topic, partition, key }) => {
          await transaction!.sendBatch({ acks: -1, timeout: PRODUCE_TIMEOUT_MS, topicMessages: [{ topic, messages: [{ key, value: null, partition }] }] });
        },
        commit: () => transaction!.commit(),
        abort: async () => {
          const failed = transaction;
          transaction = null;
          if (failed?.isActive()) await finishesWithin(failed.abort().catch(() => undefined), DISCONNECT_TIMEOUT_MS);
        },
      },
      exactlyOnce,
    );

  return {
    async connect() {
      logger.info({ kafkajs: KAFKAJS_VERSION, replacements, transactionalId: exactlyOnce?.transactionalId }, "producer: kafkajs with the relay's replacements");
      await connectProducer(options, topics, {
        connect: () => producer.connect(),
        fence: async () => {
          await checkTransactionalIdAccess(kafka, exactlyOnce!.transactionalId, (error) => kafkaFailure(error, '', exactlyOnce).code === 'SINK_NOT_AUTHORIZED');
          // kafkajs sends the transactional InitProducerId only at the first transaction, not at
          // connect: begin (and end) one now.
          await (await producer.transaction()).abort();
        },
      });
    },

    async produce(messages) {
      if (!transactions) {
        try {
          await sendBatch(messages, (request) => producer.sendBatch(request));
          outage.acknowledged(messages.length);
        } catch (error) {
          throw kafkaFailure(error, `Kafka did not acknowledge a batch of ${messages.length}`);
        }
        return;
      }
      try {
        await transactions.add(messages);
        outage.acknowledged(messages.length);
      } catch (error) {
        throw kafkaFailure(error, `Kafka did not acknowledge a batch of ${messages.length} in a transaction${await transactions.abortFailed()}`, exactlyOnce);
      }
    },

    ...(transactions && { commit: () => transactions.commit() }),

    describeTopic: topics.describeTopic,
    brokersCreateTopics: topics.brokersCreateTopics,

    ...progressReading(exactlyOnce, PRODUCE_TIMEOUT_MS, (topic, key, settle) => readLastCommitted(kafka, topic, key, settle), (record) => transactions!.commitTombstone(record), logger),

    async disconnect() {
      // A broker that stopped answering must not hold the session's end.
      await finishesWithin(producer.disconnect().catch(() => undefined), DISCONNECT_TIMEOUT_MS);
      await finishesWithin(topics.disconnect(), DISCONNECT_TIMEOUT_MS);
    },
  };
}

/**
 * kafkajs's own lines: connection errors and start-up chatter (a partition's leader not known
 * yet, a coordinator loading) are what the outage warning and the produce errors metric already
 * say, so they go to debug; anything else keeps kafkajs's level.
 */
function producerLineLevel(line: KafkajsLine): KafkajsLineLevel {
  const { namespace, message } = line;
  if (namespace === 'Connection' || namespace === 'BrokerPool' || namespace === 'Cluster') return 'debug';
  // Retries are limited on purpose: a batch that fails them restarts the stream from the
  // confirmed position, which is what keeps nothing lost.
  if (message.startsWith('Limiting retries for the idempotent producer') || message.includes('This server does not host this topic-partition')) return 'debug';
  return kafkajsLevel(line);
}

/**
 * kafkajs's DefaultPartitioner with the keyed case made cheap (see ../partitioner.ts): a key lands
 * on the same partition as with kafkajs or the Java client. Unkeyed messages go to kafkajs's own.
 */
export const keyHashPartitioner: ICustomPartitioner = () => {
  const unkeyed = kafkajs().Partitioners.DefaultPartitioner();
  return (args: PartitionerArgs) => {
    const { message, partitionMetadata } = args;
    if (message.partition !== null && message.partition !== undefined) return message.partition;
    if (message.key === null || message.key === undefined) return unkeyed(args);
    return partitionForKey(message.key, partitionMetadata.length);
  };
};

function groupByTopic(batch: readonly OutgoingMessage[]): TopicMessages[] {
  const byTopic = new Map<string, Message[]>();
  for (const message of batch) {
    let messages = byTopic.get(message.topic);
    if (!messages) byTopic.set(message.topic, (messages = []));
    // The message itself: kafkajs reads key, value and headers (and partition, timestamp: unset).
    messages.push(message);
  }
  return [...byTopic].map(([topic, messages]) => ({ topic, messages }));
}

/** Records in a topic (high minus low watermark over its partitions); 0 if it does not exist. */
export async function countRecords(brokers: readonly string[], topic: string, security?: KafkaSecurity): Promise<number> {
  const admin = kafkajsClient({ clientId: 'outbox-relay-status', brokers, ...(security && { security }), connectionTimeout: 3_000, retry: { retries: 1 } }).admin();
  try {
    await admin.connect();
    if (!(await admin.listTopics()).includes(topic)) return 0;
    const offsets = await admin.fetchTopicOffsets(topic);
    return offsets.reduce((sum, partition) => sum + Number(partition.high) - Number(partition.low), 0);
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

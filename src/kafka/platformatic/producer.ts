import { Admin, CompressionAlgorithms, kListApis, Producer, type MessageToProduce } from '@platformatic/kafka';
import type { KafkaSecurity } from '../../security/kafka-security.js';
import { finishesWithin } from '../../time.js';
import { progressReading } from '../committed-progress.js';
import { kafkaFailure } from '../failure.js';
import { OutageLog } from '../outage-log.js';
import type { KafkaProducerOptions, RecordProducer } from '../ports.js';
import { connectProducer } from '../producer-connect.js';
import type { OutgoingMessage } from '../record.js';
import { createTopicInspector } from '../topic-inspector.js';
import { Transactions } from '../transactions.js';
import { platformaticTopicAdmin, topicMetadata } from './admin.js';
import { readLastCommitted } from './exactly-once.js';
import { DISCONNECT_TIMEOUT_MS, LIBRARY_VERSION, namedPlatformaticError, platformaticClientOptions } from './library.js';
import { murmur2 } from '../partitioner.js';

/**
 * The RecordProducer on @platformatic/kafka (OUTBOX_KAFKA_CLIENT=platformatic): idempotent
 * (the library then keeps one request in flight per connection and acks=all), so a retried
 * request carries its sequence numbers again and the broker drops what it already has; the sink
 * sends one request at a time, so a partition's order is the send order. Keys land where the
 * other clients put them (murmur2, partitioner.ts). Exactly-once: the library's transactions,
 * with the algorithm of ../transactions.ts.
 */

/** A produce request's timeout at the broker (acks=all), as on the other clients. */
const PRODUCE_TIMEOUT_MS = 30_000;

type Message = MessageToProduce<Buffer | string, Buffer | string, string, string>;

const toBuffer = (data?: Buffer | string): Buffer | undefined => (typeof data === 'string' ? Buffer.from(data) : data);

/** Unkeyed records: spread over the partitions in turn (the library reduces the number modulo the partition count). */
let unkeyed = 0;

/**
 * The library reduces the returned number modulo the topic's partition count: murmur2 made
 * positive, then that modulo, is Java's and kafkajs's choice (partitionForKey). The library's own
 * default partitioner makes the hash positive with `>>> 0`, not `& 0x7fffffff`: keys whose hash
 * is negative would land elsewhere than with the other clients.
 */
function keyHashPartitioner(_message: Message, key: Buffer | undefined): number {
  if (key === undefined) return unkeyed++ & 0x7fffffff;
  return murmur2(key) & 0x7fffffff;
}

/** AddPartitionsToTxn from v4 on is for brokers among themselves (KIP-890): a client's needs CLUSTER_ACTION, which an ACL-secured cluster refuses (CLUSTER_AUTHORIZATION_FAILED). */
const ADD_PARTITIONS_TO_TXN_CLIENT_MAX_VERSION = 3;

/**
 * The library's Producer, its transactions on the client's versions of AddPartitionsToTxn: the
 * library picks the highest version both sides have, v5 on Kafka 4, which only a broker may send
 * (with ACLs, exactly-once failed at the first transaction). Capped where the library reads the
 * brokers' API versions. docs/kafka-clients.md names the upstream report.
 */
class RelayProducer<Key, Value, HeaderKey, HeaderValue> extends Producer<Key, Value, HeaderKey, HeaderValue> {
  override [kListApis](callback: Parameters<Producer[typeof kListApis]>[0]): void {
    super[kListApis]((error, apis) => {
      if (error || !apis) return callback(error, apis as never);
      callback(null, apis.map((api) => (api.name === 'AddPartitionsToTxn' ? { ...api, maxVersion: Math.min(api.maxVersion, ADD_PARTITIONS_TO_TXN_CLIENT_MAX_VERSION) } : api)));
    });
  }
}

export function createPlatformaticProducer(options: KafkaProducerOptions): RecordProducer {
  const { logger, exactlyOnce } = options;
  const outage = new OutageLog(logger);
  const base = platformaticClientOptions(options, (operation, error) => {
    // Called before each retry: a produce request Kafka refused or did not answer, sent again.
    if (operation !== 'produce') return;
    const { type, message } = namedPlatformaticError(error);
    options.onRequestFailed?.(type);
    outage.failed({ error: type, detail: message });
  });
  const producer = new RelayProducer<Buffer | string, Buffer | string, string, string>({
    ...base,
    idempotent: true,
    acks: -1,
    // InitProducerId as a new producer (-1, -1): the library sends 0 and 0 when none is given, and
    // a broker that knows the transactional id answers PRODUCER_FENCED to a new session (Kafka
    // takes 0/0 for an earlier producer's id and epoch, KIP-360). docs/kafka-clients.md.
    producerId: -1n,
    producerEpoch: -1,
    // The library sends the transaction timeout in InitProducerId from this option, and the
    // produce timeout from it too: exactly-once, both are OUTBOX_TRANSACTION_TIMEOUT (>= 30 s).
    timeout: exactlyOnce ? exactlyOnce.transactionTimeoutMs : PRODUCE_TIMEOUT_MS,
    requestTimeout: (exactlyOnce ? exactlyOnce.transactionTimeoutMs : PRODUCE_TIMEOUT_MS) + 5_000,
    autocreateTopics: options.autoCreateTopics,
    compression: options.compression === 'none' ? CompressionAlgorithms.NONE : options.compression,
    partitioner: keyHashPartitioner,
    serializers: { key: toBuffer, value: toBuffer, headerKey: toBuffer, headerValue: toBuffer },
    ...(exactlyOnce && { transactionalId: exactlyOnce.transactionalId }),
  });
  const topics = createTopicInspector(platformaticTopicAdmin(base), logger);

  const send = async (messages: readonly OutgoingMessage[], into: Pick<Producer<Buffer | string, Buffer | string, string, string>, 'send'>): Promise<void> => {
    const records: Message[] = new Array(messages.length);
    for (let index = 0; index < messages.length; index++) {
      const { topic, key, value, headers } = messages[index]!;
      records[index] = { topic, key: key ?? undefined, value, headers };
    }
    await into.send({ messages: records });
  };

  let transaction: Awaited<ReturnType<typeof producer.beginTransaction>> | null = null;
  const transactions =
    exactlyOnce &&
    new Transactions(
      {
        begin: async () => {
          transaction = await producer.beginTransaction();
        },
        send: (messages) => send(messages, transaction!),
        sendTombstone: async ({ topic, partition, key }) => {
          await transaction!.send({ messages: [{ topic, partition, key, value: null as unknown as string }] });
        },
        commit: async () => {
          await transaction!.commit();
          transaction = null;
        },
        abort: async () => {
          const failed = transaction;
          transaction = null;
          if (!failed || failed.completed) return;
          // A failed abort leaves the library's transaction open: cancel it here (the next session's fencing aborts it at the broker).
          let aborted = false;
          await finishesWithin(
            failed.abort().then(
              () => (aborted = true),
              () => undefined,
            ),
            DISCONNECT_TIMEOUT_MS,
          );
          if (!aborted) await failed.cancel().catch(() => undefined);
        },
      },
      exactlyOnce,
    );

  return {
    async connect() {
      logger.info({ platformatic: LIBRARY_VERSION, compression: options.compression, transactionalId: exactlyOnce?.transactionalId }, 'producer: @platformatic/kafka');
      await connectProducer(options, topics, {
        // The library connects at its first request: the cluster's metadata, now, so that a refusal (SASL, TLS) is the connect's.
        connect: async () => {
          try {
            await producer.metadata({ topics: [], forceUpdate: true });
          } catch (error) {
            throw namedPlatformaticError(error);
          }
        },
        fence: async () => {
          // InitProducerId for the transactional id is sent at the first transaction: begin one
          // now, and drop it unsent (nothing was added: there is nothing to end at the broker).
          try {
            const first = await producer.beginTransaction();
            await first.cancel();
          } catch (error) {
            throw namedPlatformaticError(error);
          }
        },
      });
    },

    async produce(messages) {
      try {
        await (transactions ? transactions.add(messages) : send(messages, producer));
        outage.acknowledged(messages.length);
      } catch (error) {
        const aborted = transactions ? await transactions.abortFailed() : '';
        throw kafkaFailure(namedPlatformaticError(error), `Kafka did not acknowledge a batch of ${messages.length}${transactions ? ` in a transaction${aborted}` : ''}`, exactlyOnce);
      }
    },

    ...(transactions && {
      commit: async () => {
        try {
          await transactions.commit();
        } catch (error) {
          throw kafkaFailure(namedPlatformaticError((error as Error).cause ?? error), (error as Error).message, exactlyOnce);
        }
      },
    }),

    describeTopic: topics.describeTopic,
    brokersCreateTopics: topics.brokersCreateTopics,

    ...progressReading(
      exactlyOnce,
      PRODUCE_TIMEOUT_MS,
      (topic, key, settle) => readLastCommitted(base, topic, key, settle),
      async (record) => {
        try {
          await transactions!.commitTombstone(record);
        } catch (error) {
          throw namedPlatformaticError(error);
        }
      },
      logger,
    ),

    async disconnect() {
      await finishesWithin(producer.close(true).catch(() => undefined), DISCONNECT_TIMEOUT_MS);
      await finishesWithin(topics.disconnect(), DISCONNECT_TIMEOUT_MS);
    },
  };
}

/** Records in a topic (high minus low watermark over its partitions); 0 if it does not exist. */
export async function countRecordsPlatformatic(brokers: readonly string[], topic: string, security?: KafkaSecurity): Promise<number> {
  const admin = new Admin({ ...platformaticClientOptions({ clientId: 'outbox-relay-status', brokers, ...(security && { security }) }), retries: 1, connectTimeout: 3_000 });
  try {
    const metadata = await topicMetadata(admin, [topic]);
    const described = metadata?.topics.get(topic);
    if (!described) return 0;
    const partitions = described.partitions.map((_, partitionIndex) => partitionIndex);
    const offsets = async (timestamp: bigint) => (await admin.listOffsets({ topics: [{ name: topic, partitions: partitions.map((partitionIndex) => ({ partitionIndex, timestamp })) }] }))[0]?.partitions ?? [];
    const [high, low] = await Promise.all([offsets(-1n), offsets(-2n)]);
    return high.reduce((sum, partition) => sum + Number(partition.offset), 0) - low.reduce((sum, partition) => sum + Number(partition.offset), 0);
  } finally {
    await finishesWithin(admin.close().catch(() => undefined), DISCONNECT_TIMEOUT_MS);
  }
}

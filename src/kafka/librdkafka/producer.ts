import type * as Rdkafka from '@confluentinc/kafka-javascript';
import { RelayError } from '../../errors.js';
import type { OutgoingMessage } from '../record.js';
import { PLAINTEXT, type KafkaSecurity } from '../../security/kafka-security.js';
import { finishesWithin } from '../../time.js';
import { lastCommittedValue, progressReading, type CommittedPartition, type ProgressSettle } from '../committed-progress.js';
import { isKafkaRefusal, kafkaFailure } from '../failure.js';
import { OutageLog } from '../outage-log.js';
import { partitionForKey } from '../partitioner.js';
import type { KafkaProducerOptions, RecordProducer } from '../ports.js';
import { connectProducer } from '../producer-connect.js';
import { createTopicInspector } from '../topic-inspector.js';
import { Transactions } from '../transactions.js';
import { librdkafkaTopicAdmin } from './admin.js';
import { called, CONNECT_TIMEOUT_MS, headerList, DISCONNECT_TIMEOUT_MS, errorNameOfText, librdkafkaSecurity, loadLibrdkafka, logLibrdkafkaLine, namedLibrdkafkaError, type LibrdkafkaLogLine, type RdkafkaConfig } from './binding.js';

/**
 * The RecordProducer on librdkafka (OUTBOX_KAFKA_CLIENT=librdkafka), through its native API
 * (`produce()` with delivery reports): the KafkaJS-compatible API of the same package wraps each
 * message in a promise and rewrites the message objects it is given, for no gain here (the sink
 * already batches and awaits whole requests). librdkafka does what the kafkajs path needed the
 * relay's own code for: idempotence and retries with the same sequence numbers, Java's
 * partitioner (murmur2_random), transactions and fencing. The sink still sends one request at a
 * time; librdkafka's own linger is only long enough to queue a batch (the sink lingers).
 */

/** How long librdkafka retries a message before its delivery report fails it (the batch then fails, and the stream restarts from the confirmed position). */
const MESSAGE_TIMEOUT_MS = 30_000;
const TRANSACTION_CALL_TIMEOUT_MS = 30_000;

/** A produce request's error as librdkafka logs it (debug context msg), before retrying it itself. */
const MESSAGE_SET_ERROR = /encountered error: (.+?) \(actions /;

/** One produce request: settles when librdkafka reported the delivery of every message in it. */
class PendingRequest {
  private remaining: number;
  private failure: unknown = null;
  readonly done: Promise<void>;
  private settle!: (failure: unknown) => void;

  constructor(messages: number) {
    this.remaining = messages;
    this.done = new Promise<void>((resolve, reject) => {
      this.settle = (failure) => (failure ? reject(failure) : resolve());
    });
  }

  delivered(error: Rdkafka.LibrdKafkaError | null | undefined): void {
    if (error) this.failure ??= namedLibrdkafkaError(error);
    this.remaining -= 1;
    if (this.remaining === 0) this.settle(this.failure);
  }

  /** A message librdkafka refused to queue: the ones already queued still report, and then this fails. */
  refused(error: unknown, unqueued: number): void {
    this.failure ??= namedLibrdkafkaError(error);
    this.remaining -= unqueued;
    if (this.remaining === 0) this.settle(this.failure);
  }
}

export function createLibrdkafkaProducer(options: KafkaProducerOptions): RecordProducer {
  const rdkafka = loadLibrdkafka();
  const { logger, exactlyOnce } = options;
  const security = options.security ?? PLAINTEXT;
  const outage = new OutageLog(logger);
  const common: RdkafkaConfig = {
    'bootstrap.servers': options.brokers.join(','),
    'client.id': options.clientId,
    ...librdkafkaSecurity(security),
  };
  const producer = new rdkafka.Producer({
    ...common,
    'enable.idempotence': true,
    acks: -1,
    // Java's and kafkajs's choice for a keyed record (murmur2): librdkafka's default is
    // consistent_random (CRC32), which puts a key elsewhere (test/sink/key-placement.test.ts).
    partitioner: 'murmur2_random',
    // The sink already waits OUTBOX_LINGER for a batch; librdkafka waits only while the batch is
    // being queued. With 0 its broker thread sends the first messages of a batch while the rest are
    // still being produced: measured here (npm run bench -- --quick, 100k events), 1-row drains at
    // 14k events/s and a steady 1k/s at p99 272 ms with 0, 20k and p99 34 ms with 2.
    'linger.ms': 2,
    'batch.num.messages': 100_000,
    'message.max.bytes': Math.max(options.maxMessageBytes, 1_000) + 1_024,
    // The sink bounds what is queued (OUTBOX_MAX_BUFFERED_EVENTS); librdkafka's own bounds must not refuse a request.
    'queue.buffering.max.messages': 2_000_000,
    'queue.buffering.max.kbytes': 2_097_151,
    'message.timeout.ms': MESSAGE_TIMEOUT_MS,
    'socket.timeout.ms': MESSAGE_TIMEOUT_MS,
    'retry.backoff.ms': 200,
    'retry.backoff.max.ms': 2_000,
    'compression.codec': options.compression,
    'allow.auto.create.topics': options.autoCreateTopics,
    dr_cb: true,
    event_cb: true,
    debug: 'msg',
    ...(exactlyOnce && { 'transactional.id': exactlyOnce.transactionalId, 'transaction.timeout.ms': exactlyOnce.transactionTimeoutMs }),
  } as Rdkafka.ProducerGlobalConfig);
  producer.on('delivery-report', (error, report) => (report.opaque as PendingRequest).delivered(error));
  // Errors librdkafka retries itself (a broker down, a connection refused): the outage log and the produce errors metric.
  const requestFailed = (error: unknown) => {
    const { type, message } = namedLibrdkafkaError(error);
    options.onRequestFailed?.(type);
    outage.failed({ error: type, detail: message });
  };
  // A refusal while connecting (SASL, an ACL, the broker's certificate, a token the provider
  // cannot give) ends the connect at once: librdkafka would retry it until the connect timeout.
  let refuseConnect: ((error: unknown) => void) | null = null;
  const refused = new Promise<never>((_, reject) => {
    refuseConnect = reject;
  });
  refused.catch(() => undefined);
  // A refusal after the connect (the idempotent producer's id refused once the first request
  // went out): librdkafka raises a fatal error and purges its queues, and the delivery reports
  // say only _FATAL or _PURGE_QUEUE. The refusal's own words name the cause the relay stops on.
  let refusedAfterConnect: (Error & { type: string }) | null = null;
  const refusal = (error: Error & { type: string }) => {
    if (refuseConnect) refuseConnect(error);
    else refusedAfterConnect ??= error;
  };
  producer.on('event.error', (error: Rdkafka.LibrdKafkaError) => {
    requestFailed(error);
    if (isKafkaRefusal(namedLibrdkafkaError(error))) refusal(namedLibrdkafkaError(error));
  });
  // The OAUTHBEARER token callback's failure comes as the client's 'error' event (the relay's own error, e.g. an expired token).
  (producer as unknown as NodeJS.EventEmitter).on('error', (error: unknown) => {
    logger.warn({ err: (error as Error).message }, 'librdkafka client error');
    refusal(namedLibrdkafkaError(error));
  });
  // librdkafka retries a refused produce request itself and says so only in its debug log
  // (context msg): read there, each refusal is counted and in the outage log, as on kafkajs
  // (e.g. NOT_ENOUGH_REPLICAS while brokers are down). About two lines per partition and request.
  producer.on('event.log', (line: LibrdkafkaLogLine) => {
    if (line.fac === 'MSGSET') {
      const refused = MESSAGE_SET_ERROR.exec(line.message)?.[1];
      if (refused === undefined) return;
      const type = errorNameOfText(refused) ?? 'LIBRDKAFKA_ERROR';
      options.onRequestFailed?.(type);
      outage.failed({ error: type, detail: refused });
    } else {
      const refused = logLibrdkafkaLine(logger, line);
      if (refused) refusal(refused);
    }
  });
  const topics = createTopicInspector(librdkafkaTopicAdmin(rdkafka, common), logger);
  const send = (messages: readonly OutgoingMessage[]): Promise<void> => {
    const request = new PendingRequest(messages.length);
    for (let index = 0; index < messages.length; index++) {
      const message = messages[index]!;
      try {
        producer.produce(message.topic, null, typeof message.value === 'string' ? Buffer.from(message.value) : message.value, message.key, null, request, headerList(message.headers));
      } catch (error) {
        request.refused(error, messages.length - index);
        break;
      }
    }
    return request.done;
  };

  const transactions =
    exactlyOnce &&
    new Transactions(
      {
        begin: () => called((done) => producer.beginTransaction(done)),
        send,
        sendTombstone: ({ topic, partition, key }) => {
          const request = new PendingRequest(1);
          producer.produce(topic, partition, null, key, null, request);
          return request.done;
        },
        commit: () => called((done) => producer.commitTransaction(TRANSACTION_CALL_TIMEOUT_MS, done)),
        abort: async () => {
          await finishesWithin(called((done) => producer.abortTransaction(DISCONNECT_TIMEOUT_MS, done)).catch(() => undefined), DISCONNECT_TIMEOUT_MS);
        },
      },
      exactlyOnce,
    );

  return {
    async connect() {
      logger.info({ librdkafka: rdkafka.librdkafkaVersion, compression: options.compression, transactionalId: exactlyOnce?.transactionalId }, 'producer: librdkafka');
      await connectProducer(options, topics, {
        connect: async () => {
          await Promise.race([called((done) => producer.connect({ timeout: CONNECT_TIMEOUT_MS }, (error) => done(error))), refused]);
          producer.setPollInBackground(true);
        },
        fence: () => Promise.race([called((done) => producer.initTransactions(TRANSACTION_CALL_TIMEOUT_MS, done)), refused]),
      });
      refuseConnect = null;
    },

    async produce(messages) {
      try {
        await (transactions ? transactions.add(messages) : send(messages));
        outage.acknowledged(messages.length);
      } catch (error) {
        // librdkafka retried the request until message.timeout.ms; its delivery reports carry Kafka's last answer (e.g. NOT_ENOUGH_REPLICAS).
        requestFailed(error);
        const aborted = transactions ? await transactions.abortFailed() : '';
        const { type } = namedLibrdkafkaError(error);
        const cause = refusedAfterConnect && (type === '_FATAL' || type === '_PURGE_QUEUE') ? refusedAfterConnect : error;
        throw kafkaFailure(cause, `Kafka did not acknowledge a batch of ${messages.length}${transactions ? ` in a transaction${aborted}` : ''}`, exactlyOnce);
      }
    },

    ...(transactions && { commit: () => transactions.commit() }),

    describeTopic: topics.describeTopic,
    brokersCreateTopics: topics.brokersCreateTopics,

    ...progressReading(exactlyOnce, MESSAGE_TIMEOUT_MS, (topic, key, settle) => readCommittedProgress(rdkafka, common, producer, topic, key, settle), (record) => transactions!.commitTombstone(record), logger),

    async disconnect() {
      await finishesWithin(called((done) => producer.disconnect(DISCONNECT_TIMEOUT_MS, (error) => done(error))).catch(() => undefined), DISCONNECT_TIMEOUT_MS);
      await finishesWithin(topics.disconnect(), DISCONNECT_TIMEOUT_MS);
    },
  };
}

/**
 * The progress partition read as a read_committed consumer without a group (assigned, never
 * committing), its offsets from the admin API with the isolation level asked for.
 */
async function readCommittedProgress(rdkafka: typeof Rdkafka, common: RdkafkaConfig, producer: Rdkafka.Producer, topic: string, key: string, settle: ProgressSettle): Promise<Buffer | null | undefined> {
  const admin = rdkafka.AdminClient.createFrom(producer);
  const described = await called<Rdkafka.TopicDescription[]>((done) => admin.describeTopics([topic], { timeout: CONNECT_TIMEOUT_MS }, done));
  const partition = partitionForKey(key, described[0]?.partitions.length ?? 1);
  const offset = async (spec: Rdkafka.OffsetSpec, isolationLevel: Rdkafka.IsolationLevel) => {
    const [result] = await called<Rdkafka.ListOffsetsResult[]>((done) => admin.listOffsets([{ topic, partition, offset: spec }], { timeout: CONNECT_TIMEOUT_MS, isolationLevel }, done));
    if (result?.error) throw namedLibrdkafkaError(result.error);
    return BigInt(result!.offset);
  };
  const consumer = new rdkafka.KafkaConsumer({
    ...common,
    // Required by librdkafka even without joining a group: assign() joins none, nothing is committed.
    'group.id': `outbox-relay-progress-reader`,
    'enable.auto.commit': false,
    'isolation.level': 'read_committed',
    'enable.partition.eof': true,
  } as Rdkafka.ConsumerGlobalConfig);
  await called((done) => consumer.connect({ timeout: CONNECT_TIMEOUT_MS }, (error) => done(error)));
  try {
    const log: CommittedPartition = {
      topic,
      partition,
      latest: (isolation) => offset(rdkafka.OffsetSpec.LATEST, isolation === 'committed' ? rdkafka.IsolationLevel.READ_COMMITTED : rdkafka.IsolationLevel.READ_UNCOMMITTED),
      earliest: () => offset(rdkafka.OffsetSpec.EARLIEST, rdkafka.IsolationLevel.READ_COMMITTED),
      lastValueIn: (wanted, from, to) => lastValueIn(consumer, topic, partition, wanted, from, to),
    };
    return await lastCommittedValue(log, key, settle);
  } finally {
    await finishesWithin(called((done) => consumer.disconnect((error) => done(error))).catch(() => undefined), DISCONNECT_TIMEOUT_MS);
  }
}

/** Reads [from, to) of the partition: until a record at `to` or later, or the partition's end (below its last stable offset, which the caller waited for). */
async function lastValueIn(consumer: Rdkafka.KafkaConsumer, topic: string, partition: number, key: string, from: bigint, to: bigint): Promise<Buffer | null | undefined> {
  let found: Buffer | null | undefined;
  let atEnd = false;
  const onEof = (eof: Rdkafka.EofEvent) => {
    if (eof.topic === topic && eof.partition === partition) atEnd = true;
  };
  consumer.on('partition.eof', onEof);
  consumer.assign([{ topic, partition, offset: Number(from) }]);
  try {
    const deadline = Date.now() + CONNECT_TIMEOUT_MS;
    while (!atEnd) {
      if (Date.now() > deadline) throw new RelayError('SINK_PUBLISH', `reading ${topic}-${partition} from offset ${from} did not reach offset ${to} in ${CONNECT_TIMEOUT_MS}ms`, { details: { topic, partition } });
      const messages = await called<Rdkafka.Message[]>((done) => consumer.consume(500, done));
      for (const message of messages) {
        if (BigInt(message.offset) >= to) return found;
        if (message.key?.toString() === key) found = message.value ?? null;
      }
    }
    return found;
  } finally {
    consumer.removeListener('partition.eof', onEof);
    consumer.unassign();
  }
}

/** Records in a topic (high minus low watermark over its partitions); 0 if it does not exist. */
export async function countRecordsLibrdkafka(brokers: readonly string[], topic: string, security: KafkaSecurity = PLAINTEXT): Promise<number> {
  const rdkafka = loadLibrdkafka();
  const admin = rdkafka.AdminClient.create({ 'bootstrap.servers': brokers.join(','), 'client.id': 'outbox-relay-status', ...librdkafkaSecurity(security) } as Rdkafka.GlobalConfig);
  try {
    const names = await called<string[]>((done) => admin.listTopics({ timeout: 3_000 }, done));
    if (!names.includes(topic)) return 0;
    const [description] = await called<Rdkafka.TopicDescription[]>((done) => admin.describeTopics([topic], { timeout: 3_000 }, done));
    const partitions = (description?.partitions ?? []).map((info) => info.partition);
    const offsets = (spec: Rdkafka.OffsetSpec) => called<Rdkafka.ListOffsetsResult[]>((done) => admin.listOffsets(partitions.map((partition) => ({ topic, partition, offset: spec })), { timeout: 3_000 }, done));
    const [high, low] = await Promise.all([offsets(rdkafka.OffsetSpec.LATEST), offsets(rdkafka.OffsetSpec.EARLIEST)]);
    return high.reduce((sum, entry) => sum + entry.offset, 0) - low.reduce((sum, entry) => sum + entry.offset, 0);
  } finally {
    admin.disconnect();
  }
}

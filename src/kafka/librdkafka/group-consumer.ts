import { RelayError } from '../../errors.js';
import { finishesWithin, sleep } from '../../time.js';
import { batchRetryWait, HEARTBEAT_INTERVAL_MS, OFFSET_COMMIT_MS, SESSION_TIMEOUT_MS, type ConsumedBatch, type ConsumedMessage, type GroupConsumer, type GroupConsumerEvents, type OpenGroupConsumer, type TopicLister, takeUntilRecorded } from '../group-consumer.js';
import type { KafkaConnection } from '../ports.js';
import { called, CONNECT_TIMEOUT_MS, DISCONNECT_TIMEOUT_MS, librdkafkaSecurity, loadLibrdkafka, logLibrdkafkaLine, namedLibrdkafkaError, type LibrdkafkaLogLine, type Rdkafka } from './binding.js';

/**
 * The group consumer on librdkafka (OUTBOX_KAFKA_CLIENT=librdkafka), through its native
 * KafkaConsumer. librdkafka fetches ahead in its own threads, so the next messages of a
 * partition are already here when the intake has recorded the last ones (kafkajs fetches again
 * only after). Offsets are stored only once recorded (`enable.auto.offset.store` off) and
 * librdkafka commits the stored ones every OFFSET_COMMIT_MS and when the group takes a partition
 * away or the consumer closes.
 */

/** Messages one consume call returns at most. */
const CONSUME_MESSAGES = 1_000;
/** How long a consume call waits for a first message; it returns at once with what is there after that. */
const CONSUME_WAIT_MS = 100;
/** Messages handed to the partitions and not yet taken, at most: the consume loop waits beyond. */
const MAX_BUFFERED = 4 * CONSUME_MESSAGES;
/** librdkafka's own fetched-ahead messages, at most (its default is 64 MiB). */
const PREFETCH_KBYTES = 16 * 1024;
/** The longest a fetch waits for more messages at the broker: what an event may wait there. */
const FETCH_WAIT_MS = 10;
/** Consumers in a group and the cluster's topic list, on librdkafka. */
export function librdkafkaGroupConsumers(connection: KafkaConnection): { readonly open: OpenGroupConsumer; readonly topics: () => TopicLister } {
  return { open: (groupId, events) => new LibrdkafkaGroupConsumer(connection, groupId, events), topics: () => topicLister(connection) };
}

/** One assigned partition's messages waiting to be taken, taken one batch at a time. */
interface PartitionQueue {
  readonly topic: string;
  readonly partition: number;
  waiting: ConsumedMessage[];
  /** The batch being taken, until it settles. */
  taking: Promise<void> | null;
  /** Bumped when the group takes the partition away: a batch of an earlier generation stops. */
  generation: number;
}

class LibrdkafkaGroupConsumer implements GroupConsumer {
  private consumer: Rdkafka.KafkaConsumer | null = null;
  private readonly partitions = new Map<string, PartitionQueue>();
  private readonly assigned = new Set<string>();
  private stopping = false;
  private consuming: Promise<void> = Promise.resolve();
  private buffered = 0;
  private roomMade: (() => void) | null = null;

  constructor(
    private readonly options: KafkaConnection,
    private readonly groupId: string,
    private readonly events: GroupConsumerEvents,
  ) {}

  async start(topics: readonly string[], take: (batch: ConsumedBatch) => Promise<void>): Promise<void> {
    const rdkafka = loadLibrdkafka();
    const { options } = this;
    const consumer = new rdkafka.KafkaConsumer(
      {
        'bootstrap.servers': options.brokers.join(','),
        'client.id': options.clientId,
        ...librdkafkaSecurity(options.security),
        'group.id': this.groupId,
        'isolation.level': 'read_committed',
        'enable.auto.commit': true,
        'auto.commit.interval.ms': OFFSET_COMMIT_MS,
        'enable.auto.offset.store': false,
        'allow.auto.create.topics': false,
        'queued.max.messages.kbytes': PREFETCH_KBYTES,
        // librdkafka fetches again as soon as a fetch answers: at 1,000 events/s, a fetch a
        // message, and the broker spent a quarter of a core on them (measured here). Kafka holds
        // a fetch until 64 KiB are there or FETCH_WAIT_MS passed instead.
        'fetch.min.bytes': 64 * 1024,
        'fetch.wait.max.ms': FETCH_WAIT_MS,
        // Heartbeats come from librdkafka's own thread, whatever a batch waits for: a process
        // killed -9 gives up its partitions SESSION_TIMEOUT_MS after its last one (at 10 s, a
        // restart delivered again after 7.6-9.5 s).
        'session.timeout.ms': SESSION_TIMEOUT_MS,
        'heartbeat.interval.ms': HEARTBEAT_INTERVAL_MS,
        // librdkafka assigns and revokes (eagerly); the 'rebalance' event only keeps count.
        rebalance_cb: true,
        event_cb: true,
      } as Rdkafka.ConsumerGlobalConfig,
      { 'auto.offset.reset': 'earliest' },
    );
    this.consumer = consumer;
    consumer.on('rebalance', (error, assignment) => this.rebalanced(error.code, assignment));
    consumer.on('event.log', (line: LibrdkafkaLogLine) => {
      const refused = logLibrdkafkaLine(options.logger, line);
      if (refused) this.events.failed(refused);
    });
    consumer.on('event.error', (error) => {
      const { message, type } = namedLibrdkafkaError(error);
      options.logger.warn({ err: message, librdkafka: type }, 'librdkafka consumer error; it reconnects by itself');
    });
    await called((done) => consumer.connect({ timeout: CONNECT_TIMEOUT_MS }, (error) => done(error)));
    consumer.setDefaultConsumeTimeout(CONSUME_WAIT_MS);
    consumeWithoutWaitingAfterFirst(consumer);
    consumer.subscribe([...topics]);
    this.consuming = this.consume(consumer, take);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.roomMade?.();
    await this.consuming;
    await Promise.all([...this.partitions.values()].map((queue) => queue.taking));
    const consumer = this.consumer;
    // Closing commits the offsets stored, and leaves the group.
    if (consumer) await finishesWithin(called((done) => consumer.disconnect((error) => done(error))).catch(() => undefined), DISCONNECT_TIMEOUT_MS);
  }

  private rebalanced(code: number, assignment: readonly Rdkafka.TopicPartition[]): void {
    const { ERR__ASSIGN_PARTITIONS, ERR__REVOKE_PARTITIONS } = loadLibrdkafka().CODES.ERRORS;
    if (code === ERR__ASSIGN_PARTITIONS) {
      for (const { topic, partition } of assignment) this.assigned.add(partitionKey(topic, partition));
      this.events.joined();
    } else if (code === ERR__REVOKE_PARTITIONS) {
      for (const { topic, partition } of assignment) {
        const key = partitionKey(topic, partition);
        this.assigned.delete(key);
        const queue = this.partitions.get(key);
        if (!queue) continue;
        // Its next owner reads them again from the committed offset.
        this.release(queue.waiting.length);
        queue.waiting = [];
        queue.generation += 1;
      }
    }
  }

  private async consume(consumer: Rdkafka.KafkaConsumer, take: (batch: ConsumedBatch) => Promise<void>): Promise<void> {
    let failures = 0;
    while (!this.stopping) {
      if (this.buffered >= MAX_BUFFERED) {
        await new Promise<void>((resolve) => (this.roomMade = resolve));
        continue;
      }
      let messages: Rdkafka.Message[];
      try {
        messages = await called<Rdkafka.Message[]>((done) => consumer.consume(CONSUME_MESSAGES, done));
        if (failures > 0 && this.assigned.size > 0) this.events.joined();
        failures = 0;
      } catch (error) {
        if (failures === 0) this.events.failed(error);
        await sleep(batchRetryWait(failures));
        failures += 1;
        continue;
      }
      for (const message of messages) this.queueFor(message.topic, message.partition).waiting.push(consumedMessage(message));
      this.buffered += messages.length;
      for (const queue of this.partitions.values()) {
        if (queue.waiting.length > 0 && !queue.taking) queue.taking = this.takeWaiting(queue, take).finally(() => (queue.taking = null));
      }
    }
  }

  private queueFor(topic: string, partition: number): PartitionQueue {
    const key = partitionKey(topic, partition);
    let queue = this.partitions.get(key);
    if (!queue) {
      queue = { topic, partition, waiting: [], taking: null, generation: 0 };
      this.partitions.set(key, queue);
    }
    return queue;
  }

  /**
   * The partition's waiting messages, one batch after another, until none wait. A batch whose
   * recording failed is taken again from its first message not recorded, after a wait: the
   * partition's order holds, and nothing after a failure is committed before it.
   */
  private async takeWaiting(queue: PartitionQueue, take: (batch: ConsumedBatch) => Promise<void>): Promise<void> {
    const key = partitionKey(queue.topic, queue.partition);
    while (queue.waiting.length > 0) {
      const messages = queue.waiting;
      queue.waiting = [];
      const generation = queue.generation;
      const owned = () => !this.stopping && queue.generation === generation && this.assigned.has(key);
      await takeUntilRecorded({ topic: queue.topic, partition: queue.partition, owned }, messages, take, this.events, (offset) => this.store(queue, offset));
      this.release(messages.length);
    }
  }

  /** The offset after `offset` is the next to read: committed with the next commit. */
  private store(queue: PartitionQueue, offset: string): void {
    try {
      this.consumer?.offsetsStore([{ topic: queue.topic, partition: queue.partition, offset: Number(offset) + 1 }]);
    } catch (error) {
      // The partition was taken away meanwhile: its next owner reads from the committed offset (recorded already, which adds nothing).
      this.options.logger.debug({ topic: queue.topic, partition: queue.partition, offset, err: namedLibrdkafkaError(error).message }, 'offset of a partition no longer assigned not stored');
    }
  }

  private release(messages: number): void {
    this.buffered -= messages;
    if (this.buffered < MAX_BUFFERED) {
      this.roomMade?.();
      this.roomMade = null;
    }
  }
}

/**
 * A consume call of n messages otherwise waits CONSUME_WAIT_MS for each one: at 1,000 events/s
 * it would return a second later with 1,000. The binding's own KafkaJS API sets this (an
 * undocumented method of its KafkaConsumer); another version without it stops the start.
 */
function consumeWithoutWaitingAfterFirst(consumer: Rdkafka.KafkaConsumer): void {
  const setting = (consumer as unknown as { setDefaultIsTimeoutOnlyForFirstMessage?: (on: boolean) => void }).setDefaultIsTimeoutOnlyForFirstMessage;
  if (typeof setting !== 'function') throw new RelayError('SINK_CLIENT', `@confluentinc/kafka-javascript ${loadLibrdkafka().librdkafkaVersion}: its KafkaConsumer has no setDefaultIsTimeoutOnlyForFirstMessage (the webhooks consumer was built on 1.10.1's); use OUTBOX_KAFKA_CLIENT=kafkajs`);
  setting.call(consumer, true);
}

/** The wait before the next try after `failures` failed ones in a row. */

function partitionKey(topic: string, partition: number): string {
  return `${topic}\u0000${partition}`;
}

/** librdkafka's message as the port hands it over (headers by name; a name given twice, a list). */
function consumedMessage(message: Rdkafka.Message): ConsumedMessage {
  const headers: Record<string, Buffer | string | (Buffer | string)[]> = Object.create(null) as Record<string, Buffer>;
  for (const header of message.headers ?? []) {
    for (const [name, value] of Object.entries(header)) {
      const seen = headers[name];
      headers[name] = seen === undefined ? value : [...(Array.isArray(seen) ? seen : [seen]), value];
    }
  }
  const key = message.key;
  return {
    key: key === undefined || key === null ? null : Buffer.isBuffer(key) ? key : Buffer.from(key),
    value: message.value,
    headers,
    offset: String(message.offset),
    timestamp: String(message.timestamp ?? Date.now()),
  };
}

/** The cluster's topics through librdkafka's admin client, made at the first listing. */
function topicLister(connection: KafkaConnection): TopicLister {
  let admin: Rdkafka.IAdminClient | null = null;
  return {
    async listTopics() {
      admin ??= loadLibrdkafka().AdminClient.create({ 'bootstrap.servers': connection.brokers.join(','), 'client.id': connection.clientId, ...librdkafkaSecurity(connection.security) } as Rdkafka.GlobalConfig);
      const client = admin;
      return called<string[]>((done) => client.listTopics({ timeout: CONNECT_TIMEOUT_MS }, done));
    },
    async close() {
      admin?.disconnect();
      admin = null;
    },
  };
}

import { Admin, FetchIsolationLevels, type Consumer, type Message, type MessagesStream } from '@platformatic/kafka';
import { finishesWithin, sleep } from '../../time.js';
import { batchRetryWait, FETCH_BYTES_PER_PARTITION, HEARTBEAT_INTERVAL_MS, OFFSET_COMMIT_MS, SESSION_TIMEOUT_MS, type ConsumedBatch, type ConsumedHeaders, type ConsumedMessage, type GroupConsumer, type GroupConsumerEvents, type OpenGroupConsumer, type TopicLister, takeUntilRecorded } from '../group-consumer.js';
import type { KafkaConnection } from '../ports.js';
import { DISCONNECT_TIMEOUT_MS, namedPlatformaticError, platformaticClientOptions } from './library.js';
import { ReadCommittedConsumer } from './read-committed-consumer.js';

/**
 * The group consumer on @platformatic/kafka (OUTBOX_KAFKA_CLIENT=platformatic), through its
 * messages stream: the library heartbeats from its own timer whatever a batch waits for, and
 * fetches ahead while the stream flows (paused beyond MAX_BUFFERED messages not yet taken).
 * Offsets are never committed by the library (autocommit off): those recorded are committed
 * every OFFSET_COMMIT_MS, and when the consumer stops. At each join the stream reads again from
 * the committed offsets, so what waited for a partition is dropped then (read again, or by its
 * new owner).
 */

/** Messages handed to the partitions and not yet taken, at most: the stream pauses beyond. */
const MAX_BUFFERED = 4_000;
/** The longest a fetch waits at the broker for a first message: what an event may wait there. */
const FETCH_WAIT_MS = 100;
type Consumed = Message<Buffer, Buffer, string, Buffer>;

/** Consumers in a group and the cluster's topic list, on @platformatic/kafka. */
export function platformaticGroupConsumers(connection: KafkaConnection): { readonly open: OpenGroupConsumer; readonly topics: () => TopicLister } {
  return { open: (groupId, events) => new PlatformaticGroupConsumer(connection, groupId, events), topics: () => topicLister(connection) };
}

interface PartitionQueue {
  readonly topic: string;
  readonly partition: number;
  waiting: ConsumedMessage[];
  taking: Promise<void> | null;
  /** Bumped at each join: a batch of an earlier generation stops. */
  generation: number;
  /** The next offset to read after what was recorded, not committed yet. */
  recorded: bigint | null;
}

class PlatformaticGroupConsumer implements GroupConsumer {
  private consumer: Consumer<Buffer, Buffer, string, Buffer> | null = null;
  private stream: MessagesStream<Buffer, Buffer, string, Buffer> | null = null;
  private readonly partitions = new Map<string, PartitionQueue>();
  private assigned = new Set<string>();
  private stopping = false;
  private buffered = 0;
  private committer: NodeJS.Timeout | null = null;
  private committing: Promise<void> = Promise.resolve();
  private streaming: Promise<void> = Promise.resolve();

  constructor(
    private readonly options: KafkaConnection,
    private readonly groupId: string,
    private readonly events: GroupConsumerEvents,
  ) {}

  async start(topics: readonly string[], take: (batch: ConsumedBatch) => Promise<void>): Promise<void> {
    // read_committed as Kafka defines it (read-committed.ts: the library's own filter misses aborted transactions).
    const consumer = new ReadCommittedConsumer<Buffer, Buffer, string, Buffer>({
      ...platformaticClientOptions(this.options),
      groupId: this.groupId,
      // A process killed -9 gives up its partitions SESSION_TIMEOUT_MS after its last heartbeat.
      sessionTimeout: SESSION_TIMEOUT_MS,
      heartbeatInterval: HEARTBEAT_INTERVAL_MS,
      rebalanceTimeout: SESSION_TIMEOUT_MS * 5,
      autocommit: false,
      isolationLevel: FetchIsolationLevels.READ_COMMITTED,
      maxBytesPerPartition: FETCH_BYTES_PER_PARTITION,
      maxBytes: 4 * FETCH_BYTES_PER_PARTITION,
      maxWaitTime: FETCH_WAIT_MS,
      autocreateTopics: false,
      deserializers: { headerKey: (data?: Buffer) => data?.toString() },
    });
    this.consumer = consumer;
    consumer.on('consumer:group:join', ({ assignments }) => this.joined(assignments ?? []));
    consumer.on('consumer:heartbeat:error', ({ error }) => this.options.logger.debug({ err: namedPlatformaticError(error).message }, 'heartbeat failed; the consumer rejoins by itself'));
    this.stream = await this.open(consumer, topics, take);
    this.committer = setInterval(() => void this.commit(), OFFSET_COMMIT_MS);
    this.committer.unref();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.committer) clearInterval(this.committer);
    await Promise.all([...this.partitions.values()].map((queue) => queue.taking));
    await this.commit();
    const { consumer, stream } = this;
    if (stream) await finishesWithin(stream.close().catch(() => undefined), DISCONNECT_TIMEOUT_MS);
    await this.streaming;
    // Closing leaves the group.
    if (consumer) await finishesWithin(consumer.close(true).catch(() => undefined), DISCONNECT_TIMEOUT_MS);
  }

  /** The messages stream, from the committed offsets (a group without any: the beginning); opened again after it failed. */
  private async open(consumer: Consumer<Buffer, Buffer, string, Buffer>, topics: readonly string[], take: (batch: ConsumedBatch) => Promise<void>): Promise<MessagesStream<Buffer, Buffer, string, Buffer>> {
    const stream = await consumer.consume({ topics: [...topics], mode: 'committed', fallbackMode: 'earliest' });
    let failed: unknown = null;
    stream.on('data', (message: Consumed) => this.received(message, take));
    stream.on('error', (error) => (failed = error));
    this.streaming = new Promise<void>((resolve) => stream.once('close', resolve)).then(async () => {
      if (this.stopping) return;
      // The library gave up (its retries spent: a broker down for long): read on from the committed offsets.
      this.events.failed(namedPlatformaticError(failed ?? new Error('the messages stream closed')));
      for (let failures = 0; !this.stopping; failures++) {
        await sleep(batchRetryWait(failures));
        if (this.stopping) return;
        try {
          this.dropWaiting();
          this.stream = await this.open(consumer, topics, take);
          if (this.assigned.size > 0) this.events.joined();
          return;
        } catch (error) {
          if (failures === 0) this.options.logger.warn({ err: namedPlatformaticError(error).message }, 'the webhooks consumer cannot read again yet; retrying');
        }
      }
    });
    return stream;
  }

  private joined(assignments: readonly { readonly topic: string; readonly partitions: readonly number[] }[]): void {
    this.assigned = new Set(assignments.flatMap(({ topic, partitions }) => partitions.map((partition) => partitionKey(topic, partition))));
    // The stream reads every assigned partition again from its committed offset.
    this.dropWaiting();
    this.events.joined();
  }

  private dropWaiting(): void {
    for (const queue of this.partitions.values()) {
      this.release(queue.waiting.length);
      queue.waiting = [];
      queue.generation += 1;
    }
  }

  private received(message: Consumed, take: (batch: ConsumedBatch) => Promise<void>): void {
    const key = partitionKey(message.topic, message.partition);
    let queue = this.partitions.get(key);
    if (!queue) this.partitions.set(key, (queue = { topic: message.topic, partition: message.partition, waiting: [], taking: null, generation: 0, recorded: null }));
    queue.waiting.push(consumedMessage(message));
    this.buffered += 1;
    if (this.buffered >= MAX_BUFFERED) this.stream?.pause();
    const ready = queue;
    // After the current tick: the stream pushes a fetch's messages one by one, taken as one batch.
    if (!ready.taking) ready.taking = Promise.resolve().then(() => this.takeWaiting(ready, take)).finally(() => (ready.taking = null));
  }

  /** The partition's waiting messages, batch after batch; a batch whose recording failed is taken again from its first message not recorded. */
  private async takeWaiting(queue: PartitionQueue, take: (batch: ConsumedBatch) => Promise<void>): Promise<void> {
    const key = partitionKey(queue.topic, queue.partition);
    while (queue.waiting.length > 0) {
      const messages = queue.waiting;
      queue.waiting = [];
      const generation = queue.generation;
      const owned = () => !this.stopping && queue.generation === generation && this.assigned.has(key);
      await takeUntilRecorded({ topic: queue.topic, partition: queue.partition, owned }, messages, take, this.events, (offset) => {
        if (queue.generation === generation) queue.recorded = BigInt(offset) + 1n;
      });
      // A partition taken away meanwhile: its waiting messages were dropped (and released) at the join.
      if (queue.generation === generation) this.release(messages.length);
    }
  }

  private release(messages: number): void {
    this.buffered -= messages;
    if (this.buffered < MAX_BUFFERED && this.stream?.isPaused()) this.stream.resume();
  }

  /** Commits the recorded offsets of the assigned partitions; one commit at a time, a failed one left to the next. */
  private commit(): Promise<void> {
    this.committing = this.committing.then(async () => {
      const consumer = this.consumer;
      const offsets = [...this.partitions.values()].filter((queue) => queue.recorded !== null && this.assigned.has(partitionKey(queue.topic, queue.partition)));
      if (!consumer || offsets.length === 0) return;
      const sent = offsets.map((queue) => ({ queue, offset: queue.recorded! }));
      try {
        await consumer.commit({ offsets: sent.map(({ queue, offset }) => ({ topic: queue.topic, partition: queue.partition, offset, leaderEpoch: -1 })) });
        for (const { queue, offset } of sent) if (queue.recorded === offset) queue.recorded = null;
      } catch (error) {
        // A rebalance under way: committed again after the join (recorded already, which adds nothing if read again).
        this.options.logger.debug({ err: namedPlatformaticError(error).message }, 'offsets not committed yet; again at the next commit');
      }
    });
    return this.committing;
  }
}

function partitionKey(topic: string, partition: number): string {
  return `${topic}\u0000${partition}`;
}

/** The library's message as the port hands it over (headers by name; a name given twice, a list). */
function consumedMessage(message: Consumed): ConsumedMessage {
  const headers: Record<string, Buffer | (Buffer | string)[]> = Object.create(null) as Record<string, Buffer>;
  for (const [name, value] of message.headerEntries) {
    const seen = headers[name];
    headers[name] = seen === undefined ? value : [...(Array.isArray(seen) ? seen : [seen]), value];
  }
  return {
    key: message.key ?? null,
    value: message.value ?? null,
    headers: headers as ConsumedHeaders,
    offset: String(message.offset),
    timestamp: String(message.timestamp),
  };
}

/** The cluster's topics through the library's admin client, made at the first listing. */
function topicLister(connection: KafkaConnection): TopicLister {
  let admin: Admin | null = null;
  return {
    async listTopics() {
      admin ??= new Admin(platformaticClientOptions(connection));
      try {
        return await admin.listTopics();
      } catch (error) {
        throw namedPlatformaticError(error);
      }
    },
    async close() {
      const closing = admin;
      admin = null;
      await closing?.close().catch(() => undefined);
    },
  };
}

import { randomUUID } from 'node:crypto';
import { Kafka, logLevel, type Admin, type Consumer } from 'kafkajs';
// The client's header decoding (and its fix of kafkajs's, installed at import): tests read
// headers exactly as a consumer using outbox-relay/client does.
import { headerText } from '../../src/client/kafkajs-headers.js';
import { inject } from 'vitest';

export interface ConsumedRecord {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
  readonly key: string | null;
  readonly value: Buffer | null;
  readonly headers: Record<string, string>;
}

/** A client of the test Kafka, or of the brokers given (e.g. the three-broker cluster). */
export function kafkaClient(brokers: string = inject('services').kafkaBrokers): Kafka {
  return new Kafka({ clientId: 'outbox-relay-tests', brokers: brokers.split(','), logLevel: logLevel.NOTHING });
}

export async function createTopics(topics: readonly string[], partitions = 3): Promise<void> {
  await createTopicsOn(inject('services').kafkaBrokers, topics, partitions);
}

/** As createTopics, on the brokers given (a broker of the test's own). */
export async function createTopicsOn(brokers: string, topics: readonly string[], partitions = 3): Promise<void> {
  const admin = kafkaClient(brokers).admin();
  await admin.connect();
  try {
    await admin.createTopics({ topics: topics.map((topic) => ({ topic, numPartitions: partitions, replicationFactor: 1 })), waitForLeaders: false });
    await waitForLeaders(admin, topics);
  } finally {
    await admin.disconnect();
  }
}

/**
 * kafkajs's own waitForLeaders gives up at once when the broker it asks has not caught up with
 * the new topic (UNKNOWN_TOPIC_OR_PARTITION, on a busy broker or right after a restart): wait
 * that out like a leader not yet elected, until the deadline.
 */
export async function waitForLeaders(admin: Admin, topics: readonly string[], timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown = null;
  for (;;) {
    try {
      const { topics: found } = await admin.fetchTopicMetadata({ topics: [...topics] });
      if (found.every((topic) => topic.partitions.length > 0 && topic.partitions.every((partition) => partition.leader >= 0))) return;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) throw new Error(`topics ${topics.join(', ')} have no leader for every partition after ${timeoutMs}ms${lastError ? ` (last: ${String(lastError)})` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Reads topics from the beginning into memory, like any consumer that knows nothing of the
 * relay. `records` grows while it runs; `until` waits for a condition on it.
 */
export class TopicReader {
  readonly records: ConsumedRecord[] = [];
  private consumer: Consumer | null = null;

  /**
   * `source`: the test Kafka unless given brokers, or a client (e.g. of the secured Kafka).
   * `readUncommitted`: also records of open and aborted transactions (kafkajs reads committed by default).
   */
  constructor(
    private readonly source?: string | Kafka,
    private readonly readUncommitted = false,
  ) {}

  async start(topics: readonly string[]): Promise<this> {
    const kafka = typeof this.source === 'object' ? this.source : kafkaClient(this.source);
    this.consumer = kafka.consumer({ groupId: `reader-${randomUUID()}`, readUncommitted: this.readUncommitted, retry: { retries: 50, maxRetryTime: 2_000 } });
    await this.consumer.connect();
    await this.consumer.subscribe({ topics: [...topics], fromBeginning: true });
    await this.consumer.run({
      eachBatch: async ({ batch }) => {
        for (const message of batch.messages) {
          this.records.push({
            topic: batch.topic,
            partition: batch.partition,
            offset: message.offset,
            key: message.key?.toString('utf8') ?? null,
            value: message.value,
            headers: headerText(message.headers),
          });
        }
      },
    });
    return this;
  }

  /** `context` adds to the failure message, e.g. the relay's last log lines. */
  async until(what: string, condition: (records: readonly ConsumedRecord[]) => boolean, timeoutMs = 90_000, context: () => string = () => ''): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!condition(this.records)) {
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}; have ${this.records.length} records\n${context()}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  async stop(): Promise<void> {
    await this.consumer?.disconnect();
  }
}


export function eventIds(records: readonly ConsumedRecord[]): string[] {
  return records.map((record) => record.headers.event_id ?? '');
}

import { Kafka, logLevel, type Admin, type Consumer, type KafkaConfig } from 'kafkajs';
import { sleep } from './proc.js';

export class KafkaTools {
  readonly kafka: Kafka;
  private admin: Admin | null = null;

  /** `config`: the brokers, and TLS and SASL for a secured one (kafkaConfigFromEnv). */
  constructor(config: Pick<KafkaConfig, 'brokers' | 'ssl' | 'sasl'>) {
    this.kafka = new Kafka({ clientId: 'bench', ...config, logLevel: logLevel.NOTHING });
  }

  /** The admin client (connected at first use), e.g. for the ACLs of the secured broker. */
  async connected(): Promise<Admin> {
    if (!this.admin) {
      this.admin = this.kafka.admin();
      await this.admin.connect();
    }
    return this.admin;
  }

  /** Topics are created up front (3 partitions, like the stack's default), not on first send. */
  async createTopic(topic: string): Promise<void> {
    const admin = await this.connected();
    await admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 1 }], waitForLeaders: true });
  }

  async deleteTopics(prefix: string): Promise<void> {
    const admin = await this.connected();
    const topics = (await admin.listTopics()).filter((topic) => topic.startsWith(prefix));
    if (topics.length > 0) await admin.deleteTopics({ topics, timeout: 30_000 }).catch(() => undefined);
  }

  /** Records in the topic: sum of the partitions' end offsets (transaction markers count too: see waitForRecords' `count`). */
  async count(topic: string): Promise<number> {
    const admin = await this.connected();
    const offsets = await admin.fetchTopicOffsets(topic);
    return offsets.reduce((sum, partition) => sum + Number(partition.high) - Number(partition.low), 0);
  }

  /**
   * Polls the topic's end offsets until it holds `target` records. Returns when the first
   * records and the last were seen; `onProgress` every ~2 s.
   */
  async waitForRecords(topic: string, target: number, options: { timeoutMs: number; stallMs: number; alive: () => boolean; onProgress: (count: number, rate: number) => void; count?: () => Promise<number> }): Promise<DrainTiming> {
    const count = options.count ?? (() => this.count(topic));
    const deadline = Date.now() + options.timeoutMs;
    let first: { at: number; count: number } | null = null;
    let half: { at: number; count: number } | null = null;
    let lastReport = Date.now();
    let lastCount = 0;
    let lastProgress = { at: Date.now(), count: 0 };
    for (;;) {
      const seen = await count();
      const now = Date.now();
      if (seen > lastProgress.count) lastProgress = { at: now, count: seen };
      if (now - lastProgress.at > options.stallMs) throw new Error(`no progress for ${options.stallMs / 1000} s at ${seen}/${target} records in ${topic}`);
      if (seen > 0 && !first) first = { at: now, count: seen };
      if (seen >= target / 2 && !half) half = { at: now, count: seen };
      if (seen >= target) return { firstAt: first!.at, firstCount: first!.count, halfAt: half!.at, halfCount: half!.count, doneAt: now, count: seen };
      if (now - lastReport >= 2_000) {
        options.onProgress(seen, ((seen - lastCount) * 1000) / (now - lastReport));
        lastReport = now;
        lastCount = seen;
      }
      if (!options.alive()) throw new Error(`contender exited with ${seen}/${target} records in ${topic}`);
      if (now > deadline) throw new Error(`timed out with ${seen}/${target} records in ${topic}`);
      await sleep(50);
    }
  }

  async close(): Promise<void> {
    await this.admin?.disconnect();
    this.admin = null;
  }
}

export interface DrainTiming {
  readonly firstAt: number;
  readonly firstCount: number;
  /** When at least half the records were in (the second half's rate leaves warm-up out). */
  readonly halfAt?: number;
  readonly halfCount?: number;
  readonly doneAt: number;
  readonly count: number;
}

/**
 * Drain rate from the first records seen to the last, so start-up time is not counted. A
 * backlog so small that it was complete at the first look falls back to the time since start.
 */
export function drainRate(timing: DrainTiming, startedAt: number): number {
  if (timing.firstCount < timing.count && timing.doneAt > timing.firstAt) return (timing.count - timing.firstCount) / ((timing.doneAt - timing.firstAt) / 1000);
  return timing.count / ((timing.doneAt - startedAt) / 1000);
}

/**
 * Reads a topic and matches each record's event id header against the commit times the load
 * generator recorded: commit-to-consumer latency, as an application consumer would see it.
 */
export class LatencyConsumer {
  private consumer: Consumer;
  readonly latencies: number[] = [];
  /** The commit time of each of `latencies` (same index). */
  readonly commitAts: number[] = [];
  /** Commit to the record's CreateTime (set by the producer when it built the request). */
  readonly toProduce: number[] = [];
  private readonly seenBeforeCommit = new Map<string, number>();
  received = 0;
  /** Set if the consumer crashed (kafkajs then stops consuming). */
  crash: string | null = null;

  constructor(
    kafka: Kafka,
    private readonly topic: string,
    private readonly idHeader: string,
    private readonly commitTimes: Map<string, number>,
  ) {
    this.consumer = kafka.consumer({ groupId: `bench-latency-${topic}`, maxWaitTimeInMs: 100, sessionTimeout: 30_000 });
    this.consumer.on(this.consumer.events.CRASH, (event) => {
      this.crash = String((event.payload as { error?: unknown }).error);
    });
  }

  async start(): Promise<void> {
    await this.consumer.connect();
    await this.consumer.subscribe({ topic: this.topic, fromBeginning: true });
    await this.consumer.run({
      // A fresh group that reads from the beginning needs no committed offsets; kafkajs would
      // otherwise commit them between fetches, and that wait would count as the contender's.
      autoCommit: false,
      eachBatchAutoResolve: true,
      eachBatch: async ({ batch }) => {
        const now = Date.now();
        for (const message of batch.messages) {
          const id = message.headers?.[this.idHeader]?.toString();
          if (!id) continue;
          this.received += 1;
          const committed = this.commitTimes.get(id);
          if (committed === undefined) this.seenBeforeCommit.set(id, now);
          else {
            // Matched once: a long run (the soak) keeps no map of every event it committed.
            this.commitTimes.delete(id);
            this.latencies.push(now - committed);
            this.commitAts.push(committed);
            this.toProduce.push(Number(message.timestamp) - committed);
          }
        }
      },
    });
  }

  /** The generator calls this when a commit returns after its record was already consumed. */
  committed(id: string, at: number): void {
    const seen = this.seenBeforeCommit.get(id);
    if (seen === undefined) return;
    this.seenBeforeCommit.delete(id);
    this.commitTimes.delete(id);
    this.latencies.push(Math.max(0, seen - at));
    this.commitAts.push(at);
  }

  async stop(): Promise<void> {
    await this.consumer.disconnect();
  }
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const index = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return sorted[Math.max(0, index)]!;
}

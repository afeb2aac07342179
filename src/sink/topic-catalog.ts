import type { Logger } from 'pino';
import { PoisonEventError } from '../errors.js';
import type { RecordProducer, TopicDescription } from '../kafka/ports.js';
import { durabilityProblems } from '../kafka/topic-durability.js';

export interface TopicCatalogOptions {
  /** The relay's own bound on a record (OUTBOX_MAX_MESSAGE_BYTES). */
  readonly maxMessageBytes: number;
  /** Whether a topic that does not exist is created at its first record. */
  readonly autoCreate: boolean;
  readonly logger: Logger;
}

/** A topic found missing is looked up again after this long (someone may have created it). */
const MISSING_RECHECK_MS = 30_000;

type Entry =
  | { readonly kind: 'known'; readonly limit: number }
  | { readonly kind: 'missing'; readonly until: number; readonly why: string }
  /** Missing, to be created by its first record: described again once Kafka acknowledged one. */
  | { readonly kind: 'auto-created'; readonly limit: number };

/**
 * What the relay knows of each topic it produces to, learned from the broker the first time an
 * event is routed there (topics come from the events, so they are not known at start):
 * - the largest record the topic takes: its own max.message.bytes, not one global number, so a
 *   record the broker would refuse forever is a dead letter (SINK_TOO_LARGE) naming the topic;
 * - whether it exists: with auto-creation off (OUTBOX_KAFKA_AUTO_CREATE_TOPICS=false, or brokers
 *   whose auto.create.topics.enable is false, as managed services run them), an event for a
 *   missing topic is a dead letter (SINK_TOPIC_MISSING) and the stream goes on, instead of a
 *   session that restarts forever and holds up every other topic's events;
 * - whether its replication settings keep acknowledged events: a warning naming what allows loss.
 */
export class TopicCatalog {
  private readonly entries = new Map<string, Entry>();
  private readonly pending = new Map<string, Promise<Entry>>();
  /** Auto-created topics not yet seen acknowledged: while 0, `acknowledged` costs nothing. */
  private awaitingCreation = 0;

  constructor(
    private readonly kafka: Pick<RecordProducer, 'describeTopic' | 'brokersCreateTopics'>,
    private readonly options: TopicCatalogOptions,
  ) {}

  /**
   * The largest record, in bytes, the topic takes; a promise the first time a topic is seen.
   * Throws (or rejects with) a SINK_TOPIC_MISSING poison error for a missing topic that will not
   * be created.
   */
  recordLimit(topic: string): number | Promise<number> {
    const entry = this.entries.get(topic);
    if (entry && (entry.kind !== 'missing' || entry.until > Date.now())) return this.limitOf(topic, entry);
    let pending = this.pending.get(topic);
    if (!pending) {
      pending = this.learn(topic).finally(() => this.pending.delete(topic));
      this.pending.set(topic, pending);
    }
    return pending.then((learned) => this.limitOf(topic, learned));
  }

  /** Kafka acknowledged these records: an auto-created topic among them is checked now that it exists. */
  acknowledged(records: readonly { readonly topic: string }[]): void {
    if (this.awaitingCreation === 0) return;
    for (const { topic } of records) {
      const entry = this.entries.get(topic);
      if (entry?.kind !== 'auto-created') continue;
      this.awaitingCreation -= 1;
      this.entries.set(topic, { kind: 'known', limit: entry.limit });
      this.kafka.describeTopic(topic).then(
        (description) => description && this.checkDurability(topic, description),
        (error: unknown) => this.couldNotDescribe(topic, error),
      );
    }
  }

  private async learn(topic: string): Promise<Entry> {
    const { maxMessageBytes, autoCreate } = this.options;
    let entry: Entry;
    try {
      const description = await this.kafka.describeTopic(topic);
      const why = description ? null : !autoCreate ? 'OUTBOX_KAFKA_AUTO_CREATE_TOPICS is false' : (await this.kafka.brokersCreateTopics()) === false ? 'the brokers do not create topics (auto.create.topics.enable=false)' : null;
      if (description) {
        this.checkDurability(topic, description);
        entry = { kind: 'known', limit: Math.min(maxMessageBytes, description.maxMessageBytes) };
      } else if (why === null) {
        this.awaitingCreation += 1;
        entry = { kind: 'auto-created', limit: maxMessageBytes };
      } else {
        this.options.logger.warn({ topic }, `topic ${topic} does not exist and ${why}: its events go to the dead-letter topic until it is created`);
        entry = { kind: 'missing', until: Date.now() + MISSING_RECHECK_MS, why };
      }
    } catch (error) {
      // No permission to describe, a broker hiccup: the relay's own bound still holds.
      this.couldNotDescribe(topic, error);
      entry = { kind: 'known', limit: maxMessageBytes };
    }
    this.entries.set(topic, entry);
    return entry;
  }

  private limitOf(topic: string, entry: Entry): number {
    if (entry.kind !== 'missing') return entry.limit;
    throw new PoisonEventError('SINK_TOPIC_MISSING', `topic "${topic}" does not exist and ${entry.why}; create it, then replay the event`, { details: { topic } });
  }

  private checkDurability(topic: string, description: TopicDescription): void {
    const { replicationFactor, minInsyncReplicas, uncleanLeaderElection } = description;
    const durability = { replicationFactor, minInsyncReplicas, uncleanLeaderElection };
    const problems = durabilityProblems(durability);
    if (problems.length > 0) this.options.logger.warn({ topic, ...durability, problems }, `topic ${topic} can lose acknowledged events or stall: ${problems.join('; ')}`);
    else this.options.logger.info({ topic, ...durability }, `topic ${topic}: replication settings keep acknowledged events`);
  }

  private couldNotDescribe(topic: string, error: unknown): void {
    this.options.logger.warn({ topic, err: (error as Error).message }, "could not read the topic's settings (replication, max.message.bytes) to check them");
  }
}

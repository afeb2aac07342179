import type { Logger } from 'pino';
import type { TopicDurability } from './producer.js';

/**
 * Why Kafka could lose a record it acknowledged with acks=all, or stop taking writes when one
 * broker is down; empty when the topic is set up as the relay needs. The relay confirms the slot
 * once Kafka acknowledged: a record lost after that is lost for good.
 */
export function durabilityProblems({ replicationFactor, minInsyncReplicas, uncleanLeaderElection }: TopicDurability): string[] {
  const problems: string[] = [];
  const copiesAtAck = Math.min(replicationFactor, minInsyncReplicas);
  if (copiesAtAck < 2) {
    problems.push(`an acknowledged record may exist on one broker only (replication.factor=${replicationFactor}, min.insync.replicas=${minInsyncReplicas}; need both >= 2) and is lost with that broker's disk`);
  } else if (replicationFactor <= minInsyncReplicas) {
    problems.push(`writes stop whenever one broker is down (replication.factor=${replicationFactor} <= min.insync.replicas=${minInsyncReplicas}; use replication.factor 3 with min.insync.replicas 2)`);
  }
  if (uncleanLeaderElection) problems.push('unclean.leader.election.enable=true lets a replica that missed acknowledged records become leader and drop them');
  return problems;
}

/**
 * Checks each topic once, after the first batch Kafka acknowledged on it (topics come from the
 * events, so they are not known at start, and a first batch may create one), and warns about
 * settings that allow loss. Never blocks or fails the stream: a relay without permission to
 * describe configs says so once and goes on.
 */
export class TopicDurabilityCheck {
  private readonly checked = new Set<string>();

  constructor(
    private readonly describe: (topic: string) => Promise<TopicDurability>,
    private readonly logger: Logger,
  ) {}

  /** Starts the check of topics not seen before, in the background. */
  checkNew(topics: Iterable<string>): void {
    for (const topic of topics) {
      if (this.checked.has(topic)) continue;
      this.checked.add(topic);
      this.describe(topic).then(
        (durability) => {
          const problems = durabilityProblems(durability);
          if (problems.length > 0) this.logger.warn({ topic, ...durability, problems }, `topic ${topic} can lose acknowledged events or stall: ${problems.join('; ')}`);
          else this.logger.info({ topic, ...durability }, `topic ${topic}: replication settings keep acknowledged events`);
        },
        (error: unknown) => this.logger.warn({ topic, err: (error as Error).message }, "could not read the topic's replication settings to check them"),
      );
    }
  }
}

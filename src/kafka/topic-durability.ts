import type { TopicDurability } from './ports.js';

/**
 * Why Kafka could lose a record it acknowledged with acks=all, or stop taking writes when one
 * broker is down; empty when the topic is set up as the relay needs. The relay confirms the slot
 * once Kafka acknowledged: a record lost after that is lost for good.
 */
export function durabilityProblems({ replicationFactor, minInsyncReplicas, uncleanLeaderElection }: TopicDurability): string[] {
  const problems: string[] = [];
  if (minInsyncReplicas > replicationFactor) {
    return [`no write can ever be acknowledged (min.insync.replicas=${minInsyncReplicas} exceeds replication.factor=${replicationFactor}): every produce fails with NOT_ENOUGH_REPLICAS; lower min.insync.replicas or add replicas`];
  }
  const copiesAtAck = Math.min(replicationFactor, minInsyncReplicas);
  if (copiesAtAck < 2) {
    problems.push(`an acknowledged record may exist on one broker only (replication.factor=${replicationFactor}, min.insync.replicas=${minInsyncReplicas}; need both >= 2) and is lost with that broker's disk`);
  } else if (replicationFactor <= minInsyncReplicas) {
    problems.push(`writes stop whenever one broker is down (replication.factor=${replicationFactor} <= min.insync.replicas=${minInsyncReplicas}; use replication.factor 3 with min.insync.replicas 2)`);
  }
  if (uncleanLeaderElection) problems.push('unclean.leader.election.enable=true lets a replica that missed acknowledged records become leader and drop them');
  return problems;
}

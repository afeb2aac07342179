import { describe, expect, it } from 'vitest';
import { durabilityProblems } from './topic-durability.js';

describe('topic durability', () => {
  it('accepts what production topics should have: 3 replicas, 2 in sync, no unclean election', () => {
    expect(durabilityProblems({ replicationFactor: 3, minInsyncReplicas: 2, uncleanLeaderElection: false })).toEqual([]);
  });

  it('names an acknowledged record held by one broker only', () => {
    for (const [replicationFactor, minInsyncReplicas] of [[1, 1], [3, 1]] as const) {
      expect(durabilityProblems({ replicationFactor, minInsyncReplicas, uncleanLeaderElection: false })).toEqual([expect.stringMatching(/one broker only \(replication.factor=\d, min.insync.replicas=\d/)]);
    }
  });

  it('names a topic that can never acknowledge a write: more replicas must be in sync than exist', () => {
    expect(durabilityProblems({ replicationFactor: 1, minInsyncReplicas: 2, uncleanLeaderElection: false })).toEqual([expect.stringMatching(/no write can ever be acknowledged \(min.insync.replicas=2 exceeds replication.factor=1\)/)]);
  });

  it('names a topic whose writes stop while one broker is down', () => {
    expect(durabilityProblems({ replicationFactor: 2, minInsyncReplicas: 2, uncleanLeaderElection: false })).toEqual([expect.stringMatching(/writes stop whenever one broker is down/)]);
  });

  it('names unclean leader election', () => {
    expect(durabilityProblems({ replicationFactor: 3, minInsyncReplicas: 2, uncleanLeaderElection: true })).toEqual([expect.stringMatching(/^unclean.leader.election.enable=true/)]);
  });
});

import { execFile, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll } from 'vitest';
import { kafkaClient, waitForLeaders } from './kafka.js';

const run = promisify(execFile);
const STACK_SCRIPT = fileURLToPath(new URL('../../scripts/stack.sh', import.meta.url));
const NODES = ['controller', 'broker1', 'broker2', 'broker3'] as const;

export type BrokerId = 1 | 2 | 3;

/**
 * The three-broker cluster of the local stack (`scripts/stack.sh up cluster`: a KRaft
 * controller and three brokers from the same jars as the single node). It always comes from
 * the stack script, whatever provides the other services: the tests kill and restart its
 * brokers, which needs Java and Maven but no Docker. Started for the test file unless already
 * running, and stopped after it in that case (OUTBOX_KEEP_STACK=true keeps it).
 */
export class KafkaCluster {
  brokers = '';
  private startedHere = false;

  async start(): Promise<void> {
    const status = spawnSync(STACK_SCRIPT, ['status'], { encoding: 'utf8' }).stdout.split('\n');
    const running = NODES.every((node) => status.some((line) => line.startsWith(`${node} `) && line.includes(' up ')));
    if (!running) {
      process.stdout.write('starting the three-broker cluster (scripts/stack.sh up cluster)\n');
      const started = spawnSync(STACK_SCRIPT, ['up', 'cluster'], { stdio: 'inherit' });
      if (started.status !== 0) throw new Error(`could not start the Kafka cluster with ${STACK_SCRIPT} up cluster (exit ${started.status}); see .stack/logs/broker*.log`);
      this.startedHere = true;
    }
    const { stdout } = await run(STACK_SCRIPT, ['env']);
    const line = stdout.split('\n').find((entry) => entry.startsWith('KAFKA_CLUSTER_BROKERS='));
    if (!line) throw new Error('scripts/stack.sh env did not print KAFKA_CLUSTER_BROKERS');
    this.brokers = line.slice(line.indexOf('=') + 1);
    await this.untilAllBrokersServe();
  }

  /**
   * A broker answers as soon as it started, before the controller counts it in: topics with
   * three replicas can be created only once all three are registered and unfenced.
   */
  async untilAllBrokersServe(timeoutMs = 60_000): Promise<void> {
    const admin = kafkaClient(this.brokers).admin();
    await admin.connect();
    try {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const { brokers } = await admin.describeCluster();
        if (brokers.length === 3) return;
        if (Date.now() > deadline) throw new Error(`the cluster has ${brokers.length} of 3 brokers after ${timeoutMs}ms; see .stack/logs/broker*.log`);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    } finally {
      await admin.disconnect();
    }
  }

  async stop(): Promise<void> {
    if (!this.startedHere || process.env.OUTBOX_KEEP_STACK === 'true') return;
    spawnSync(STACK_SCRIPT, ['down', 'cluster'], { stdio: 'inherit' });
  }

  /** kill -9 (a crash), stop (SIGTERM: Kafka's controlled shutdown) or start one broker. */
  async broker(action: 'kill' | 'stop' | 'start', id: BrokerId): Promise<void> {
    await run(STACK_SCRIPT, [action, `broker${id}`], { timeout: 180_000 });
  }

  /** Creates topics as production ones should be (3 replicas, 2 in sync for a write, no unclean election), unless told otherwise. */
  async createTopics(topics: readonly string[], { partitions = 6, replicationFactor = 3, minInsyncReplicas = 2 } = {}): Promise<void> {
    const admin = kafkaClient(this.brokers).admin();
    await admin.connect();
    try {
      await admin.createTopics({
        // Waited for below: kafkajs's own wait fails at once when the broker it asks has not
        // caught up with the new topic (right after a broker restart).
        waitForLeaders: false,
        topics: topics.map((topic) => ({
          topic,
          numPartitions: partitions,
          replicationFactor,
          configEntries: [
            { name: 'min.insync.replicas', value: String(minInsyncReplicas) },
            { name: 'unclean.leader.election.enable', value: 'false' },
          ],
        })),
      });
      await waitForLeaders(admin, topics, 60_000);
    } finally {
      await admin.disconnect();
    }
  }

  /** The broker leading each of a topic's partitions now, by partition. */
  async leadersOf(topic: string): Promise<BrokerId[]> {
    const admin = kafkaClient(this.brokers).admin();
    await admin.connect();
    try {
      const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
      return [...(topics[0]?.partitions ?? [])]
        .sort((a, b) => a.partitionId - b.partitionId)
        .map(({ partitionId, leader }) => {
          if (leader !== 1 && leader !== 2 && leader !== 3) throw new Error(`partition ${topic}-${partitionId} has leader ${String(leader)}`);
          return leader;
        });
    } finally {
      await admin.disconnect();
    }
  }
}

/** The cluster, started before the file's tests and stopped after them. */
export function useKafkaCluster(): KafkaCluster {
  const cluster = new KafkaCluster();
  beforeAll(() => cluster.start());
  afterAll(() => cluster.stop());
  return cluster;
}

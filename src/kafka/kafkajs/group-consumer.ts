import type { Admin, Consumer, Kafka } from './kafkajs.js';
import { kafkajsClient } from './client.js';
import { FETCH_BYTES_PER_PARTITION, HEARTBEAT_INTERVAL_MS, OFFSET_COMMIT_MS, SESSION_TIMEOUT_MS, type GroupConsumer, type OpenGroupConsumer, type TopicLister } from '../group-consumer.js';
import type { KafkaConnection } from '../ports.js';

/**
 * The group consumer on kafkajs (OUTBOX_KAFKA_CLIENT=kafkajs). kafkajs fetches again only once
 * every partition's batch of the last fetch was taken, and restarts a consumer that crashed
 * (a batch that failed) from the offsets resolved so far.
 */

/**
 * The longest a fetch waits at the broker for a first message (kafkajs's default is 5 s). kafkajs
 * heartbeats after a fetch that brought nothing: an idle consumer went 5 s between heartbeats,
 * too near SESSION_TIMEOUT_MS. A fetch answers as soon as a message is there, so this adds no
 * latency, only an empty fetch a second while idle.
 */
const FETCH_WAIT_MS = 1_000;

/**
 * A batch that records nothing for this long stops keeping the session (keepSession): the group
 * hands its partitions to another member, as librdkafka does with a consumer that stops
 * consuming (its max.poll.interval.ms, 5 minutes by default). Far beyond any wait of a healthy
 * chunk (slots: 5 s at most; Postgres), and beyond an event fanned out to thousands of endpoints.
 */
const MAX_SILENT_BATCH_MS = 300_000;

/** Consumers in a group and the cluster's topic list, on one kafkajs client (its connections shared). */
export function kafkajsGroupConsumers(connection: KafkaConnection): { readonly open: OpenGroupConsumer; readonly topics: () => TopicLister } {
  const kafka = kafkajsClient({ ...connection, log: { logger: connection.logger } });
  return { open: groupConsumer(kafka), topics: () => topicLister(kafka.admin()) };
}

function groupConsumer(kafka: Kafka): OpenGroupConsumer {
  return (groupId, events): GroupConsumer => {
    let consumer: Consumer | null = null;
    return {
      async start(topics, take) {
        consumer = kafka.consumer({
          groupId,
          readUncommitted: false,
          allowAutoTopicCreation: false,
          maxBytesPerPartition: FETCH_BYTES_PER_PARTITION,
          maxBytes: 4 * FETCH_BYTES_PER_PARTITION,
          maxWaitTimeInMs: FETCH_WAIT_MS,
          // A process killed -9 gives up its partitions SESSION_TIMEOUT_MS after its last
          // heartbeat (kafkajs's default, 30 s, was the whole of a restart's wait); keepSession
          // heartbeats through long batches, so the shorter session does not make the group flap.
          sessionTimeout: SESSION_TIMEOUT_MS,
          heartbeatInterval: HEARTBEAT_INTERVAL_MS,
        });
        consumer.on(consumer.events.GROUP_JOIN, () => events.joined());
        consumer.on(consumer.events.CRASH, ({ payload }) => events.failed(payload.error));
        await consumer.connect();
        await consumer.subscribe({ topics: [...topics], fromBeginning: true });
        // Offsets are resolved only once recorded; kafkajs commits the resolved ones at most every
        // OFFSET_COMMIT_MS (and when the group rebalances or the consumer stops).
        await consumer.run({
          autoCommit: true,
          autoCommitInterval: OFFSET_COMMIT_MS,
          eachBatchAutoResolve: false,
          partitionsConsumedConcurrently: 4,
          eachBatch: async ({ batch, resolveOffset, commitOffsetsIfNecessary, heartbeat, isRunning, isStale }) => {
            let progress = Date.now();
            const kept = keepSession(heartbeat, () => progress);
            try {
              await take({
                topic: batch.topic,
                partition: batch.partition,
                messages: batch.messages,
                async recorded(offset) {
                  progress = Date.now();
                  resolveOffset(offset);
                  await commitOffsetsIfNecessary();
                  // Also where a rebalance the timer saw ends the batch (kafkajs then rejoins).
                  await heartbeat();
                },
                owned: () => isRunning() && !isStale(),
              });
            } finally {
              kept.stop();
            }
          },
        });
      },
      async stop() {
        await consumer?.disconnect();
      },
    };
  };
}

/**
 * kafkajs heartbeats only from its consumer loop: after a fetch that brought nothing, after each
 * batch, and when the handler calls heartbeat() (the intake does after each recorded chunk). A
 * chunk can wait seconds, for free slots (up to 5 s, the dispatcher's MAX_RESERVE_WAIT_MS), for
 * its first attempts, for Postgres: with the gaps as long as the session the group would
 * rebalance under a busy process (5.0 s between heartbeats measured with a slow endpoint). While
 * a batch is taken, this calls the batch's heartbeat() twice an interval; kafkajs sends one only
 * once HEARTBEAT_INTERVAL_MS passed since the last that succeeded, and shares one in flight.
 *
 * A failed one (the group is rebalancing, the member is unknown) is left to the consumer loop:
 * kafkajs has not counted it as sent, so the batch's next recorded chunk sends one again, which
 * fails the batch the same way and makes kafkajs rejoin, as without this timer.
 */
function keepSession(heartbeat: () => Promise<void>, lastProgress: () => number): { stop(): void } {
  const timer = setInterval(() => {
    if (Date.now() - lastProgress() <= MAX_SILENT_BATCH_MS) heartbeat().catch(() => undefined);
  }, HEARTBEAT_INTERVAL_MS / 2);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

/** The cluster's topics through kafkajs's admin; connecting again is a no-op while connected, and reconnects after an outage. */
function topicLister(admin: Admin): TopicLister {
  return {
    async listTopics() {
      await admin.connect();
      return admin.listTopics();
    },
    close: () => admin.disconnect(),
  };
}

import type { Consumer, Kafka } from 'kafkajs';
import { FETCH_BYTES_PER_PARTITION, OFFSET_COMMIT_MS, type IntakeConsumer, type OpenIntakeConsumer } from './intake-consumer.js';

/**
 * The intake's consumer on kafkajs (OUTBOX_KAFKA_CLIENT=kafkajs). kafkajs fetches again only once
 * every partition's batch of the last fetch was taken, and restarts a consumer that crashed
 * (a batch that failed) from the offsets resolved so far.
 */
export function kafkajsIntakeConsumer(kafka: Kafka): OpenIntakeConsumer {
  return (groupId, events): IntakeConsumer => {
    let consumer: Consumer | null = null;
    return {
      async start(topics, take) {
        consumer = kafka.consumer({ groupId, readUncommitted: false, allowAutoTopicCreation: false, maxBytesPerPartition: FETCH_BYTES_PER_PARTITION, maxBytes: 4 * FETCH_BYTES_PER_PARTITION });
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
          eachBatch: ({ batch, resolveOffset, commitOffsetsIfNecessary, heartbeat, isRunning, isStale }) =>
            take({
              topic: batch.topic,
              partition: batch.partition,
              messages: batch.messages,
              async recorded(offset) {
                resolveOffset(offset);
                await commitOffsetsIfNecessary();
                await heartbeat();
              },
              owned: () => isRunning() && !isStale(),
            }),
        });
      },
      async stop() {
        await consumer?.disconnect();
      },
    };
  };
}

import type { Admin } from 'kafkajs';

// Apart from kafka.ts, which loads kafkajs as it is: a test that opens the relay's own kafkajs
// client (its fork installed first) cannot load kafkajs before it.

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

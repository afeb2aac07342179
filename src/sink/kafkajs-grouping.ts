import { createRequire } from 'node:module';

/**
 * kafkajs 2.2.4 (its last release) groups a produce batch by partition by copying the
 * partition's array for every message it adds — quadratic in the batch size; at 4,000 events
 * per request it was a tenth of the relay's CPU. This installs the same grouping, linear, in
 * the module cache before kafkajs's producer loads it. Imported first by kafka-sink.ts; if a
 * kafkajs release moves the file, nothing is replaced and kafkajs keeps its own.
 */
type Partitioner = (args: { topic: string; partitionMetadata: unknown[]; message: unknown }) => number;

function groupMessagesPerPartition({ topic, partitionMetadata, messages, partitioner }: { topic: string; partitionMetadata: unknown[]; messages: unknown[]; partitioner: Partitioner }): Record<number, unknown[]> {
  const grouped: Record<number, unknown[]> = {};
  if (partitionMetadata.length === 0) return grouped;
  for (const message of messages) {
    const partition = partitioner({ topic, partitionMetadata, message });
    (grouped[partition] ??= []).push(message);
  }
  return grouped;
}

const require = createRequire(import.meta.url);
try {
  const path = require.resolve('kafkajs/src/producer/groupMessagesPerPartition.js');
  require(path);
  const cached = require.cache[path];
  if (cached) cached.exports = groupMessagesPerPartition;
} catch {
  // Another kafkajs layout: its own grouping stays.
}

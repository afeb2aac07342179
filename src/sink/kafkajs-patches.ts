import { createRequire } from 'node:module';
import { crc32c, encodeRecord } from './kafkajs-record.js';

/**
 * kafkajs 2.2.4 (its last release, pinned in package.json) spends most of the relay's produce
 * CPU in three internal functions; this puts faster equivalents of them in kafkajs's module
 * cache before kafkajs loads them (imported first by cli.ts and kafka-sink.ts):
 * - partition grouping, which copied the partition's array for every message it added
 *   (quadratic: at 4,000 events per request a tenth of the relay's CPU), made linear;
 * - record encoding and the record batch checksum (see kafkajs-record.ts).
 * Each produces what the original did (kafkajs-patches.test.ts checks against the originals).
 * If a kafkajs release moves a file, that one is not replaced and kafkajs keeps its own.
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

/** kafkajs module path -> what it should export. */
export const KAFKAJS_REPLACEMENTS: Readonly<Record<string, unknown>> = {
  'kafkajs/src/producer/groupMessagesPerPartition.js': groupMessagesPerPartition,
  'kafkajs/src/protocol/recordBatch/record/v0/index.js': encodeRecord,
  'kafkajs/src/protocol/recordBatch/crc32C/index.js': crc32c,
};

const require = createRequire(import.meta.url);
for (const [module, replacement] of Object.entries(KAFKAJS_REPLACEMENTS)) {
  try {
    const path = require.resolve(module);
    require(path);
    const cached = require.cache[path];
    if (cached) cached.exports = replacement;
  } catch {
    // Another kafkajs layout: its own function stays.
  }
}

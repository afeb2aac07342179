import { createRequire } from 'node:module';
import { KAFKAJS_PRODUCE_V3, produceRequestV3 } from './kafkajs-produce-request.js';

/**
 * kafkajs 2.2.4 (its last release, pinned in package.json) spent most of the relay's produce
 * CPU in two internal modules; this puts faster equivalents in kafkajs's module cache before
 * kafkajs loads them (imported first by cli.ts and kafka-sink.ts):
 * - partition grouping, which copied the partition's array for every message it added
 *   (quadratic: at 4,000 events per request a tenth of the relay's CPU), made linear;
 * - the Produce request encoder (see kafkajs-produce-request.ts).
 * Each produces what the original did (the tests check against the originals). If a kafkajs
 * release moves a file, that one is not replaced and kafkajs keeps its own.
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
  [KAFKAJS_PRODUCE_V3]: produceRequestV3,
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

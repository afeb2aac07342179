import type { HeaderBlock } from './record-format.js';
import { utf8Length } from './utf8.js';

/**
 * Bytes a record takes in a Kafka record batch, estimated from above: key, value and the
 * encoded headers, plus the most the record's own varints and attributes can take.
 */
const RECORD_OVERHEAD = 24;

export function recordSize(key: Buffer | string | null, value: Buffer | string, headers: HeaderBlock): number {
  return RECORD_OVERHEAD + byteLength(key) + byteLength(value) + headers.length;
}

function byteLength(bytes: Buffer | string | null): number {
  if (bytes === null) return 0;
  return typeof bytes === 'string' ? utf8Length(bytes) : bytes.length;
}

/** The fixed part of a record batch (its header), which counts against the broker's limit too. */
export const RECORD_BATCH_OVERHEAD =
  8 + 4 + 4 + 1 + 4 + // first offset, length, partition leader epoch, magic, CRC
  2 + 4 + 8 + 8 + 8 + 2 + 4 + 4; // attributes, last offset delta, timestamps, producer id and epoch, first sequence, record count

/**
 * Bytes a record takes in a Kafka record batch, estimated from above: key, value, header names
 * and values, plus the varints and attributes of the record and of each header.
 */
const RECORD_OVERHEAD = 24;
const HEADER_OVERHEAD = 6;

export function recordSize(key: Buffer | string | null, value: Buffer | string, headers: Readonly<Record<string, string>>): number {
  let size = RECORD_OVERHEAD + (key === null ? 0 : Buffer.byteLength(key)) + Buffer.byteLength(value);
  for (const name in headers) size += HEADER_OVERHEAD + Buffer.byteLength(name) + Buffer.byteLength(headers[name]!);
  return size;
}

/** The fixed part of a record batch (its header), which counts against the broker's limit too. */
export const RECORD_BATCH_OVERHEAD = 61;

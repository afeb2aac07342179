import { createRequire } from 'node:module';
import type { IHeaders, Kafka } from 'kafkajs';
import { OutboxClientError } from './errors.js';

/**
 * kafkajs 2.2.4 decodes a record's headers by merging them into a plain object
 * (src/protocol/recordBatch/record/v0/decoder.js): `obj[key] === undefined ? value : [obj[key],
 * value]`. A header named like a member of Object.prototype finds the inherited member, so
 * `constructor: "c"` arrives as `[Object, <c>]` and `__proto__` as `[Object.prototype, <p>]`.
 * The consumer helper replaces that decoder, in kafkajs's module cache, with the same decoder
 * that looks only at the headers it has already read. Every other header decodes as before (a
 * plain object, an array for a repeated name), for every kafkajs consumer of the process.
 *
 * kafkajs's record batch decoder captures the record decoder when it loads, at the first fetch
 * of the process, so the replacement goes in when this module is imported (the client entry
 * point imports it). Whether that worked is checked when a consumer starts
 * (`verifyKafkajsHeaders`), by decoding a record batch through kafkajs's own batch decoder: a
 * consumer that fetched before the import, another kafkajs version or a moved file stops the
 * start instead of delivering headers changed.
 */

const KAFKAJS_VERSION = '2.2.4';
const RECORD_DECODER = 'kafkajs/src/protocol/recordBatch/record/v0/decoder.js';
/** Captures RECORD_DECODER when it loads; what Fetch v4+ responses decode with. */
const BATCH_DECODER = 'kafkajs/src/protocol/recordBatch/v0/decoder.js';

const require = createRequire(import.meta.url);

interface Long {
  add(other: Long | number): Long;
  toString(): string;
}

interface KafkajsDecoder {
  readInt8(): number;
  readVarInt(): number;
  readVarLong(): Long;
  readVarIntBytes(): Buffer | null;
  readVarIntArray<T>(decode: (decoder: KafkajsDecoder) => T): T[];
}

interface BatchContext {
  readonly firstOffset?: string;
  readonly firstTimestamp?: string;
  readonly magicByte?: number;
  readonly isControlBatch?: boolean;
  readonly timestampType?: number;
  readonly maxTimestamp?: string;
}

type HeaderValue = Buffer | null;

/** kafkajs's record decoder, line for line, but for how the headers are merged. */
function decodeRecord(decoder: KafkajsDecoder, batchContext: BatchContext = {}) {
  const { Long, HeaderDecoder, LOG_APPEND_TIME } = kafkajsParts();
  const { firstOffset, firstTimestamp, magicByte, isControlBatch = false, timestampType, maxTimestamp } = batchContext;
  const attributes = decoder.readInt8();
  const timestampDelta = decoder.readVarLong();
  const timestamp = timestampType === LOG_APPEND_TIME && maxTimestamp ? maxTimestamp : Long.fromValue(firstTimestamp).add(timestampDelta).toString();
  const offsetDelta = decoder.readVarInt();
  const offset = Long.fromValue(firstOffset).add(offsetDelta).toString();
  const key = decoder.readVarIntBytes();
  const value = decoder.readVarIntBytes();
  const headers = mergeHeaders(decoder.readVarIntArray(HeaderDecoder));
  return { magicByte, attributes, timestamp, offset, key, value, headers, isControlRecord: isControlBatch, batchContext };
}

/** Headers as kafkajs gives them (an array for a repeated name), each name an own property. */
export function mergeHeaders(entries: readonly { readonly key: string; readonly value: HeaderValue }[]): IHeaders {
  const headers: Record<string, HeaderValue | HeaderValue[]> = {};
  for (const { key, value } of entries) {
    const earlier = Object.hasOwn(headers, key) ? headers[key] : undefined;
    const merged = earlier === undefined ? value : Array.isArray(earlier) ? [...earlier, value] : [earlier, value];
    // defineProperty, not assignment: `headers.__proto__ = value` would set the prototype.
    Object.defineProperty(headers, key, { value: merged, enumerable: true, writable: true, configurable: true });
  }
  return headers as IHeaders;
}

/** Header values as text (a repeated name's values joined by commas), in an object without a prototype. */
export function headerText(headers: IHeaders | undefined): Record<string, string> {
  const result = Object.create(null) as Record<string, string>;
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (value === undefined) continue;
    result[name] = Array.isArray(value) ? value.map(String).join(',') : String(value);
  }
  return result;
}

let parts: { Long: { fromValue(value: unknown): Long }; HeaderDecoder: (decoder: KafkajsDecoder) => { key: string; value: HeaderValue }; LOG_APPEND_TIME: number } | undefined;

/** kafkajs's own pieces, loaded at the first record (a missing file is reported by the check). */
function kafkajsParts(): NonNullable<typeof parts> {
  parts ??= {
    Long: require('kafkajs/src/utils/long.js') as NonNullable<typeof parts>['Long'],
    HeaderDecoder: require('kafkajs/src/protocol/recordBatch/header/v0/decoder.js') as NonNullable<typeof parts>['HeaderDecoder'],
    LOG_APPEND_TIME: (require('kafkajs/src/protocol/timestampTypes.js') as { LOG_APPEND_TIME: number }).LOG_APPEND_TIME,
  };
  return parts;
}

/** What went wrong while installing, reported by verifyKafkajsHeaders (an import must not throw). */
const installProblems = install();

function install(): string[] {
  const path = resolveOrNull(RECORD_DECODER);
  if (!path) return [`kafkajs has no ${RECORD_DECODER}`];
  const batchPath = resolveOrNull(BATCH_DECODER);
  const problems = batchPath && require.cache[batchPath] ? [`${BATCH_DECODER} was loaded (a consumer fetched) before outbox-relay/client was imported: import it before kafkajs consumes`] : [];
  require(path);
  require.cache[path]!.exports = decodeRecord;
  return problems;
}

/** The names whose decoding the check proves, and one ordinary name. */
const PROBE_HEADERS = ['constructor', 'toString', 'hasOwnProperty', 'valueOf', '__proto__', 'event_id'];

/**
 * Throws CONSUMER_KAFKAJS (not retriable) unless kafkajs, as `kafka` uses it, delivers every
 * header name exactly as produced: the replacement is installed, and a record batch with
 * Object.prototype header names, encoded and decoded by kafkajs's own batch code, comes back
 * unchanged.
 */
export async function verifyKafkajsHeaders(kafka: Kafka): Promise<void> {
  const problems = [...installProblems];
  const version = (require('kafkajs/package.json') as { version: string }).version;
  if (version !== KAFKAJS_VERSION) problems.push(`kafkajs ${version} is installed, the consumer helper needs ${KAFKAJS_VERSION} exactly`);
  const path = resolveOrNull(RECORD_DECODER);
  if (path && require.cache[path]?.exports !== decodeRecord) problems.push(`kafkajs's ${RECORD_DECODER} is not the consumer helper's any more`);
  if (!(kafka instanceof (require('kafkajs') as { Kafka: abstract new (...args: never[]) => Kafka }).Kafka)) problems.push(`the Kafka client given is not from the kafkajs at ${resolveOrNull('kafkajs') ?? '(none)'}, the one outbox-relay/client fixed`);
  if (problems.length === 0) {
    const wrong = await roundTripProblem().catch((error: unknown) => `decoding a record batch failed: ${(error as Error).message}`);
    if (wrong) problems.push(wrong);
  }
  if (problems.length > 0) {
    throw new OutboxClientError('CONSUMER_KAFKAJS', `the consumer cannot deliver headers exactly as produced: ${problems.join('; ')}. kafkajs ${KAFKAJS_VERSION} alone changes headers named like Object.prototype members (constructor, toString, __proto__ ...)`);
  }
}

type KafkajsEncoder = { readonly buffer: Buffer };

/** Encodes one record with the probe headers and decodes it as a Fetch response would. */
async function roundTripProblem(): Promise<string | undefined> {
  const encodeRecord = require('kafkajs/src/protocol/recordBatch/record/v0/index.js') as (record: { key: Buffer | null; value: Buffer; headers: Record<string, Buffer> }) => KafkajsEncoder;
  const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0/index.js') as { RecordBatch: (batch: { records: KafkajsEncoder[] }) => Promise<KafkajsEncoder> };
  const Decoder = require('kafkajs/src/protocol/decoder.js') as new (buffer: Buffer) => unknown;
  const decodeBatch = require(BATCH_DECODER) as (decoder: unknown) => Promise<{ records: { headers: IHeaders }[] }>;
  const produced = Object.create(null) as Record<string, Buffer>;
  for (const name of PROBE_HEADERS) produced[name] = Buffer.from(`value of ${name}`);
  const batch = await RecordBatch({ records: [encodeRecord({ key: null, value: Buffer.from('probe'), headers: produced })] });
  const headers = (await decodeBatch(new Decoder(batch.buffer))).records[0]?.headers ?? {};
  const wrong = PROBE_HEADERS.filter((name) => {
    const value = Object.hasOwn(headers, name) ? headers[name] : undefined;
    return !Buffer.isBuffer(value) || !value.equals(produced[name]!);
  });
  return wrong.length > 0 ? `kafkajs decodes the headers ${wrong.join(', ')} changed` : undefined;
}

function resolveOrNull(module: string): string | null {
  try {
    return require.resolve(module);
  } catch {
    return null;
  }
}

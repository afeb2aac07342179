/**
 * Replaces kafkajs 2.2.4's Produce request v3 (kafkajs/src/protocol/requests/produce/v3/request.js):
 * versions 3 to 7 (kafkajs builds 4-7 from 3), encoded into one buffer of the exact size.
 * kafkajs 2.2.4 copies every message into a new object, encodes each record and header into its
 * own 512-byte zero-filled buffer, then copies the whole batch through a growing buffer at each
 * of five nesting levels and checksums it a byte at a time: with that, Kafka encoding was over a
 * third of the relay's CPU. Same bytes (checked against kafkajs's own encoder by
 * fork/install.test.ts); compressed batches, which the relay does not send, are left to kafkajs.
 */
import { crc32c, RecordArea, writeRecord, type RecordFields } from '../../../../../../record-format.js';
import { RECORD_BATCH_OVERHEAD } from '../../../../../../record-size.js';
import { REQUEST_HEADER_ROOM, type EncodedBody } from '../../../request.js';

interface Long {
  readonly value: bigint;
}

interface ProduceMessage extends RecordFields {
  readonly timestamp?: number | string | null;
}

interface PartitionData {
  readonly partition: number;
  readonly firstSequence?: number;
  readonly messages: readonly ProduceMessage[];
}

interface TopicData {
  readonly topic: string;
  readonly partitions: readonly PartitionData[];
}

export interface ProduceRequestArgs {
  readonly acks: number;
  readonly timeout: number;
  readonly transactionalId?: string | null;
  /** kafkajs passes the id it read from the broker as a decimal string; -1 (a number) without one. */
  readonly producerId?: Long | number | string;
  readonly producerEpoch?: number;
  readonly compression?: number;
  readonly topicData: readonly TopicData[];
}

/** What kafkajs's request framing takes (`buf` to check it is an encoder's, `buffer` the body), with room to frame it in place. */
interface EncodedPayload extends EncodedBody {
  readonly buf: Buffer;
}

export interface ProduceRequest {
  readonly apiKey: number;
  readonly apiVersion: number;
  readonly apiName: 'Produce';
  expectResponse(): boolean;
  encode(): Promise<EncodedPayload>;
}

/** The kafkajs module this one replaces. */
export const KAFKAJS_PRODUCE_V3 = 'kafkajs/src/protocol/requests/produce/v3/request.js';

const PRODUCE_API_KEY = 0;
const NO_COMPRESSION = 0;
const MAGIC_BYTE = 2;
const TRANSACTIONAL_ATTRIBUTE = 16;

/** Whether the relay's encoder writes this request: compressed batches are kafkajs's own encoder's (../../../../install.ts). */
export function encodesProduceRequest(args: ProduceRequestArgs): boolean {
  return (args.compression ?? NO_COMPRESSION) === NO_COMPRESSION;
}

export function produceRequestV3(args: ProduceRequestArgs): ProduceRequest {
  if (!encodesProduceRequest(args)) throw new Error(`the relay's Produce v3 encoder writes uncompressed batches only (compression ${args.compression}): kafkajs's own encodes this one`);
  return {
    apiKey: PRODUCE_API_KEY,
    apiVersion: 3,
    apiName: 'Produce',
    expectResponse: () => args.acks !== 0,
    // A throw becomes a rejection, as from kafkajs's async encoder.
    encode: () => new Promise((resolve) => resolve(encodeProduce(args))),
  };
}

function encodeProduce({ acks, timeout, transactionalId = null, producerId = -1, producerEpoch = 0, topicData }: ProduceRequestArgs): EncodedPayload {
  const producer = typeof producerId === 'object' ? producerId.value : BigInt(producerId);
  const attributes = transactionalId ? TRANSACTIONAL_ATTRIBUTE : 0;
  // Records first, into the record area: the request's size is then known and written once.
  records.end = 0;
  const batches = topicData.map(({ partitions }) => partitions.map((data) => encodeRecords(data.messages)));
  let size = sizeOfString(transactionalId) + 2 + 4 + 4;
  topicData.forEach(({ topic, partitions }, t) => {
    size += sizeOfString(topic) + 4;
    partitions.forEach((_, p) => (size += 4 + 4 + RECORD_BATCH_OVERHEAD + batches[t]![p]!.bytes));
  });
  // The request header goes in front of it without a copy (fork/protocol/request.ts).
  const buf = Buffer.allocUnsafe(REQUEST_HEADER_ROOM + size).subarray(REQUEST_HEADER_ROOM);
  let at = writeString(buf, 0, transactionalId);
  at = buf.writeInt16BE(acks, at);
  at = buf.writeInt32BE(timeout, at);
  at = buf.writeInt32BE(topicData.length, at);
  topicData.forEach(({ topic, partitions }, t) => {
    at = writeString(buf, at, topic);
    at = buf.writeInt32BE(partitions.length, at);
    partitions.forEach(({ partition, firstSequence = 0 }, p) => {
      const { count, start, bytes, firstTimestamp, maxTimestamp } = batches[t]![p]!;
      const batchLength = RECORD_BATCH_OVERHEAD + bytes;
      at = buf.writeInt32BE(partition, at);
      at = buf.writeInt32BE(batchLength, at);
      at = buf.writeBigInt64BE(0n, at); // first offset: the broker assigns offsets
      at = buf.writeInt32BE(batchLength - 8 - 4, at);
      at = buf.writeInt32BE(0, at); // partition leader epoch
      at = buf.writeInt8(MAGIC_BYTE, at);
      const crcAt = at;
      const checked = (at += 4);
      at = buf.writeInt16BE(attributes, at);
      at = buf.writeInt32BE(count - 1, at); // last offset delta
      at = buf.writeBigInt64BE(firstTimestamp, at);
      at = buf.writeBigInt64BE(maxTimestamp, at);
      at = buf.writeBigInt64BE(producer, at);
      at = buf.writeInt16BE(producerEpoch, at);
      at = buf.writeInt32BE(firstSequence, at);
      at = buf.writeInt32BE(count, at);
      at += records.buf.copy(buf, at, start, start + bytes);
      buf.writeUInt32BE(crc32c(buf.subarray(checked, at)), crcAt);
    });
  });
  // A rare large request (OUTBOX_MAX_MESSAGE_BYTES raised) does not keep its area.
  if (records.buf.length > MAX_KEPT_AREA) records.buf = Buffer.allocUnsafe(64 * 1024);
  return { buf, buffer: buf, headerRoom: REQUEST_HEADER_ROOM };
}

/** Every request's records, before they are copied into it (grown to the largest request, up to MAX_KEPT_AREA). */
const records = new RecordArea(64 * 1024);
const MAX_KEPT_AREA = 4 * 1024 * 1024;

interface EncodedRecords {
  readonly count: number;
  /** Where the partition's records are in the record area. */
  readonly start: number;
  readonly bytes: number;
  readonly firstTimestamp: bigint;
  readonly maxTimestamp: bigint;
}

/** A partition's records. Timestamps as kafkajs sets them: the messages' own, else now. */
function encodeRecords(messages: readonly ProduceMessage[]): EncodedRecords {
  const now = Date.now();
  // kafkajs sorts the given timestamps with Array#sort's default, text order: kept as it is.
  const given = messages.map((message) => message.timestamp).filter((timestamp) => timestamp !== null && timestamp !== undefined).sort();
  const first = given.length === 0 ? now : given[0]!;
  const max = given.length === 0 ? now : given[given.length - 1]!;
  const start = records.end;
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!;
    writeRecord(message, i, Number(message.timestamp || now) - Number(first), records);
  }
  return { count: messages.length, start, bytes: records.end - start, firstTimestamp: BigInt(first), maxTimestamp: BigInt(max) };
}

function sizeOfString(text: string | null): number {
  return text === null ? 2 : 2 + Buffer.byteLength(text, 'utf8');
}

function writeString(buf: Buffer, at: number, text: string | null): number {
  if (text === null) return buf.writeInt16BE(-1, at);
  const next = buf.writeInt16BE(Buffer.byteLength(text, 'utf8'), at);
  return next + buf.write(text, next, 'utf8');
}

import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { kafkajs } from '../kafkajs.js';
import { KAFKAJS_PRODUCE_V3, type ProduceRequest, type ProduceRequestArgs } from './protocol/requests/produce/v3/request.js';
import { KAFKAJS_REPLACEMENTS, verifyKafkajsPatches } from './install.js';
import { createSendMessages, KAFKAJS_SEND_MESSAGES } from './producer/sendMessages.js';
import { crc32c, crc32cByTables, encodeHeaders } from '../../record-format.js';
import { KAFKAJS_REQUEST, REQUEST_HEADER_ROOM, type EncodedBody, type RequestToFrame } from './protocol/request.js';

const require = createRequire(import.meta.url);
// Installs the replacements, as the relay does: kafkajs loaded through the one module that loads it.
kafkajs();

/** What kafkajs's module exports now (the replacement, if installed). */
function installed<T>(module: string): T {
  return require(module) as T;
}

/** kafkajs's own export of the module, loaded fresh from disk, leaving the cache as it was. */
function original<T>(module: string): T {
  const path = require.resolve(module);
  const cached = require.cache[path];
  delete require.cache[path];
  try {
    return require(path) as T;
  } finally {
    if (cached) require.cache[path] = cached;
  }
}

describe('kafkajs internals replaced in its module cache', () => {
  it('installs every replacement, before kafkajs captured the originals', () => {
    for (const [module, replacement] of Object.entries(KAFKAJS_REPLACEMENTS)) expect(installed(module), module).toBe(replacement);
    expect(verifyKafkajsPatches({ fastEncoder: true })).toEqual(['send-messages', 'produce-encoder']);
  });

  it("turns the Produce encoder off on request, never the per-partition send", () => {
    try {
      expect(verifyKafkajsPatches({ fastEncoder: false })).toEqual(['send-messages']);
      expect(installed(KAFKAJS_SEND_MESSAGES)).toBe(createSendMessages);
    } finally {
      verifyKafkajsPatches({ fastEncoder: true });
    }
  });

  it('refuses to run on another kafkajs version', () => {
    const path = require.resolve('kafkajs/package.json');
    require(path);
    const module = require.cache[path]!;
    const real = module.exports as unknown;
    module.exports = { version: '2.2.5' };
    try {
      expect(() => verifyKafkajsPatches({ fastEncoder: true })).toThrow(expect.objectContaining({ code: 'SINK_CLIENT', retriable: false, message: expect.stringMatching(/kafkajs 2.2.5 is installed, the relay needs 2.2.4 exactly/) }));
    } finally {
      module.exports = real;
    }
  });

  it('refuses to run when a replacement is gone', () => {
    const path = require.resolve(KAFKAJS_SEND_MESSAGES);
    const module = require.cache[path]!;
    const ours = module.exports as unknown;
    module.exports = original(KAFKAJS_SEND_MESSAGES);
    try {
      expect(() => verifyKafkajsPatches({ fastEncoder: true })).toThrow(expect.objectContaining({ code: 'SINK_CLIENT', message: expect.stringMatching(/sendMessages.js is not the relay's/) }));
    } finally {
      module.exports = ours;
    }
  });

  describe('Produce request', () => {
    afterEach(() => vi.restoreAllMocks());
    const Long = require('kafkajs/src/utils/long.js') as { fromInt(value: number): unknown; fromValue(value: unknown): unknown };
    const ours = () => installed<(args: ProduceRequestArgs) => ProduceRequest>(KAFKAJS_PRODUCE_V3);
    const theirs = () => original<(args: ProduceRequestArgs) => ProduceRequest>(KAFKAJS_PRODUCE_V3);

    async function expectSameBytes(args: ProduceRequestArgs): Promise<void> {
      vi.spyOn(Date, 'now').mockReturnValue(1_764_460_800_123);
      const [mine, kafkajs] = [ours()(args), theirs()(args)];
      expect(mine.apiKey).toBe(kafkajs.apiKey);
      expect(mine.apiVersion).toBe(kafkajs.apiVersion);
      expect(mine.expectResponse()).toBe(kafkajs.expectResponse());
      const [a, b] = [(await mine.encode()).buffer, (await kafkajs.encode()).buffer];
      expect(a.length).toBe(b.length);
      expect(a.equals(b)).toBe(true);
    }

    const event = (i: number) => {
      const headers = { event_id: `0b3c5a9e-0000-4000-8000-${String(i).padStart(12, '0')}`, event_type: 'invoice.paid', aggregate_type: 'invoice', outbox_commit_lsn: '0/4A1B2C3D', created_at: '2026-11-30T01:08:21.123Z' };
      // As the relay sends them: the headers (kafkajs's encoder reads them) and their encoded block (the relay's).
      return { key: `inv_${i % 17}`, value: `{"invoice_id": "inv-${i}", "amount_minor": ${i * 7919}, "note": "${'x'.repeat(i % 300)}"}`, headers, headerBlock: encodeHeaders(headers) };
    };

    it('encodes a relay batch byte for byte as kafkajs does', async () => {
      await expectSameBytes({
        acks: -1, timeout: 30_000, producerId: '4321', producerEpoch: 3,
        topicData: [{ topic: 'billing.invoice', partitions: [{ partition: 0, firstSequence: 42, messages: Array.from({ length: 4_000 }, (_, i) => event(i)) }] }],
      });
    });

    it('and every other shape kafkajs accepts: topics, partitions, null and binary fields, header lists, timestamps, transactions', async () => {
      await expectSameBytes({
        acks: 1, timeout: 5_000, transactionalId: 'tx-ü', producerId: Long.fromValue('9007199254740993') as never, producerEpoch: 0,
        topicData: [
          { topic: 'a', partitions: [
            { partition: 2, firstSequence: 2 ** 31 - 1, messages: [{ key: null, value: Buffer.from([0, 1, 2]) }, { key: Buffer.from('k'), value: null, headers: {} }] },
            { partition: 0, messages: [{ key: 'ключ', value: 'значение €', headers: { 'заголовок': 'ü', repeated: ['a', Buffer.from('b')] } }] },
          ] },
          { topic: 'b.ü', partitions: [{ partition: 1, messages: [
            { key: 'k', value: 'v', timestamp: 1_764_460_800_000 },
            { key: 'k', value: randomBytes(20_000), timestamp: '1764460700000', headers: { empty: '' } },
            { key: 'k', value: 'late', timestamp: 1_764_460_900_000 },
            { key: 'k', value: 'none' },
          ] }] },
        ],
      });
      await expectSameBytes({ acks: 1, timeout: 1, producerId: Long.fromInt(77) as never, topicData: [{ topic: 't', partitions: [{ partition: 0, messages: [{ value: 'x' }] }] }] });
      await expectSameBytes({ acks: 0, timeout: 1, topicData: [{ topic: 't', partitions: [{ partition: 0, messages: [{ value: '' }] }] }] });
    });

    it('agrees with kafkajs on 200 random requests', async () => {
      let seed = 42;
      const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
      const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
      const text = () => pick(['', 'a', 'inv_42', 'ü€🙂', 'x'.repeat(Math.floor(random() * 400)), randomBytes(8).toString('hex')]);
      const bytesOrText = () => pick<Buffer | string | null>([null, text(), randomBytes(Math.floor(random() * 100))]);
      const headers = () => Object.fromEntries(Array.from({ length: Math.floor(random() * 6) }, (_, i) => [`h${i}${text().slice(0, 3)}`, pick<Buffer | string | string[]>([text(), Buffer.from(text()), [text(), text()]])]));
      // Text-only headers (what the relay sends) half the time with their encoded block as well.
      const withHeaders = (all: Record<string, Buffer | string | string[]>) => {
        const texts = Object.values(all).every((value) => typeof value === 'string');
        return texts && random() < 0.5 ? { headers: all, headerBlock: encodeHeaders(all as Record<string, string>) } : { headers: all };
      };
      for (let run = 0; run < 200; run++) {
        const topicData = Array.from({ length: 1 + Math.floor(random() * 3) }, (_, t) => ({
          topic: `topic-${t}${pick(['', '.ü'])}`,
          partitions: Array.from({ length: 1 + Math.floor(random() * 3) }, (_, partition) => ({
            partition,
            firstSequence: Math.floor(random() * 1_000_000),
            messages: Array.from({ length: 1 + Math.floor(random() * 20) }, () => ({
              key: bytesOrText(),
              value: bytesOrText(),
              ...withHeaders(headers()),
              ...(random() < 0.2 ? { timestamp: 1_764_460_000_000 + Math.floor(random() * 1_000_000) } : {}),
            })),
          })),
        }));
        await expectSameBytes({ acks: pick([-1, 1]), timeout: 30_000, transactionalId: pick([null, 'tx']), producerId: String(Math.floor(random() * 1e9)), producerEpoch: Math.floor(random() * 100), topicData });
        vi.restoreAllMocks();
      }
    });

    it('leaves compressed batches to kafkajs', async () => {
      const args = { acks: -1, timeout: 30_000, compression: 1, topicData: [{ topic: 't', partitions: [{ partition: 0, messages: [event(1), event(2)] }] }] };
      await expectSameBytes(args);
    });
  });

  describe('request framing', () => {
    type Framing = (request: RequestToFrame) => Promise<{ readonly buffer: Buffer }>;
    const Encoder = require('kafkajs/src/protocol/encoder.js') as new () => { writeInt32(value: number): unknown; writeString(value: string): unknown; buffer: Buffer };
    const produce = () => installed<(args: ProduceRequestArgs) => ProduceRequest>(KAFKAJS_PRODUCE_V3)({
      acks: -1, timeout: 30_000, topicData: [{ topic: 'billing.invoice', partitions: [{ partition: 3, messages: [{ key: 'inv_1', value: 'x'.repeat(3_000) }] }] }],
    });

    /** Whether two buffers overlap in memory (small Buffers may share Node's allocation pool, so the same ArrayBuffer is not enough). */
    const sharesMemory = (a: Buffer, b: Buffer) => a.buffer === b.buffer && a.byteOffset < b.byteOffset + b.length && b.byteOffset < a.byteOffset + a.length;

    async function expectSameFrame(request: RequestToFrame['request'], clientId: string | null): Promise<Buffer> {
      const [mine, kafkajs] = await Promise.all([installed<Framing>(KAFKAJS_REQUEST), original<Framing>(KAFKAJS_REQUEST)].map((frame) => frame({ correlationId: 2_147_000_001, clientId, request })));
      expect(mine!.buffer.equals(kafkajs!.buffer), `client id ${clientId}`).toBe(true);
      return mine!.buffer;
    }

    it("frames the relay's Produce request in the room left before it, as kafkajs frames it", async () => {
      for (const clientId of ['outbox-relay', 'ü'.repeat(25), null]) {
        const request = produce();
        const body = (await request.encode()) as EncodedBody;
        expect(body.headerRoom).toBe(REQUEST_HEADER_ROOM);
        const framed = await expectSameFrame({ ...request, encode: () => body }, clientId);
        expect(sharesMemory(framed, body.buffer), 'no copy').toBe(true);
        expect(framed.byteOffset + framed.length).toBe(body.buffer.byteOffset + body.buffer.length);
      }
    });

    it('copies any other body once, and a client id too long for the room', async () => {
      const encoder = new Encoder();
      encoder.writeInt32(7);
      encoder.writeString('metadata');
      await expectSameFrame({ apiKey: 3, apiVersion: 5, encode: async () => encoder as never }, 'outbox-relay');
      const request = produce();
      const body = (await request.encode()) as EncodedBody;
      const framed = await expectSameFrame({ ...request, encode: () => body }, 'c'.repeat(REQUEST_HEADER_ROOM));
      expect(sharesMemory(framed, body.buffer), 'a copy').toBe(false);
    });
  });

  it('checksums record batches like kafkajs, natively and by tables, for every length around the 8-byte step', () => {
    const kafkajsCrc = require('kafkajs/src/protocol/recordBatch/crc32C/index.js') as (data: Buffer) => number;
    for (const checksum of [crc32c, crc32cByTables]) {
      expect(checksum(Buffer.from('123456789'))).toBe(0xe3069283); // the CRC-32C check value
      for (let length = 0; length < 40; length++) {
        const data = randomBytes(length);
        expect(checksum(data), `length ${length}`).toBe(kafkajsCrc(data));
      }
      const large = randomBytes(1_000_003);
      expect(checksum(large)).toBe(kafkajsCrc(large));
      expect(checksum(large.subarray(5, 70_001))).toBe(kafkajsCrc(large.subarray(5, 70_001)));
    }
  });

  it.runIf(process.platform === 'linux' && process.arch === 'x64')('checksums with the processor instruction on linux-x64 (the image and CI)', () => {
    expect(crc32c).not.toBe(crc32cByTables);
  });
});

import { createRequire } from 'node:module';
import type { IHeaders } from '../kafka/kafkajs/kafkajs.js';
import { describe, expect, it } from 'vitest';
import { headerText, repairHeaders } from './kafkajs-headers.js';

const require = createRequire(import.meta.url);

type Encoded = { readonly buffer: Buffer };

/** One record with these headers, encoded and decoded by kafkajs's own, unchanged, record batch code (an array: a repeated name). */
async function throughKafkajs(headers: Record<string, string | (string | null)[]>): Promise<IHeaders> {
  const encodeRecord = require('kafkajs/src/protocol/recordBatch/record/v0/index.js') as (record: { key: Buffer | null; value: Buffer; headers: Record<string, Buffer | null | (Buffer | null)[]> }) => Encoded;
  const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0/index.js') as { RecordBatch: (batch: { records: Encoded[] }) => Promise<Encoded> };
  const Decoder = require('kafkajs/src/protocol/decoder.js') as new (buffer: Buffer) => unknown;
  const decodeBatch = require('kafkajs/src/protocol/recordBatch/v0/decoder.js') as (decoder: unknown) => Promise<{ records: { headers: IHeaders }[] }>;
  const bytes = (value: string | null) => (value === null ? null : Buffer.from(value));
  const produced = Object.create(null) as Record<string, Buffer | null | (Buffer | null)[]>;
  for (const [name, value] of Object.entries(headers)) produced[name] = Array.isArray(value) ? value.map(bytes) : bytes(value);
  const batch = await RecordBatch({ records: [encodeRecord({ key: null, value: Buffer.from('probe'), headers: produced })] });
  return (await decodeBatch(new Decoder(batch.buffer))).records[0]!.headers;
}

describe("kafkajs's headers repaired, kafkajs left as it is", () => {
  it("kafkajs alone changes Object.prototype names (the reason for the repair); repaired, every header is as produced", async () => {
    const produced = Object.create(null) as Record<string, string | (string | null)[]>;
    Object.assign(produced, { constructor: 'c', toString: ['t1', 't2'], hasOwnProperty: 'h', valueOf: 'v', event_id: 'e', dup: ['1', '2', '3'] });
    Object.defineProperty(produced, '__proto__', { value: 'p', enumerable: true });
    const decoded = await throughKafkajs(produced);
    expect(Array.isArray(decoded.constructor), 'kafkajs merges constructor with Object').toBe(true);
    const text = headerText(decoded);
    expect(Object.getPrototypeOf(text)).toBeNull();
    expect({ ...text }).toEqual({ constructor: 'c', ['__proto__']: 'p', toString: 't1,t2', hasOwnProperty: 'h', valueOf: 'v', event_id: 'e', dup: '1,2,3' });
    const repaired = repairHeaders(decoded);
    expect(repaired.toString).toEqual([Buffer.from('t1'), Buffer.from('t2')]);
    expect(repaired.dup).toEqual([Buffer.from('1'), Buffer.from('2'), Buffer.from('3')]);
    expect(Object.getOwnPropertyDescriptor(repaired, '__proto__')?.value).toEqual(Buffer.from('p'));
  });

  it("does not touch kafkajs's modules: its record decoder is the one on disk", () => {
    const path = require.resolve('kafkajs/src/protocol/recordBatch/record/v0/decoder.js');
    const loaded = require(path) as unknown;
    delete require.cache[path];
    const fresh = require(path) as unknown;
    expect(String(loaded)).toBe(String(fresh));
  });
});

import { createRequire } from 'node:module';
import { Kafka } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { mergeHeaders, verifyKafkajsHeaders } from './kafkajs-headers.js';

const require = createRequire(import.meta.url);
const RECORD_DECODER = 'kafkajs/src/protocol/recordBatch/record/v0/decoder.js';
const BATCH_DECODER = 'kafkajs/src/protocol/recordBatch/v0/decoder.js';
const kafka = new Kafka({ brokers: ['127.0.0.1:1'] });

/**
 * Runs `work` with `module` out of the require cache, so that a require in it loads the file
 * afresh; then the cached one is back (and whatever `work` loaded is dropped).
 */
async function uncached<T>(module: string, work: () => T | Promise<T>): Promise<T> {
  const path = require.resolve(module);
  const cached = require.cache[path];
  delete require.cache[path];
  try {
    return await work();
  } finally {
    if (cached) require.cache[path] = cached;
    else delete require.cache[path];
  }
}

/** kafkajs's own record decoder, as on disk. */
const kafkajsRecordDecoder = () => uncached(RECORD_DECODER, () => require(RECORD_DECODER) as unknown);

/** Runs `check` with `module`'s cached export replaced, then puts it back. */
async function withExport(module: string, exports: unknown, check: () => Promise<void>): Promise<void> {
  const path = require.resolve(module);
  require(path);
  const cached = require.cache[path]!;
  const real = cached.exports as unknown;
  cached.exports = exports;
  try {
    await check();
  } finally {
    cached.exports = real;
  }
}

describe("kafkajs's record decoder replaced so headers arrive as produced", () => {
  it('passes its check: kafkajs decodes Object.prototype header names unchanged', async () => {
    await expect(verifyKafkajsHeaders(kafka)).resolves.toBeUndefined();
    expect(await kafkajsRecordDecoder()).not.toBe(require(RECORD_DECODER));
  });

  it('keeps every name an own property, and a repeated name as kafkajs does (an array)', () => {
    const value = (text: string) => Buffer.from(text);
    const headers = mergeHeaders([
      { key: 'constructor', value: value('c') },
      { key: '__proto__', value: value('p') },
      { key: 'toString', value: null },
      { key: 'toString', value: value('t') },
      { key: 'dup', value: value('1') },
      { key: 'dup', value: value('2') },
      { key: 'dup', value: value('3') },
    ]);
    expect(Object.getPrototypeOf(headers)).toBe(Object.prototype);
    expect(Object.keys(headers)).toEqual(['constructor', '__proto__', 'toString', 'dup']);
    expect(headers.constructor).toEqual(value('c'));
    expect(Object.getOwnPropertyDescriptor(headers, '__proto__')?.value).toEqual(value('p'));
    expect(headers.toString).toEqual([null, value('t')]);
    expect(headers.dup).toEqual([value('1'), value('2'), value('3')]);
  });

  it('refuses when kafkajs fetched before the replacement (its batch decoder holds the original)', async () => {
    const original = await kafkajsRecordDecoder();
    await uncached(BATCH_DECODER, async () => {
      // The batch decoder loads, and captures the record decoder, while kafkajs's own is in place.
      await withExport(RECORD_DECODER, original, async () => {
        require(BATCH_DECODER);
      });
      await expect(verifyKafkajsHeaders(kafka)).rejects.toMatchObject({
        code: 'CONSUMER_KAFKAJS',
        retriable: false,
        message: expect.stringMatching(/kafkajs decodes the headers constructor, toString, hasOwnProperty, valueOf, __proto__ changed/),
      });
    });
    await expect(verifyKafkajsHeaders(kafka)).resolves.toBeUndefined();
  });

  it('refuses when the replacement is gone from the module cache', async () => {
    await withExport(RECORD_DECODER, await kafkajsRecordDecoder(), async () => {
      await expect(verifyKafkajsHeaders(kafka)).rejects.toMatchObject({ code: 'CONSUMER_KAFKAJS', message: expect.stringContaining(`kafkajs's ${RECORD_DECODER} is not the consumer helper's any more`) });
    });
  });

  it('refuses another kafkajs version, and a Kafka client of another kafkajs copy', async () => {
    await withExport('kafkajs/package.json', { version: '2.2.5' }, async () => {
      await expect(verifyKafkajsHeaders(kafka)).rejects.toMatchObject({ code: 'CONSUMER_KAFKAJS', message: expect.stringContaining('kafkajs 2.2.5 is installed, the consumer helper needs 2.2.4 exactly') });
    });
    const elsewhere = { consumer: () => undefined } as unknown as Kafka;
    await expect(verifyKafkajsHeaders(elsewhere)).rejects.toMatchObject({ code: 'CONSUMER_KAFKAJS', message: expect.stringContaining('the Kafka client given is not from the kafkajs at') });
  });
});

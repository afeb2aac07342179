import { describe, expect, it } from 'vitest';
import { encodeHeaders, encodeRecord } from './record-format.js';
import { recordSize } from './record-size.js';

/**
 * The size estimate bounds batching (OUTBOX_MAX_MESSAGE_BYTES): if it were ever below the encoded
 * size, a request could exceed what the broker takes and be refused forever.
 */
describe('recordSize', () => {
  it('is never below the encoded record, over generated keys, values and headers (varint boundaries included)', () => {
    let seed = 7;
    const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
    // Lengths around the 1-, 2- and 3-byte varint limits (63/64, 8191/8192 bytes as zigzag).
    const lengths = [0, 1, 62, 63, 64, 65, 200, 8190, 8191, 8192, 8193, 70_000];
    const chars = ['a', 'é', '€', '😀'];
    const text = () => chars.map(() => pick(chars)).join('').repeat(1 + Math.floor(pick(lengths) / 4)).slice(0, pick(lengths));
    for (let run = 0; run < 2_000; run++) {
      const key = pick<Buffer | string | null>([null, text(), Buffer.alloc(pick(lengths))]);
      const value = pick<Buffer | string>([text(), Buffer.alloc(pick(lengths))]);
      const headers = Object.fromEntries(Array.from({ length: Math.floor(random() * 8) }, (_, i) => [`${text().slice(0, 80)}${i}`, text()]));
      // Offsets within a batch of up to 10k records; timestamps up to ten minutes apart.
      const encoded = encodeRecord({ key, value, headers }, Math.floor(random() * 10_000), Math.floor(random() * 600_000));
      expect(recordSize(key, value, encodeHeaders(headers)), `run ${run}`).toBeGreaterThanOrEqual(encoded.length);
    }
  });
});

import { describe, expect, it } from 'vitest';
import { formatLsn, lsnDistance, parseLsn, readLsn, type Lsn } from './lsn.js';

describe('Lsn', () => {
  it('parses and formats the X/Y form both ways', () => {
    for (const text of ['0/0', '0/16B3748', '1/0', 'FFFFFFFF/FFFFFFFF', '16/B374D848']) {
      expect(formatLsn(parseLsn(text))).toBe(text);
    }
    expect(parseLsn('1/0')).toBe(4294967296n);
  });

  it('formats any 64-bit position as its two halves in upper-case hex, without leading zeros', () => {
    let seed = 0x9e3779b97f4a7c15n;
    for (let i = 0; i < 2000; i++) {
      seed = BigInt.asUintN(64, seed * 6364136223846793005n + 1442695040888963407n);
      // Shorter values too: every digit count of either half.
      const lsn = (seed >> BigInt(i % 64)) as Lsn;
      expect(formatLsn(lsn)).toBe(`${(lsn >> 32n).toString(16).toUpperCase()}/${(lsn & 0xffffffffn).toString(16).toUpperCase()}`);
    }
  });

  it('compares numerically where strings would not', () => {
    expect(parseLsn('0/A0000000') > parseLsn('0/9FFFFFFF')).toBe(true);
    expect(parseLsn('10/0') > parseLsn('9/FFFFFFFF')).toBe(true);
  });

  it('rejects what is not an LSN, naming the value', () => {
    expect(() => parseLsn('16B3748')).toThrow(/"16B3748"/);
    expect(() => parseLsn('0/XYZ')).toThrow(/not an LSN/);
  });

  it('reads the 64-bit big-endian positions of the replication protocol', () => {
    const buffer = Buffer.alloc(9);
    buffer.writeBigUInt64BE(0x1_0000_00ffn, 1);
    expect(formatLsn(readLsn(buffer, 1))).toBe('1/FF');
  });

  it('measures distance in bytes, never negative', () => {
    expect(lsnDistance(parseLsn('0/100'), parseLsn('0/180'))).toBe(0x80);
    expect(lsnDistance(parseLsn('0/180'), parseLsn('0/100'))).toBe(0);
  });
});

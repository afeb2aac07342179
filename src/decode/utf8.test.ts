import { isUtf8 } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { invalidUtf8Offset } from './utf8.js';

describe('invalidUtf8Offset', () => {
  it('finds where the first bad sequence starts, -1 for well-formed text', () => {
    expect(invalidUtf8Offset(Buffer.from('{"a":"é€😀"}', 'utf8'))).toBe(-1);
    expect(invalidUtf8Offset(Buffer.from([0x7b, 0x22, 0xff, 0x22]))).toBe(2);
    // Overlong, surrogate, above U+10FFFF, a lone continuation byte, cut short at the end.
    expect(invalidUtf8Offset(Buffer.from([0x41, 0xc0, 0xaf]))).toBe(1);
    expect(invalidUtf8Offset(Buffer.from([0x41, 0xed, 0xa0, 0x80]))).toBe(1);
    expect(invalidUtf8Offset(Buffer.from([0x41, 0xf4, 0x90, 0x80, 0x80]))).toBe(1);
    expect(invalidUtf8Offset(Buffer.from([0x41, 0x42, 0x80]))).toBe(2);
    expect(invalidUtf8Offset(Buffer.from([0x41, 0xe2, 0x82]))).toBe(1);
  });

  it("agrees with node's isUtf8 on every two- and three-byte sequence", () => {
    const bytes = Buffer.alloc(3);
    const disagreements: string[] = [];
    for (let a = 0; a < 256; a++) {
      for (let b = 0; b < 256; b++) {
        for (const c of [0x00, 0x80, 0xbf, 0xc0]) {
          bytes[0] = a;
          bytes[1] = b;
          bytes[2] = c;
          for (const sequence of [bytes, bytes.subarray(0, 2)]) {
            if ((invalidUtf8Offset(sequence) === -1) !== isUtf8(sequence)) disagreements.push(sequence.toString('hex'));
          }
        }
      }
    }
    expect(disagreements).toEqual([]);
  });
});

import { describe, expect, it } from 'vitest';
import { utf8Length, writeUtf8 } from './utf8.js';

describe('utf8', () => {
  it("measures and writes text exactly as Buffer's UTF-8 does, short or long, ASCII or not", () => {
    const texts = ['', 'a', 'event_id', 'x'.repeat(64), 'x'.repeat(65), 'ü', 'ключ', '€'.repeat(30), '🙂', 'a\uD800b', 'y'.repeat(5_000) + 'é'];
    for (const text of texts) {
      const length = utf8Length(text);
      expect(length, text.slice(0, 20)).toBe(Buffer.byteLength(text, 'utf8'));
      const buf = Buffer.alloc(length + 2, 0xff);
      expect(writeUtf8(buf, 1, text, length)).toBe(1 + length);
      expect(buf.subarray(1, 1 + length).equals(Buffer.from(text, 'utf8'))).toBe(true);
      expect([buf[0], buf[length + 1]]).toEqual([0xff, 0xff]);
    }
  });
});

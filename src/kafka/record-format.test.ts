import { describe, expect, it } from 'vitest';
import { encodeHeaders, encodeRecord, NO_HEADER_BLOCK } from './record-format.js';

describe('encodeHeaders', () => {
  // The record written from the encoded block must be the record written from the headers.
  const sameRecord = (headers: Record<string, string>) => {
    const fromHeaders = encodeRecord({ key: 'inv_1', value: '{}', headers }, 3, 1_000);
    const fromBlock = encodeRecord({ key: 'inv_1', value: '{}', headers: { ignored: 'the block wins' }, headerBlock: encodeHeaders(headers) }, 3, 1_000);
    expect(fromBlock.equals(fromHeaders), JSON.stringify(headers).slice(0, 200)).toBe(true);
  };

  it('writes the bytes the record writes from the headers: ASCII, accents, emoji, lone surrogates, empty, long', () => {
    sameRecord({});
    sameRecord({ event_id: '0b3c5a9e-0000-4000-8000-000000000001', event_type: 'invoice.paid', outbox_commit_lsn: '0/4A1B2C3D' });
    sameRecord({ 'заголовок': 'ü', 'x': '€😀', empty: '', lone: '\ud800x', '': 'no name' });
    // Past the 64-character ASCII path, past a 2-byte length varint, past the 1 KB scratch it starts with.
    sameRecord({ long: 'a'.repeat(65), longer: 'b'.repeat(9_000), accented: 'é'.repeat(40), mixed: `${'a'.repeat(63)}é` });
  });

  it('agrees with the headers over 500 random sets, one after another (the scratch is reused)', () => {
    let seed = 11;
    const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
    const pieces = ['a', 'inv_', 'é', '€', '😀', '\udc00', '-'];
    const text = () => Array.from({ length: Math.floor(random() ** 3 * 200) }, () => pieces[Math.floor(random() * pieces.length)]!).join('');
    for (let run = 0; run < 500; run++) sameRecord(Object.fromEntries(Array.from({ length: Math.floor(random() * 8) }, (_, i) => [`${text().slice(0, 20)}${i}`, text()])));
  });

  it('gives a record without headers a count of zero and nothing else', () => {
    expect([...NO_HEADER_BLOCK]).toEqual([0]);
  });
});

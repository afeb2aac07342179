import { describe, expect, it } from 'vitest';
import { formatLsn, parseLsn } from '../lsn.js';
import { PgoutputDecoder } from './pgoutput.js';

function keepalive(lsn: string, replyRequested: boolean): Buffer {
  const frame = Buffer.alloc(18);
  frame[0] = 0x6b;
  frame.writeBigUInt64BE(parseLsn(lsn), 1);
  frame.writeBigInt64BE(0n, 9);
  frame[17] = replyRequested ? 1 : 0;
  return frame;
}

function xlog(body: Buffer): Buffer {
  const header = Buffer.alloc(25);
  header[0] = 0x77;
  return Buffer.concat([header, body]);
}

function commit(commitLsn: string, endLsn: string): Buffer {
  const body = Buffer.alloc(26);
  body[0] = 0x43; // 'C'
  body[1] = 0;
  body.writeBigUInt64BE(parseLsn(commitLsn), 2);
  body.writeBigUInt64BE(parseLsn(endLsn), 10);
  body.writeBigInt64BE(1_000_000n, 18); // 1 s after the Postgres epoch
  return xlog(body);
}

const cstring = (text: string) => Buffer.concat([Buffer.from(text, 'utf8'), Buffer.from([0])]);
const int16 = (n: number) => Buffer.from([n >> 8, n & 0xff]);
const int32 = (n: number) => { const b = Buffer.alloc(4); b.writeInt32BE(n); return b; };

function relation(oid: number, columns: readonly (readonly [string, number])[]): Buffer {
  return xlog(Buffer.concat([Buffer.from('R'), int32(oid), cstring('public'), cstring('event_outbox'), Buffer.from('d'), int16(columns.length),
    ...columns.map(([name, typeOid]) => Buffer.concat([Buffer.from([0]), cstring(name), int32(typeOid), int32(-1)]))]));
}

function insert(oid: number, values: readonly (string | null)[]): Buffer {
  return xlog(Buffer.concat([Buffer.from('I'), int32(oid), Buffer.from('N'), int16(values.length),
    ...values.map((value) => (value === null ? Buffer.from('n') : Buffer.concat([Buffer.from('t'), int32(Buffer.byteLength(value)), Buffer.from(value)])))]));
}

describe('PgoutputDecoder', () => {
  const decoder = new PgoutputDecoder();

  it('reads keepalives as positions, with the reply flag', () => {
    expect(decoder.decode(keepalive('1/2A', true))).toEqual({ kind: 'position', lsn: parseLsn('1/2A'), replyRequested: true });
  });

  it("reads the commit's end LSN exactly as sent", () => {
    const message = decoder.decode(commit('0/16B3748', '0/16B3778'));
    expect(message?.kind).toBe('commit');
    if (message?.kind !== 'commit') return;
    expect(formatLsn(message.endLsn)).toBe('0/16B3778');
    expect(formatLsn(message.commitLsn)).toBe('0/16B3748');
    expect(message.commitTime.toISOString()).toBe('2000-01-01T00:00:01.000Z');
  });

  it('reads a logical decoding message: transactional or not, its LSN, prefix and content (a copy)', () => {
    const body = (flags: number, prefix: string, content: string) => {
      const lsn = Buffer.alloc(8);
      lsn.writeBigUInt64BE(parseLsn('0/16B3748'));
      const bytes = Buffer.from(content, 'utf8');
      return xlog(Buffer.concat([Buffer.from('M'), Buffer.from([flags]), lsn, cstring(prefix), int32(bytes.length), bytes]));
    };
    const frame = body(1, 'outbox', '{"event_id":"é"}');
    const message = decoder.decode(frame);
    expect(message).toMatchObject({ kind: 'message', transactional: true, prefix: 'outbox' });
    if (message?.kind !== 'message') return;
    expect(formatLsn(message.lsn)).toBe('0/16B3748');
    frame.fill(0);
    expect(message.content.toString('utf8')).toBe('{"event_id":"é"}');
    expect(decoder.decode(body(0, 'other', ''))).toMatchObject({ kind: 'message', transactional: false, prefix: 'other' });
    expect(() => decoder.decode(body(1, 'outbox', 'x').subarray(0, -1))).toThrow(/ends inside its content/);
  });

  it('refuses frames it does not know', () => {
    expect(() => decoder.decode(Buffer.from([0xc8, 0, 0]))).toThrow(/unknown replication frame type 0xc8/);
  });

  it('reads inserts with the parsers of their columns, text or bytes, into a row that inherits nothing', () => {
    const seen: string[] = [];
    const bytes = Object.assign((text: string) => `text:${text}`, { fromBytes: (buf: Buffer, start: number, end: number) => buf.subarray(start, end).toString('hex') });
    const table = new PgoutputDecoder({ columnParsers: (relation) => (relation.name === 'event_outbox' ? ({ name }) => (name === 'payload' ? bytes : undefined) : undefined) });
    expect(table.decode(relation(16385, [['event_id', 25], ['n', 20], ['payload', 3802], ['__proto__', 25], ['constructor', 25]]))).toBeNull();
    const message = table.decode(insert(16385, ['é1', '42', '{}', 'p', null]));
    expect(message?.kind).toBe('insert');
    if (message?.kind !== 'insert') return;
    seen.push(...Object.keys(message.row));
    expect(message.relation).toMatchObject({ schema: 'public', name: 'event_outbox' });
    expect(seen).toEqual(['event_id', 'n', 'payload', '__proto__', 'constructor']);
    expect({ ...message.row }).toEqual({ event_id: 'é1', n: '42', payload: '7b7d', ['__proto__']: 'p', constructor: null });
    expect(message.row.toString).toBeUndefined();
    expect(() => table.decode(insert(16385, ['a', '1', '{}', 'p', null, 'extra']))).toThrow(/6 columns/);
  });
});

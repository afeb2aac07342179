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

  it('refuses frames it does not know', () => {
    expect(() => decoder.decode(Buffer.from([0xc8, 0, 0]))).toThrow(/unknown replication frame type 0xc8/);
  });
});

/**
 * A WAL position. Kept as a bigint so comparisons and arithmetic are exact; the textual
 * `X/Y` form exists only at the edges (SQL, logs), and is parsed and formatted here only.
 */
export type Lsn = bigint & { readonly __brand: 'Lsn' };

export const ZERO_LSN = 0n as Lsn;

const LSN_TEXT = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/;

export function parseLsn(text: string): Lsn {
  const match = LSN_TEXT.exec(text);
  if (!match) throw new TypeError(`not an LSN: ${JSON.stringify(text)} (expected "X/Y" in hex)`);
  return ((BigInt(`0x${match[1]}`) << 32n) | BigInt(`0x${match[2]}`)) as Lsn;
}

/** Where formatLsn writes the text: at most 8 hex digits, "/", 8 hex digits. */
const LSN_TEXT_BYTES = Buffer.allocUnsafe(17);
const HEX_DIGITS = Buffer.from('0123456789ABCDEF', 'latin1');

/**
 * Called once per transaction (the commit LSN header of its events): written digit by digit
 * into one buffer and read out as one string, it costs a third of Number#toString(16) twice,
 * which was 4% of the relay's CPU on single-row transactions.
 */
export function formatLsn(lsn: Lsn): string {
  let end = writeHex(Number(lsn >> 32n), 0);
  LSN_TEXT_BYTES[end++] = 0x2f;
  end = writeHex(Number(lsn & 0xffffffffn), end);
  return LSN_TEXT_BYTES.toString('latin1', 0, end);
}

/** `n` (a 32-bit unsigned integer) in upper-case hex without leading zeros, at `at`; returns the end. */
function writeHex(n: number, at: number): number {
  let digits = 1;
  for (let rest = n >>> 4; rest !== 0; rest >>>= 4) digits += 1;
  for (let i = at + digits - 1; i >= at; i--) {
    LSN_TEXT_BYTES[i] = HEX_DIGITS[n & 15]!;
    n >>>= 4;
  }
  return at + digits;
}

export function readLsn(buffer: Buffer, offset: number): Lsn {
  return buffer.readBigUInt64BE(offset) as Lsn;
}

export function maxLsn(a: Lsn, b: Lsn): Lsn {
  return a > b ? a : b;
}

/** Bytes between two positions, as a number for metrics (a slot lag never nears 2^53). */
export function lsnDistance(from: Lsn, to: Lsn): number {
  return to > from ? Number(to - from) : 0;
}

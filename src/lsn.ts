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

export function formatLsn(lsn: Lsn): string {
  // Each half as a Number: formatting those is cheaper than formatting bigints (once per transaction).
  const high = Number(lsn >> 32n).toString(16).toUpperCase();
  const low = Number(lsn & 0xffffffffn).toString(16).toUpperCase();
  return `${high}/${low}`;
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

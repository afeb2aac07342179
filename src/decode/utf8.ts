/**
 * Where the first byte that is not well-formed UTF-8 (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF) starts, or -1 when every byte is. Only for a text already
 * known to be bad (`isUtf8` from node:buffer is the fast check): this is the message's detail.
 */
export function invalidUtf8Offset(bytes: Uint8Array): number {
  let at = 0;
  while (at < bytes.length) {
    const lead = bytes[at]!;
    const length = sequenceLength(bytes, at, lead);
    if (length === 0) return at;
    at += length;
  }
  return -1;
}

/** The length of the well-formed sequence starting at `at`, 0 if it is not one. */
function sequenceLength(bytes: Uint8Array, at: number, lead: number): number {
  if (lead < 0x80) return 1;
  // The range the second byte must fall in, by lead byte; later bytes are 80..BF.
  let low = 0x80;
  let high = 0xbf;
  let length: number;
  if (lead >= 0xc2 && lead <= 0xdf) length = 2;
  else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead === 0xe0) low = 0xa0;
    else if (lead === 0xed) high = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead === 0xf0) low = 0x90;
    else if (lead === 0xf4) high = 0x8f;
  } else return 0;
  if (at + length > bytes.length) return 0;
  const second = bytes[at + 1]!;
  if (second < low || second > high) return 0;
  for (let i = 2; i < length; i++) if ((bytes[at + i]! & 0xc0) !== 0x80) return 0;
  return length;
}

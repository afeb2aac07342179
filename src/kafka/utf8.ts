/** Header names and values are short: for those, a loop beats a call into Buffer's native code. */
export const SHORT_TEXT = 64;

/** UTF-8 byte length of a text. */
export function utf8Length(text: string): number {
  if (text.length <= SHORT_TEXT && isAscii(text)) return text.length;
  return Buffer.byteLength(text, 'utf8');
}

/** Writes a text's UTF-8 bytes (`length` of them, from utf8Length) at `at`; returns the end. */
export function writeUtf8(buf: Buffer, at: number, text: string, length: number): number {
  if (length === text.length && length <= SHORT_TEXT) {
    for (let i = 0; i < length; i++) buf[at + i] = text.charCodeAt(i);
    return at + length;
  }
  return at + buf.write(text, at, length, 'utf8');
}

function isAscii(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) > 0x7f) return false;
  return true;
}

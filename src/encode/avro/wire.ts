import type avro from 'avsc';

/** Confluent wire format: magic byte 0, schema id (4 bytes, big-endian), Avro binary. */
export const MAGIC_BYTE = 0;
export const HEADER_BYTES = 5;

/** Where values are encoded before being copied out at their size; grows to the largest seen. */
let scratch = Buffer.allocUnsafe(64 * 1024);

/** `value` (valid for `type`) encoded after the header: one allocation of the framed size. */
export function frame(schemaId: number, type: avro.Type, value: unknown): Buffer {
  let end = type.encode(value, scratch, HEADER_BYTES);
  if (end < 0) {
    // avsc reports the bytes missing as a negative number.
    scratch = Buffer.allocUnsafe(2 * (scratch.length - end));
    end = type.encode(value, scratch, HEADER_BYTES);
  }
  scratch.writeUInt8(MAGIC_BYTE, 0);
  scratch.writeUInt32BE(schemaId, 1);
  return Buffer.from(scratch.subarray(0, end));
}

/** Writes the header into the HEADER_BYTES that `body` (from the transcoder) left for it. */
export function frameBody(schemaId: number, body: Buffer): Buffer {
  body[0] = MAGIC_BYTE;
  body.writeUInt32BE(schemaId, 1);
  return body;
}

export function unframe(buffer: Buffer): { schemaId: number; body: Buffer } {
  if (buffer.length < HEADER_BYTES || buffer.readUInt8(0) !== MAGIC_BYTE) throw new Error('not in the Confluent wire format (magic byte 0, 4-byte schema id)');
  return { schemaId: buffer.readUInt32BE(1), body: buffer.subarray(HEADER_BYTES) };
}

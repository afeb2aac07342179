/** Confluent wire format: magic byte 0, schema id (4 bytes, big-endian), Avro binary. */
export const MAGIC_BYTE = 0;
export const HEADER_BYTES = 5;

export function frame(schemaId: number, body: Buffer): Buffer {
  const framed = Buffer.allocUnsafe(HEADER_BYTES + body.length);
  framed.writeUInt8(MAGIC_BYTE, 0);
  framed.writeUInt32BE(schemaId, 1);
  body.copy(framed, HEADER_BYTES);
  return framed;
}

export function unframe(buffer: Buffer): { schemaId: number; body: Buffer } {
  if (buffer.length < HEADER_BYTES || buffer.readUInt8(0) !== MAGIC_BYTE) throw new Error('not in the Confluent wire format (magic byte 0, 4-byte schema id)');
  return { schemaId: buffer.readUInt32BE(1), body: buffer.subarray(HEADER_BYTES) };
}

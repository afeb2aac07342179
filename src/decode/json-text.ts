/**
 * A json or jsonb column value as Postgres rendered it, left unparsed: the UTF-8 bytes the
 * stream received (or a text given by a caller). With the JSON format the payload goes to
 * Kafka as these bytes: decoding and parsing it only to serialize it again cost more than
 * encoding the whole Kafka record; the Avro format transcodes the bytes straight to Avro
 * (encode/avro/transcoder.ts). `toJSON` keeps it a JSON value wherever a row is serialized
 * whole (dead letters).
 */
export class JsonText {
  private decoded: string | undefined;
  private encoded: Buffer | undefined;

  constructor(source: string | Buffer) {
    if (typeof source === 'string') this.decoded = source;
    else this.encoded = source;
  }

  /** A copy of `bytes[start, end)`: the replication stream reuses the buffer it reads into. */
  static fromBytes(bytes: Buffer, start: number, end: number): JsonText {
    return new JsonText(Buffer.from(bytes.subarray(start, end)));
  }

  /** As received: the bytes from the stream, or the text given. */
  get raw(): string | Buffer {
    return this.encoded ?? this.decoded!;
  }

  get text(): string {
    return (this.decoded ??= this.encoded!.toString('utf8'));
  }

  get bytes(): Buffer {
    return (this.encoded ??= Buffer.from(this.decoded!, 'utf8'));
  }

  toJSON(): unknown {
    return JSON.parse(this.text);
  }
}

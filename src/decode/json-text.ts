/**
 * A json or jsonb column value as Postgres rendered it, left unparsed. With the JSON format
 * the payload goes to Kafka as this text: parsing it only to serialize it again cost more
 * than encoding the whole Kafka record. `toJSON` keeps it a JSON value wherever a row is
 * serialized whole (dead letters).
 */
export class JsonText {
  constructor(readonly text: string) {}

  toJSON(): unknown {
    return JSON.parse(this.text);
  }
}

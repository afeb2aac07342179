import { RelayError } from '../errors.js';
import type { TableColumn } from './column-map.js';

/** How a payload of each type the relay can publish becomes the record value, per OUTBOX_FORMAT. */
interface PayloadRule {
  readonly json: string;
  readonly avro: string;
}

const AS_JSON: PayloadRule = { json: "published as Postgres's JSON text", avro: "its JSON encoded with the event type's Avro schema" };
const AS_TEXT: PayloadRule = { json: 'published as its UTF-8 text', avro: "its text, which must be JSON, encoded with the event type's Avro schema" };
const AS_BYTES: PayloadRule = { json: 'published as its bytes', avro: "its bytes, which must be UTF-8 JSON, encoded with the event type's Avro schema" };

/**
 * The payload column types the relay publishes as stored, by type OID (built-in types: the OIDs
 * are fixed). Any other type would have to be re-encoded: a number, a date, an array, a domain
 * (pg reads a domain's values by the domain's own OID, so a bytea domain would arrive as hex text).
 */
const PUBLISHABLE: ReadonlyMap<number, PayloadRule> = new Map([
  [114, AS_JSON], // json
  [3802, AS_JSON], // jsonb
  [25, AS_TEXT], // text
  [1043, AS_TEXT], // varchar
  [17, AS_BYTES], // bytea
]);

const ACCEPTED = 'json, jsonb, text, varchar or bytea';

export interface PayloadColumnTarget {
  readonly table: { readonly schema: string; readonly name: string };
  /** OUTBOX_COLUMN_PAYLOAD. */
  readonly payloadColumn: string;
  /** The format the relay runs with; unknown to `setup`, which then says what each would do. */
  readonly format?: 'json' | 'avro';
}

/**
 * Finds the payload column among the table's columns (readTableColumns) and says how its values are published, e.g.
 * `payload column "payload" is jsonb: published as Postgres's JSON text`. Throws SETUP_TABLE
 * (not retriable) naming the column, its type and the accepted types when the column is missing
 * or of a type the relay cannot publish as stored: refused at start, not a dead letter per row.
 * (A type changed while the relay streams still makes each row a dead letter naming it.)
 */
export function checkPayloadColumn(target: PayloadColumnTarget, columns: readonly TableColumn[]): string {
  const { schema, name } = target.table;
  const column = target.payloadColumn;
  const found = columns.find((each) => each.name === column);
  const details = { table: `${schema}.${name}`, column, type: found?.type ?? null };
  if (!found) {
    throw new RelayError('SETUP_TABLE', `outbox table ${schema}.${name} has no payload column "${column}" (OUTBOX_COLUMN_PAYLOAD); the relay publishes a ${ACCEPTED} column`, { details });
  }
  const rule = PUBLISHABLE.get(found.typeOid);
  if (!rule) {
    const type = found.baseType === null ? found.type : `${found.type} (a domain over ${found.baseType})`;
    throw new RelayError(
      'SETUP_TABLE',
      `payload column "${column}" of ${schema}.${name} is ${type}: the relay publishes ${ACCEPTED} payloads as stored and would have to re-encode this one. ` +
        `Change the column's type (e.g. ALTER TABLE ${schema}.${name} ALTER COLUMN ${column} TYPE jsonb USING ...) or OUTBOX_COLUMN_PAYLOAD`,
      { details },
    );
  }
  const how = target.format ? rule[target.format] : `${rule.json} (with OUTBOX_FORMAT=avro: ${rule.avro})`;
  return `payload column "${column}" is ${found.type}: ${how}`;
}

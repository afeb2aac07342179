import { readFile } from 'node:fs/promises';
import avro from 'avsc';
import { RelayError } from '../../errors.js';
import type { KeySchema } from './avro-encoder.js';
import { FOR_SCHEMA_OPTIONS } from './logical-types.js';
import { displayPath } from './schema-set.js';

/**
 * The optional Avro key schema (OUTBOX_KEY_SCHEMA): `"string"` (or `{"type": "string"}`), or a
 * named record with exactly one string field, which receives the aggregate id.
 */
export async function loadKeySchema(file: string): Promise<KeySchema> {
  const shown = displayPath(file);
  const fail = (message: string, cause?: unknown) => new RelayError('SCHEMA_INVALID', `OUTBOX_KEY_SCHEMA ${shown}: ${message}`, { cause });
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(file, 'utf8'));
  } catch (error) {
    throw fail(`cannot be read as JSON: ${(error as Error).message}`, error);
  }
  let type: avro.Type;
  try {
    type = avro.Type.forSchema(raw as avro.Schema, FOR_SCHEMA_OPTIONS);
  } catch (error) {
    throw fail((error as Error).message, error);
  }
  if (avro.Type.isType(type, 'string')) return { file: shown, fullName: undefined, definition: JSON.stringify(raw), type, field: undefined };
  if (type instanceof avro.types.RecordType && type.fields.length === 1 && avro.Type.isType(type.fields[0]!.type, 'string')) {
    return { file: shown, fullName: type.name, definition: JSON.stringify(raw), type, field: type.fields[0]!.name };
  }
  throw fail('a key schema is "string" or a record with one string field (the aggregate id)');
}

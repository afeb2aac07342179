import { formatProblem, loadSchemaSet, type SchemaSet } from '../encode/avro/schema-set.js';
import { validationProblems } from '../encode/avro/validation.js';
import { OutboxClientError } from './errors.js';

export type { SchemaSet } from '../encode/avro/schema-set.js';

/**
 * The relay's schema set (`schemas/**\/<event_type>.avsc`), loaded with the relay's own loader
 * so the writer checks exactly what the relay will encode. Throws, listing every problem, when a
 * file does not parse or compile: a writer must not start with schemas the relay would refuse.
 */
export async function loadOutboxSchemas(dir: string): Promise<SchemaSet> {
  const set = await loadSchemaSet(dir);
  if (set.problems.length > 0) {
    throw new OutboxClientError('OUTBOX_SCHEMAS_INVALID', `${set.problems.length} problem(s) in the schemas under ${dir}:\n  - ${set.problems.map(formatProblem).join('\n  - ')}`, {
      details: { dir, problems: set.problems },
    });
  }
  return set;
}

/**
 * Checks `payload` (as the relay will read it back from jsonb) against the schema of
 * `eventType`; throws naming the failing paths, e.g. `lines[0].amount_cents: expected long, got "12.5"`.
 */
export function assertPayloadFits(schemas: SchemaSet, eventType: string, eventId: string, payload: unknown): void {
  const schema = schemas.byEventType.get(eventType);
  if (!schema) {
    throw new OutboxClientError('OUTBOX_NO_SCHEMA', `event ${eventId}: no Avro schema for event type "${eventType}" (expected ${schemas.dir}/**/${eventType}.avsc); the relay would dead-letter it`, {
      details: { eventId, eventType },
    });
  }
  const problems = validationProblems(schema.type, payload);
  if (problems.length > 0) {
    throw new OutboxClientError('OUTBOX_PAYLOAD_MISMATCH', `event ${eventId}: payload of ${eventType} does not fit ${schema.file}: ${problems.join('; ')}`, {
      details: { eventId, eventType, schema: schema.file, problems, path: problems[0]!.slice(0, problems[0]!.indexOf(':')) },
    });
  }
}

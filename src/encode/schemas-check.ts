import { errorMessage } from '../errors.js';
import { loadKeySchema } from './avro/key-schema.js';
import { formatProblem, loadSchemaSet } from './avro/schema-set.js';

export interface SchemasCheckReport {
  readonly ok: boolean;
  /** One line per schema (ok) or problem (`file: path: message`), then a summary. */
  readonly lines: readonly string[];
}

/** `outbox-relay schemas check`: every schema parsed and compiled, offline; all problems listed. */
export async function schemasCheck(dir: string, keySchemaFile: string | null): Promise<SchemasCheckReport> {
  const lines: string[] = [];
  let problems = 0;
  try {
    const set = await loadSchemaSet(dir);
    for (const schema of set.byEventType.values()) lines.push(`ok    ${schema.file}: ${schema.eventType} -> ${schema.fullName}`);
    for (const problem of set.problems) lines.push(`error ${formatProblem(problem)}`);
    problems += set.problems.length;
    if (set.byEventType.size === 0 && set.problems.length === 0) {
      lines.push(`error ${dir}: no .avsc files`);
      problems += 1;
    }
    if (keySchemaFile) {
      try {
        const key = await loadKeySchema(keySchemaFile);
        lines.push(`ok    ${key.file}: key schema${key.fullName ? ` -> ${key.fullName}` : ' (string)'}`);
      } catch (error) {
        lines.push(`error ${errorMessage(error)}`);
        problems += 1;
      }
    }
    lines.push(problems === 0 ? `${set.byEventType.size} schema(s) ok in ${dir}` : `${problems} problem(s) in ${dir}`);
  } catch (error) {
    lines.push(`error ${dir}: cannot be read: ${errorMessage(error)}`);
    problems += 1;
  }
  return { ok: problems === 0, lines };
}

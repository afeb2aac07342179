import avro from 'avsc';

const MAX_PROBLEMS = 5;
const MAX_SHOWN_CHARS = 40;
const STRICT = { noUndeclaredFields: true } as const;

/**
 * Why `value` does not fit `type`, one entry per failing path, e.g.
 * `amount_cents: expected long, got "12.5"`. Empty when it fits. Undeclared fields count as a
 * misfit: encoding would drop them silently, and billing data is not dropped silently.
 */
export function validationProblems(type: avro.Type, value: unknown): string[] {
  // Without an error hook avsc checks on its fast path: the hook (paths, one closure per call)
  // is only for values that do not fit.
  if (type.isValid(value, STRICT)) return [];
  const problems: string[] = [];
  type.isValid(value, {
    noUndeclaredFields: true,
    errorHook: (path, actual, failed) => {
      if (problems.length >= MAX_PROBLEMS) return;
      const undeclared = undeclaredFields(failed, actual);
      if (undeclared.length > 0) {
        for (const name of undeclared) problems.push(`${formatPath([...path, name])}: not a field of ${failed.name ?? 'the record'}`);
        return;
      }
      problems.push(`${formatPath(path)}: expected ${describeType(failed)}, got ${describeValue(actual)}`);
    },
  });
  return problems.slice(0, MAX_PROBLEMS);
}

function undeclaredFields(type: avro.Type, value: unknown): string[] {
  if (!(type instanceof avro.types.RecordType) || value === null || typeof value !== 'object' || Array.isArray(value)) return [];
  const declared = new Set(type.fields.map((field) => field.name));
  return Object.keys(value).filter((name) => !declared.has(name));
}

/** `lines[2].amount_cents`; the root is `(payload)`. */
export function formatPath(path: readonly string[]): string {
  if (path.length === 0) return '(payload)';
  let text = '';
  for (const part of path) {
    if (/^\d+$/.test(part)) text += `[${part}]`;
    else text += text === '' ? part : `.${part}`;
  }
  return text;
}

function describeType(type: avro.Type): string {
  if (type instanceof avro.types.LogicalType) {
    const name = type.typeName.replace(/^logical:/, '');
    return name === 'timestamp-millis' ? 'timestamp-millis (ISO 8601 date-time with zone, or epoch millis)' : name;
  }
  if (type instanceof avro.types.EnumType) return `one of ${type.symbols.join(' | ')}`;
  if (type instanceof avro.types.UnwrappedUnionType || type instanceof avro.types.WrappedUnionType) {
    return type.types.map(describeType).join(' | ');
  }
  if (type instanceof avro.types.RecordType) return `record ${type.name ?? ''}`.trim();
  if (type instanceof avro.types.ArrayType) return `array of ${describeType(type.itemsType)}`;
  if (type instanceof avro.types.MapType) return `map of ${describeType(type.valuesType)}`;
  return type.typeName;
}

/** Scalars shown (short, so a reason header stays small); structures only named. */
function describeValue(value: unknown): string {
  if (value === undefined) return 'nothing (field missing)';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  const shown = JSON.stringify(value);
  return shown.length > MAX_SHOWN_CHARS ? `${shown.slice(0, MAX_SHOWN_CHARS)}…` : shown;
}

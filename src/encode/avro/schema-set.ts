import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import avro from 'avsc';
import { FOR_SCHEMA_OPTIONS, LOGICAL_TYPES, PASS_THROUGH_LOGICAL_TYPES } from './logical-types.js';

/** One `.avsc` file, parsed and compiled once. */
export interface LocalSchema {
  /** The event type it encodes: the file name without `.avsc` (`invoice.paid`). */
  readonly eventType: string;
  /** The file, relative to the working directory, for messages. */
  readonly file: string;
  /** `namespace.name` of the top-level record. */
  readonly fullName: string;
  /** The schema text sent to the registry (the file's JSON, re-serialized compactly). */
  readonly definition: string;
  readonly type: avro.Type;
}

export interface SchemaProblem {
  readonly file: string;
  /** Where in the schema: a field path such as `lines.items.amount_cents`, or `(root)`. */
  readonly path: string;
  readonly message: string;
}

export interface SchemaSet {
  readonly dir: string;
  readonly byEventType: ReadonlyMap<string, LocalSchema>;
  readonly problems: readonly SchemaProblem[];
}

export function formatProblem(problem: SchemaProblem): string {
  return `${problem.file}: ${problem.path}: ${problem.message}`;
}

/**
 * Reads every `*.avsc` under `dir` (any depth). The event type is the file name, so
 * `schemas/billing/invoice.paid.avsc` encodes `invoice.paid`; two files for one event type is a
 * problem, like a file that does not parse or compile. Problems are collected, not thrown, so
 * `schemas check` can list them all.
 */
export async function loadSchemaSet(dir: string): Promise<SchemaSet> {
  const files = await findSchemaFiles(dir);
  const byEventType = new Map<string, LocalSchema>();
  const problems: SchemaProblem[] = [];
  for (const absolute of files) {
    const file = displayPath(absolute);
    const loaded = loadSchemaText(file, await readFile(absolute, 'utf8'));
    if ('problems' in loaded) {
      problems.push(...loaded.problems);
      continue;
    }
    const existing = byEventType.get(loaded.eventType);
    if (existing) {
      problems.push({ file, path: '(file)', message: `event type "${loaded.eventType}" already has a schema in ${existing.file}` });
      continue;
    }
    byEventType.set(loaded.eventType, loaded);
  }
  return { dir, byEventType, problems };
}

/** Relative to the working directory when inside it, else absolute. */
export function displayPath(file: string): string {
  const relative = path.relative(process.cwd(), path.resolve(file));
  return relative === '' || relative.startsWith('..') ? path.resolve(file) : relative;
}

async function findSchemaFiles(dir: string): Promise<string[]> {
  const names = (await readdir(dir, { recursive: true })).filter((name) => name.endsWith('.avsc')).sort();
  const files: string[] = [];
  for (const name of names) {
    const file = path.join(dir, name);
    if ((await stat(file)).isFile()) files.push(file);
  }
  return files;
}

/** Parses and compiles one schema; `file` names it in problems and gives the event type. */
export function loadSchemaText(file: string, text: string): LocalSchema | { problems: SchemaProblem[] } {
  const eventType = path.basename(file).replace(/\.avsc$/, '');
  const problem = (where: string, message: string) => ({ problems: [{ file, path: where, message }] });
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    return problem(jsonPosition(text, error), `not valid JSON: ${(error as Error).message.replace(/\s+/g, ' ')}`);
  }
  if (!isObject(raw) || raw.type !== 'record') return problem('(root)', 'an event schema must be a record (the payload is a JSON object)');
  if (typeof raw.name !== 'string' || raw.name === '') return problem('(root)', 'the record needs a name');
  const namespace = typeof raw.namespace === 'string' && raw.namespace !== '' ? raw.namespace : raw.name.includes('.') ? raw.name.slice(0, raw.name.lastIndexOf('.')) : '';
  if (namespace === '') return problem('(root)', 'the record needs a namespace (e.g. "namespace": "com.example.billing")');

  const paths = new Map<object, string>();
  const defaults: { readonly json: string; readonly path: string }[] = [];
  const logicalProblems: SchemaProblem[] = [];
  walk(raw, [], (node, where) => {
    paths.set(node, formatWhere(where));
    if ('default' in node && typeof node.name === 'string') defaults.push({ json: JSON.stringify(node.default), path: formatWhere(where) });
    const logical = node.logicalType;
    if (typeof logical === 'string' && !(logical in LOGICAL_TYPES) && !PASS_THROUGH_LOGICAL_TYPES.has(logical)) {
      logicalProblems.push({ file, path: formatWhere(where), message: `logicalType "${logical}" is not supported (supported: ${[...Object.keys(LOGICAL_TYPES), ...PASS_THROUGH_LOGICAL_TYPES].join(', ')}; money is integer minor units)` });
    }
  });
  if (logicalProblems.length > 0) return { problems: logicalProblems };

  let last: Record<string, unknown> = raw;
  let lastName: unknown = undefined;
  let type: avro.Type;
  try {
    type = avro.Type.forSchema(raw as avro.Schema, {
      ...FOR_SCHEMA_OPTIONS,
      typeHook: (schema) => {
        if (isObject(schema)) last = schema;
        lastName = typeof schema === 'string' ? schema : undefined;
        return undefined;
      },
    });
  } catch (error) {
    const message = (error as Error).message;
    // avsc names a bad default by its value only; find the field that has it.
    const badDefault = /field default (.*) \(/.exec(message)?.[1];
    // A type name that does not resolve is a string, not an object: find the field that holds it.
    const field = lastName === undefined || !Array.isArray(last.fields) ? undefined : (last.fields as unknown[]).find((each) => isObject(each) && each.type === lastName);
    const where = defaults.find((entry) => entry.json === badDefault)?.path ?? paths.get(isObject(field) ? field : last) ?? '(root)';
    return problem(where, message);
  }
  const fullName = type.name ?? `${namespace}.${raw.name}`;
  return { eventType, file, fullName, definition: JSON.stringify(raw), type };
}

type Where = readonly string[];

/** Visits every object node of a schema with its place: field names, `items`, `values`, union index. */
function walk(node: unknown, where: Where, visit: (node: Record<string, unknown>, where: Where) => void): void {
  if (Array.isArray(node)) {
    node.forEach((branch, i) => walk(branch, [...where, `[${i}]`], visit));
    return;
  }
  if (!isObject(node)) return;
  visit(node, where);
  if (Array.isArray(node.fields)) {
    for (const field of node.fields) {
      if (!isObject(field)) continue;
      const name = typeof field.name === 'string' ? field.name : '?';
      visit(field, [...where, name]);
      walk(field.type, [...where, name], visit);
    }
  }
  if ('items' in node) walk(node.items, [...where, 'items'], visit);
  if ('values' in node) walk(node.values, [...where, 'values'], visit);
  if (isObject(node.type) || Array.isArray(node.type)) walk(node.type, where, visit);
}

function formatWhere(where: Where): string {
  if (where.length === 0) return '(root)';
  return where.reduce((text, part) => (part.startsWith('[') || text === '' ? `${text}${part}` : `${text}.${part}`), '');
}

function jsonPosition(text: string, error: unknown): string {
  const match = /position (\d+)/.exec((error as Error).message);
  if (!match) return '(json)';
  const before = text.slice(0, Number(match[1]));
  const line = before.split('\n').length;
  const column = before.length - before.lastIndexOf('\n');
  return `line ${line} column ${column}`;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

import pg from 'pg';
import { DEFAULT_COLUMNS, isPlainIdentifier, type ColumnMap, type ColumnRole } from './outbox-table.js';
import type { RelationRef } from './source/messages.js';

/**
 * The outboxes one relay streams through its one slot: tables (each with its own column map
 * and topic template), tables a pattern names (a schema per tenant: `tenant_*.event_outbox`,
 * tenants added while the relay runs), and table-less events a prefix selects among the
 * logical decoding messages (`pg_logical_emit_message(true, prefix, content)`). Every one of
 * them reaches Kafka in commit order, through one confirmed position.
 */
export type Outbox = TableOutbox | TablePattern | MessageOutbox;

/** How an outbox's payloads are encoded: OUTBOX_FORMAT, or its entry's own "format". */
export type PayloadFormat = 'json' | 'avro';
export const PAYLOAD_FORMATS: readonly PayloadFormat[] = ['json', 'avro'];

export interface TableOutbox {
  readonly kind: 'table';
  readonly table: RelationRef;
  readonly columns: ColumnMap;
  /** With {schema} and {table} already filled in: they are this table's. */
  readonly topicTemplate: string;
  readonly format: PayloadFormat;
  /** The pattern that named it (a tenant's table); absent for a table named outright. */
  readonly pattern?: RelationRef;
}

/** Every table whose schema and name match, `*` standing for any run of characters. */
export interface TablePattern {
  readonly kind: 'tables';
  readonly pattern: RelationRef;
  readonly columns: ColumnMap;
  /** {schema} and {table} still in: each matching table fills in its own. */
  readonly topicTemplate: string;
  readonly format: PayloadFormat;
}

export interface MessageOutbox {
  readonly kind: 'messages';
  readonly prefix: string;
  readonly topicTemplate: string;
  readonly format: PayloadFormat;
}

/**
 * How a record names the outbox it came from (the `outbox_source` header, dead letters):
 * `schema.table`, or `message:<prefix>` (a prefix may hold dots, a table name may not hold a colon).
 */
export function outboxName(outbox: Outbox): string {
  if (outbox.kind === 'messages') return `message:${outbox.prefix}`;
  return qualifiedName(outbox.kind === 'table' ? outbox.table : outbox.pattern);
}

/** The tables named outright and the patterns: what a handover's mark is looked for on (a message outbox has no table). */
export function outboxTableRefs(outboxes: readonly Outbox[]): RelationRef[] {
  return outboxes.flatMap((outbox) => (outbox.kind === 'table' ? [outbox.table] : outbox.kind === 'tables' ? [outbox.pattern] : []));
}

/** Whether `relation` is one of the tables a pattern names. */
export function matchesPattern(pattern: RelationRef, relation: RelationRef): boolean {
  return globMatches(pattern.schema, relation.schema) && globMatches(pattern.name, relation.name);
}

function globMatches(glob: string, name: string): boolean {
  if (!glob.includes('*')) return glob === name;
  const parts = glob.split('*');
  if (!name.startsWith(parts[0]!) || !name.endsWith(parts.at(-1)!) || name.length < parts[0]!.length + parts.at(-1)!.length) return false;
  let at = parts[0]!.length;
  for (const part of parts.slice(1, -1)) {
    const found = name.indexOf(part, at);
    if (found < 0) return false;
    at = found + part.length;
  }
  return at <= name.length - parts.at(-1)!.length;
}

/** A pattern as SQL LIKE patterns for schema and name (`_` and `%` taken literally, `*` any run). */
export function likePatterns(pattern: RelationRef): { readonly schema: string; readonly name: string } {
  const like = (glob: string) => glob.replace(/[\\%_]/g, (c) => `\\${c}`).replaceAll('*', '%');
  return { schema: like(pattern.schema), name: like(pattern.name) };
}

/**
 * The outbox a table of the stream belongs to, with its template filled in: a table named
 * outright first, then the first pattern it matches; undefined for any other table.
 */
export function tableOutboxOf(outboxes: readonly Outbox[], relation: RelationRef): TableOutbox | undefined {
  const named = outboxes.find((outbox): outbox is TableOutbox => outbox.kind === 'table' && outbox.table.schema === relation.schema && outbox.table.name === relation.name);
  if (named) return named;
  const pattern = outboxes.find((outbox): outbox is TablePattern => outbox.kind === 'tables' && matchesPattern(outbox.pattern, relation));
  return pattern && { kind: 'table', table: { schema: relation.schema, name: relation.name }, columns: pattern.columns, topicTemplate: fillTable(pattern.topicTemplate, relation), format: pattern.format, pattern: pattern.pattern };
}

/**
 * Two outboxes of different formats that write one topic whatever their events hold: templates
 * with no placeholder left (a table's {schema} and {table} are filled in) that are equal; null
 * if there are none. Templates that still hold {aggregate_type} or {event_type} (or a pattern's
 * {schema} and {table}) meet only if events (or tenants) make them meet, which nothing at start
 * can tell: the record builder refuses those when they do.
 */
export function fixedTopicFormatConflict(outboxes: readonly Outbox[]): { readonly topic: string; readonly outboxes: readonly [Outbox, Outbox] } | null {
  const byTopic = new Map<string, Outbox>();
  for (const outbox of outboxes) {
    const topic = outbox.topicTemplate;
    if (/\{[^}]*\}/.test(topic)) continue;
    const first = byTopic.get(topic);
    if (first === undefined) byTopic.set(topic, outbox);
    else if (first.format !== outbox.format) return { topic, outboxes: [first, outbox] };
  }
  return null;
}

function fillTable(template: string, table: RelationRef): string {
  return template.replaceAll('{schema}', table.schema).replaceAll('{table}', table.name);
}

export function qualifiedName(table: RelationRef): string {
  return `${table.schema}.${table.name}`;
}

/** `"schema"."name"`, for SQL. */
export function quotedName(table: RelationRef): string {
  return `${pg.escapeIdentifier(table.schema)}.${pg.escapeIdentifier(table.name)}`;
}

/** One entry of OUTBOX_SOURCES as written: what it leaves out comes from OUTBOX_COLUMN_*, OUTBOX_TOPIC_TEMPLATE and OUTBOX_FORMAT. */
export type OutboxEntry = (
  | { readonly table: RelationRef; readonly columns: Partial<Record<ColumnRole, string | null>> }
  | { readonly tables: RelationRef; readonly columns: Partial<Record<ColumnRole, string | null>> }
  | { readonly messages: string }
) & { readonly topicTemplate: string | null; readonly format: PayloadFormat | null };

/** The placeholders a table's topic template may hold beside the event's own: filled in once, at start. */
export const TABLE_PLACEHOLDERS = ['schema', 'table'] as const;

export const OUTBOX_SOURCES_EXAMPLE = '[{"table":"billing.outbox"},{"table":"payments.outbox","columns":{"eventId":"id"},"topicTemplate":"payments.{event_type}","format":"avro"},{"tables":"tenant_*.event_outbox"},{"messages":"outbox"}]';

const ENTRY_KEYS = { table: ['table', 'columns', 'topicTemplate', 'format'], tables: ['tables', 'columns', 'topicTemplate', 'format'], messages: ['messages', 'topicTemplate', 'format'] } as const;

/**
 * OUTBOX_SOURCES: a JSON array, each entry `{"table": "schema.name", "columns": {...},
 * "topicTemplate": "...", "format": "json" | "avro"}`, `{"tables": "tenant_*.name", ...}` (the same, for every table the
 * pattern names) or `{"messages": "<prefix>", "topicTemplate": "..."}`. Every
 * problem names the entry and what was expected; a topic template is checked by `checkTemplate`
 * (the one OUTBOX_TOPIC_TEMPLATE is checked with).
 */
export function parseOutboxEntries(raw: string, checkTemplate: (template: string) => string): OutboxEntry[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (error) {
    throw new Error(`is not JSON (${(error as Error).message})`);
  }
  if (!Array.isArray(parsed) || parsed.length === 0) throw new Error('is not a non-empty JSON array');
  const seen = new Set<string>();
  return parsed.map((entry: unknown, index) => {
    const where = `entry ${index + 1}`;
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) throw new Error(`${where} is not an object`);
    const fields = entry as Record<string, unknown>;
    const kinds = (['table', 'tables', 'messages'] as const).filter((key) => key in fields);
    const kind = kinds.length === 1 ? kinds[0]! : null;
    if (kind === null) throw new Error(`${where} has ${kinds.length === 0 ? 'none' : kinds.map((key) => `"${key}"`).join(' and ')} of "table", "tables" and "messages" (exactly one of them)`);
    const unknown = Object.keys(fields).filter((key) => !(ENTRY_KEYS[kind] as readonly string[]).includes(key));
    if (unknown.length > 0) throw new Error(`${where} has unknown keys ${unknown.map((key) => `"${key}"`).join(', ')} (expected ${ENTRY_KEYS[kind].map((key) => `"${key}"`).join(', ')})`);
    const topicTemplate = fields.topicTemplate === undefined ? null : checkTemplate(text(fields.topicTemplate, `${where} "topicTemplate"`));
    const format = fields.format === undefined ? null : payloadFormat(fields.format, where);
    if (kind === 'messages') {
      const prefix = text(fields.messages, `${where} "messages"`);
      if (topicTemplate !== null && TABLE_PLACEHOLDERS.some((name) => topicTemplate.includes(`{${name}}`))) {
        throw new Error(`${where}: a message outbox has no table, so its "topicTemplate" cannot use {schema} or {table}`);
      }
      unique(seen, `message:${prefix}`, `${where} repeats the prefix "${prefix}"`);
      return { messages: prefix, topicTemplate, format };
    }
    const table = qualifiedTable(text(fields[kind], `${where} "${kind}"`), where, kind === 'tables');
    unique(seen, qualifiedName(table), `${where} repeats the ${kind === 'tables' ? 'pattern' : 'table'} ${qualifiedName(table)}`);
    const columns = columnOverrides(fields.columns, where);
    return kind === 'tables' ? { tables: table, columns, topicTemplate, format } : { table, columns, topicTemplate, format };
  });
}

/** An entry made whole with the defaults: OUTBOX_COLUMN_*, OUTBOX_TOPIC_TEMPLATE and OUTBOX_FORMAT. */
export function completeOutbox(entry: OutboxEntry, defaults: { readonly columns: ColumnMap; readonly topicTemplate: string; readonly format: PayloadFormat }): Outbox {
  const template = entry.topicTemplate ?? defaults.topicTemplate;
  const format = entry.format ?? defaults.format;
  if ('messages' in entry) return { kind: 'messages', prefix: entry.messages, topicTemplate: template, format };
  const columns = { ...defaults.columns, ...entry.columns } as ColumnMap;
  if ('tables' in entry) return { kind: 'tables', pattern: entry.tables, columns, topicTemplate: template, format };
  return { kind: 'table', table: entry.table, columns, topicTemplate: fillTable(template, entry.table), format };
}

function payloadFormat(value: unknown, where: string): PayloadFormat {
  if (!PAYLOAD_FORMATS.includes(value as PayloadFormat)) throw new Error(`${where} "format" is ${JSON.stringify(value)}, expected ${PAYLOAD_FORMATS.map((format) => `"${format}"`).join(' or ')}`);
  return value as PayloadFormat;
}

function columnOverrides(value: unknown, where: string): Partial<Record<ColumnRole, string | null>> {
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error(`${where} "columns" is not an object of column names by role`);
  const columns: Partial<Record<ColumnRole, string | null>> = {};
  for (const [role, name] of Object.entries(value)) {
    if (!(role in DEFAULT_COLUMNS)) throw new Error(`${where} "columns" has an unknown role "${role}" (expected ${Object.keys(DEFAULT_COLUMNS).map((key) => `"${key}"`).join(', ')})`);
    if (name === null && role === 'aggregateType') {
      columns.aggregateType = null;
      continue;
    }
    if (typeof name !== 'string' || !isPlainIdentifier(name)) throw new Error(`${where} "columns"."${role}" is not a plain SQL identifier${role === 'aggregateType' ? ' (or null: the table has none)' : ''}`);
    columns[role as ColumnRole] = name;
  }
  return columns;
}

function qualifiedTable(name: string, where: string, pattern: boolean): RelationRef {
  const parts = name.split('.');
  if (!pattern) {
    if (parts.length !== 2 || !parts.every(isPlainIdentifier)) throw new Error(`${where} "table" is not a schema-qualified table name (schema.table)`);
  } else if (parts.length !== 2 || !parts.every((part) => part !== '*' && isPlainIdentifier(part.replaceAll('*', 'x'))) || !name.includes('*')) {
    throw new Error(`${where} "tables" is not a pattern of schema-qualified table names (schema.table with * for any run of characters, e.g. tenant_*.event_outbox)`);
  }
  return { schema: parts[0]!, name: parts[1]! };
}

function text(value: unknown, what: string): string {
  if (typeof value !== 'string' || value.trim() === '') throw new Error(`${what} is not a non-empty string`);
  return value.trim();
}

function unique(seen: Set<string>, key: string, problem: string): void {
  if (seen.has(key)) throw new Error(problem);
  seen.add(key);
}

import { isUtf8 } from 'node:buffer';
import { MessageDecoder } from '../decode/message-decoder.js';
import type { PayloadEncoders } from '../encode/create-encoder.js';
import type { PayloadEncoder } from '../encode/encoder.js';
import { RowDecoder } from '../decode/row-decoder.js';
import { PoisonEventError } from '../errors.js';
import type { OutboxEvent } from '../event.js';
import { DEFAULT_COLUMNS, unmappedRole } from '../outbox-table.js';
import { outboxName, qualifiedName, tableOutboxOf, type MessageOutbox, type Outbox, type TableOutbox } from '../outboxes.js';
import type { RelationRef, RowValues } from '../source/messages.js';
import { compileTopicTemplate, type TopicRouter } from './topic-router.js';

/** What a dead letter carries of an event it could not publish. */
export interface PoisonedEvent {
  readonly eventId: string | null;
  readonly key: string | null;
  /** The values as read, serialized as the dead letter's JSON value. */
  readonly values: unknown;
  /** Where a copy is kept, for a dead letter too large to carry them. */
  readonly copy: string;
}

/** How one outbox's events become records: decoded by its column map or as messages, routed by its template. */
export interface OutboxRoute {
  /** `schema.table` or `message:<prefix>`: the `outbox_source` header, dead letters, logs. */
  readonly name: string;
  /**
   * The outbox as declared: its table, its pattern (every tenant's table of `tenant_*.event_outbox`
   * alike), or `message:<prefix>`. Metrics are labelled by it: as many series as OUTBOX_SOURCES
   * has entries, however many tenants.
   */
  readonly declared: string;
  /** Values read from the WAL (a row; for a message, `MESSAGE_VALUES`) -> event. */
  readonly decode: (values: RowValues) => OutboxEvent;
  readonly route: TopicRouter;
  /** The template `route` was compiled from (a table's {schema} and {table} filled in), for messages. */
  readonly topicTemplate: string;
  /** Its format's encoder (OUTBOX_FORMAT, or its entry's own). */
  readonly encoder: PayloadEncoder;
  readonly poisoned: (values: RowValues) => PoisonedEvent;
  /** What publishes one of its events again once the cause of its dead letter is fixed, as advice ending a sentence. */
  readonly again: string;
}

/**
 * Told when a table of the stream becomes unpublishable (its description lacks a column its map
 * needs: a tenant's migration dropped or renamed it; `reason` says which) and when it is
 * publishable again (`reason` null): the quarantine metric.
 */
export type QuarantineListener = (table: string, reason: string | null) => void;

/** A message as the pipeline hands it on: its prefix, and its content as written. */
export interface MessageValues {
  readonly prefix: string;
  readonly content: Buffer;
}

/**
 * Every outbox of the configuration, found by the relation of a row or the prefix of a
 * message. A relation is matched once per session (pgoutput describes it before its first
 * row), then found by the identity of its description: no name comparison per event. A table
 * a pattern names gets its route when its first row comes (a tenant created while the relay
 * runs), kept for the relay's life like a named one's.
 */
export class OutboxRoutes {
  private readonly tables = new Map<string, TableRoute | null>();
  private readonly prefixes = new Map<string, OutboxRoute>();
  private readonly byRelation = new WeakMap<RelationRef, OutboxRoute | null>();
  /** Tables whose last description could not be published (or found so at start), with the reason. */
  private readonly quarantined: Map<string, string>;
  /** Whether the stream asks for logical decoding messages (pgoutput's `messages` option). */
  readonly streamsMessages: boolean;

  constructor(
    private readonly outboxes: readonly Outbox[],
    private readonly encoders: PayloadEncoders,
    private readonly onQuarantine: QuarantineListener = () => undefined,
    quarantinedAtStart: ReadonlyMap<string, string> = new Map(),
  ) {
    this.quarantined = new Map(quarantinedAtStart);
    for (const outbox of outboxes) if (outbox.kind === 'messages') this.prefixes.set(outbox.prefix, messageRoute(outbox, encoders.of(outbox.format)));
    this.streamsMessages = this.prefixes.size > 0;
  }

  /** The outbox tables and patterns, for what tells an operator which the publication should cover. */
  get tableNames(): string[] {
    return this.outboxes.filter((outbox) => outbox.kind !== 'messages').map(outboxName);
  }

  /**
   * The route of a relation's rows; undefined: the relation is no outbox of this relay. Decided
   * once per description of the relation (pgoutput describes it again after its columns change):
   * a description that lacks a column the map needs quarantines the table, so that each of its
   * rows is a dead letter naming the table and the column, and every other outbox streams on.
   */
  forRelation(relation: RelationRef): OutboxRoute | undefined {
    let route = this.byRelation.get(relation);
    if (route === undefined) {
      route = this.describedRoute(relation);
      this.byRelation.set(relation, route);
    }
    return route ?? undefined;
  }

  private describedRoute(relation: RelationRef): OutboxRoute | null {
    const name = qualifiedName(relation);
    let table = this.tables.get(name);
    if (table === undefined) {
      const outbox = tableOutboxOf(this.outboxes, relation);
      table = outbox ? { outbox, route: tableRoute(outbox, this.encoders.of(outbox.format)) } : null;
      this.tables.set(name, table);
    }
    if (!table || !relation.columns) return table?.route ?? null;
    const unmapped = unmappedRole(table.outbox.columns, new Set(relation.columns.map((column) => column.name)));
    if (unmapped === null) {
      if (this.quarantined.delete(name)) this.onQuarantine(name, null);
      return table.route;
    }
    const reason = `outbox table ${name} is quarantined: ${unmapped}. Its rows go to the dead-letter topic until the table is fixed; then publish them with \`outbox-relay replay\` (docs/runbooks/OutboxRelayOutboxTableQuarantined.md)`;
    if (this.quarantined.get(name) !== reason) {
      this.quarantined.set(name, reason);
      this.onQuarantine(name, reason);
    }
    return quarantinedRoute(table.route, new PoisonEventError('OUTBOX_TABLE_QUARANTINED', reason, { details: { table: name } }));
  }

  /**
   * The route of a message: its prefix's, or one that dead-letters it with the reason (a
   * message nobody declared, or one that is not atomic with any business change): never
   * dropped, never stalling the stream.
   */
  forMessage(prefix: string, transactional: boolean): OutboxRoute {
    if (!transactional) {
      return refusedMessage(prefix, new PoisonEventError('SOURCE_MESSAGE_NOT_TRANSACTIONAL', `message with prefix "${prefix}" was emitted non-transactionally (pg_logical_emit_message(false, ...)): it is not atomic with any business change; emit outbox events with transactional = true`));
    }
    return this.prefixes.get(prefix) ?? refusedMessage(prefix, new PoisonEventError('SOURCE_MESSAGE_UNDECLARED', `message with prefix "${prefix}", which no message outbox declares (declared: ${[...this.prefixes.keys()].map((each) => `"${each}"`).join(', ')}); add it to OUTBOX_SOURCES or fix the writer's prefix`));
  }
}

/** A table's route and the outbox it is for (its column map). */
interface TableRoute {
  readonly outbox: TableOutbox;
  readonly route: OutboxRoute;
}

/** A quarantined table's route: each row a dead letter (with what the row holds), routed and counted as the table's. */
function quarantinedRoute(route: OutboxRoute, reason: PoisonEventError): OutboxRoute {
  return {
    ...route,
    decode: () => {
      throw reason;
    },
  };
}

function tableRoute(outbox: TableOutbox, encoder: PayloadEncoder): OutboxRoute {
  const decoder = new RowDecoder(outbox.columns);
  const { eventId, aggregateId } = outbox.columns;
  return {
    name: outboxName(outbox),
    declared: qualifiedName(outbox.pattern ?? outbox.table),
    decode: (row) => decoder.decode(row),
    route: compileTopicTemplate(outbox.topicTemplate),
    topicTemplate: outbox.topicTemplate,
    encoder,
    poisoned: (row) => ({ eventId: idText(row[eventId]), key: idText(row[aggregateId]), values: row, copy: `the row is still in ${qualifiedName(outbox.table)}` }),
    again: TABLE_AGAIN,
  };
}

function messageRoute(outbox: MessageOutbox, encoder: PayloadEncoder): OutboxRoute {
  const decoder = new MessageDecoder();
  return {
    name: outboxName(outbox),
    declared: outboxName(outbox),
    decode: (values) => decoder.decode((values as unknown as MessageValues).content),
    route: compileTopicTemplate(outbox.topicTemplate),
    topicTemplate: outbox.topicTemplate,
    encoder,
    poisoned: poisonedMessage,
    again: MESSAGE_AGAIN,
  };
}

function refusedMessage(prefix: string, reason: PoisonEventError): OutboxRoute {
  return {
    name: `message:${prefix}`,
    // Never on a published record (every one is a dead letter): not a metric label.
    declared: `message:${prefix}`,
    decode: () => {
      throw reason;
    },
    route: () => {
      throw reason;
    },
    topicTemplate: '',
    // Never reached: decoding throws first.
    encoder: {
      format: 'refused',
      encode: () => {
        throw reason;
      },
    },
    poisoned: poisonedMessage,
    again: MESSAGE_AGAIN,
  };
}

const TABLE_AGAIN = 'replay the event';
/**
 * `replay` reads tables: a message exists only in the WAL until the slot moves past it. The dead
 * letter holds its content unless the dead letter itself is over OUTBOX_MAX_MESSAGE_BYTES
 * (dead-letter.ts omits the value then, and its header says so).
 */
const MESSAGE_AGAIN = 'emit the event again from the application: a message outbox has no row to replay (the dead letter holds the content, unless its dead_letter_row_omitted header says it was too large)';

/**
 * A message's dead letter: its prefix and its content as text (as base64, `content_base64`,
 * when it is not UTF-8: text would change its bytes), with its id and key where the content has them.
 */
function poisonedMessage(values: RowValues): PoisonedEvent {
  const { prefix, content } = values as unknown as MessageValues;
  const text = content.toString('utf8');
  const kept = isUtf8(content) ? { prefix, content: text } : { prefix, content_base64: content.toString('base64') };
  let fields: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === 'object' && parsed !== null) fields = parsed as Record<string, unknown>;
  } catch {
    // Not JSON: the dead letter says so; it has no id or key to carry.
  }
  return { eventId: idText(fields[DEFAULT_COLUMNS.eventId]), key: idText(fields[DEFAULT_COLUMNS.aggregateId]), values: kept, copy: 'a message outbox keeps no copy (the WAL holds it until the slot moves past it)' };
}

function idText(value: unknown): string | null {
  return typeof value === 'string' || typeof value === 'number' ? String(value) : null;
}

import { PgoutputPlugin, type Pgoutput } from 'pg-logical-replication';
import { RelayError } from '../errors.js';
import { readLsn, ZERO_LSN, type Lsn } from '../lsn.js';
import type { RelationRef, SourceMessage } from './messages.js';

// Streaming replication CopyData framing (protocol-replication.html): 'w' XLogData carries
// a pgoutput message after a 25-byte header; 'k' is the primary keepalive.
const XLOG_DATA = 0x77;
const KEEPALIVE = 0x6b;
const XLOG_HEADER_BYTES = 25;
// pgoutput messages (protocol-logicalrep-message-formats.html) read here, not by the library:
// Begin and Commit carry the positions, read straight into LSNs.
const BEGIN = 0x42;
const COMMIT = 0x43;
const INSERT = 0x49;
const MESSAGE = 0x4d;
// TupleData column kinds.
const TEXT = 0x74;
const NULL = 0x6e;
const BINARY = 0x62;
const UNCHANGED_TOAST = 0x75;
const POSTGRES_EPOCH_MS = 946_684_800_000;

/**
 * How one column's text becomes a value; undefined keeps pg's parser for its type. A parser
 * with `fromBytes` is given the column's UTF-8 bytes instead (only valid during the call: the
 * frame's buffer is reused), which spares decoding text that is published as bytes.
 */
export type ColumnParserFor = (column: { readonly name: string; readonly typeOid: number }) => ColumnParser | undefined;

export type ColumnParser = ((text: string) => unknown) & { readonly fromBytes?: (bytes: Buffer, start: number, end: number) => unknown };

/** A relation as the decoder reads its rows: column names and each column's parser, in order. */
interface RelationLayout {
  readonly ref: RelationRef;
  readonly names: readonly string[];
  readonly parsers: readonly ColumnParser[];
}

/**
 * The prototype of every decoded row: a row inherits nothing (a column named "constructor" or
 * "__proto__" is a column like any other), yet, unlike Object.create(null), stays a fast-mode
 * object that V8 reads through one shared shape per table.
 */
const ROW_PROTOTYPE: object = Object.freeze(Object.create(null) as object);

export interface PgoutputDecoderOptions {
  /** Parsers of the caller's choosing for the columns of the outbox tables; undefined for any other table. */
  readonly columnParsers?: (relation: RelationRef) => ColumnParserFor | undefined;
}

/**
 * Turns CopyData frames into SourceMessages. pg-logical-replication's parser decodes the
 * relations and rows; the framing, Begin/Commit positions and keepalives are handled here so
 * that no library default decides what position is confirmed.
 */
export class PgoutputDecoder {
  // Only the plugin's parser is used; starting replication and acknowledging stay here.
  private readonly parser = new PgoutputPlugin({ protoVersion: 1, publicationNames: [] });
  /** Relations by oid, as their Relation messages described them (sent before any row). */
  private readonly relations = new Map<number, RelationLayout>();

  constructor(private readonly options: PgoutputDecoderOptions = {}) {}

  /** Returns null for pgoutput messages the relay has no use for (relation, type, origin). */
  decode(frame: Buffer): SourceMessage | null {
    const tag = frame[0];
    if (tag === KEEPALIVE) {
      return { kind: 'position', lsn: readLsn(frame, 1), replyRequested: frame[17] === 1 };
    }
    if (tag !== XLOG_DATA) {
      throw new RelayError('SOURCE_PROTOCOL', `unknown replication frame type 0x${tag?.toString(16) ?? '??'}`);
    }
    const at = XLOG_HEADER_BYTES;
    switch (frame[at]) {
      // Begin: final LSN (int64), commit time (int64), xid (int32, not needed: the commit LSN identifies the transaction)
      case BEGIN:
        return { kind: 'begin', commitLsn: requireLsn(readLsn(frame, at + 1), 'begin'), commitTime: readTime(frame, at + 9) };
      // Commit: flags (int8), commit LSN (int64), end LSN (int64), commit time (int64)
      case COMMIT:
        return { kind: 'commit', commitLsn: requireLsn(readLsn(frame, at + 2), 'commit'), endLsn: requireLsn(readLsn(frame, at + 10), 'commit'), commitTime: readTime(frame, at + 18) };
      // Insert: relation oid (int32), 'N', TupleData. Read here: it is the message of every
      // event, and the library's reader allocates a view and a decoder call per column and a
      // dictionary-mode row.
      case INSERT: {
        const relation = this.relations.get(frame.readInt32BE(at + 1));
        if (relation && frame[at + 5] === 0x4e) return { kind: 'insert', relation: relation.ref, row: readTuple(frame, at + 6, relation) };
        return this.toSourceMessage(this.parser.parse(frame.subarray(at)));
      }
      case MESSAGE:
        return readMessage(frame, at + 1);
      default:
        return this.toSourceMessage(this.parser.parse(frame.subarray(at)));
    }
  }

  private toSourceMessage(message: Pgoutput.Message): SourceMessage | null {
    switch (message.tag) {
      case 'relation':
        this.chooseParsers(message);
        this.relations.set(message.relationOid, {
          ref: message,
          names: message.columns.map((column) => column.name),
          parsers: message.columns.map((column) => column.parser as ColumnParser),
        });
        return null;
      case 'insert':
        return { kind: 'insert', relation: message.relation, row: message.new };
      case 'update':
      case 'delete':
        return { kind: 'change', operation: message.tag, relation: message.relation };
      case 'truncate': {
        const first = message.relations[0];
        return { kind: 'change', operation: 'truncate', relation: first ?? { schema: '?', name: '?' } };
      }
      default:
        return null;
    }
  }

  /**
   * The parser keeps the relation message it returns and decodes the table's rows with each
   * column's `parser`: replacing it here changes how that column is read from now on.
   */
  private chooseParsers(relation: Pgoutput.MessageRelation): void {
    const parserFor = this.options.columnParsers?.(relation);
    if (!parserFor) return;
    for (const column of relation.columns) {
      const parser = parserFor(column);
      if (parser) column.parser = parser;
    }
  }
}

/** TupleData at `at`: Int16 column count, then per column a kind byte and, for text, Int32 length and the bytes. */
function readTuple(frame: Buffer, at: number, relation: RelationLayout): Record<string, unknown> {
  const { names, parsers } = relation;
  const count = frame.readInt16BE(at);
  if (count > names.length) throw new RelayError('SOURCE_PROTOCOL', `pgoutput insert with ${count} columns into ${relation.ref.schema}.${relation.ref.name}, described with ${names.length}`);
  at += 2;
  const row = Object.create(ROW_PROTOTYPE) as Record<string, unknown>;
  for (let i = 0; i < count; i++) {
    const kind = frame[at++];
    const name = names[i]!;
    if (kind === TEXT) {
      const length = frame.readInt32BE(at);
      const start = at + 4;
      at = start + length;
      if (at > frame.length) throw new RelayError('SOURCE_PROTOCOL', 'pgoutput insert ends inside a column value');
      const parser = parsers[i]!;
      row[name] = parser.fromBytes ? parser.fromBytes(frame, start, at) : parser(frame.toString('utf8', start, at));
    } else if (kind === NULL) {
      row[name] = null;
    } else if (kind === BINARY) {
      const length = frame.readInt32BE(at);
      const start = at + 4;
      at = start + length;
      if (at > frame.length) throw new RelayError('SOURCE_PROTOCOL', 'pgoutput insert ends inside a column value');
      // A copy: the frame's buffer is reused for the next read.
      row[name] = Buffer.from(frame.subarray(start, at));
    } else if (kind === UNCHANGED_TOAST) {
      row[name] = undefined;
    } else {
      throw new RelayError('SOURCE_PROTOCOL', `unknown pgoutput column kind 0x${kind?.toString(16) ?? '??'}`);
    }
  }
  return row;
}

/** Message: flags (int8, 1 = transactional), LSN (int64), prefix (C string), content length (int32), content. */
function readMessage(frame: Buffer, at: number): SourceMessage {
  const transactional = (frame[at]! & 1) === 1;
  const lsn = readLsn(frame, at + 1);
  const prefixEnd = frame.indexOf(0, at + 9);
  if (prefixEnd < 0) throw new RelayError('SOURCE_PROTOCOL', 'pgoutput message without the end of its prefix');
  const prefix = frame.toString('utf8', at + 9, prefixEnd);
  const length = frame.readInt32BE(prefixEnd + 1);
  const start = prefixEnd + 5;
  if (start + length > frame.length) throw new RelayError('SOURCE_PROTOCOL', 'pgoutput message ends inside its content');
  // A copy: the frame's buffer is reused for the next read.
  return { kind: 'message', transactional, lsn, prefix, content: Buffer.from(frame.subarray(start, start + length)) };
}

function requireLsn(lsn: Lsn, where: string): Lsn {
  if (lsn === ZERO_LSN) throw new RelayError('SOURCE_PROTOCOL', `pgoutput ${where} message without an LSN`);
  return lsn;
}

/** A pgoutput timestamp (microseconds since 2000-01-01) as a Date, to the millisecond. */
function readTime(frame: Buffer, offset: number): Date {
  const micros = frame.readInt32BE(offset) * 2 ** 32 + frame.readUInt32BE(offset + 4);
  return new Date(Math.floor(micros / 1000) + POSTGRES_EPOCH_MS);
}

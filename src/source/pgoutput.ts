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
const POSTGRES_EPOCH_MS = 946_684_800_000;

/** How one column's text becomes a value; undefined keeps pg's parser for its type. */
export type ColumnParserFor = (column: { readonly name: string; readonly typeOid: number }) => ((text: string) => unknown) | undefined;

export interface PgoutputDecoderOptions {
  /** Parsers of the caller's choosing for the columns of one table (the outbox). */
  readonly columnParsers?: { readonly table: RelationRef; readonly parserFor: ColumnParserFor };
}

/**
 * Turns CopyData frames into SourceMessages. pg-logical-replication's parser decodes the
 * relations and rows; the framing, Begin/Commit positions and keepalives are handled here so
 * that no library default decides what position is confirmed.
 */
export class PgoutputDecoder {
  // Only the plugin's parser is used; starting replication and acknowledging stay here.
  private readonly parser = new PgoutputPlugin({ protoVersion: 1, publicationNames: [] });

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
      default:
        return this.toSourceMessage(this.parser.parse(frame.subarray(at)));
    }
  }

  private toSourceMessage(message: Pgoutput.Message): SourceMessage | null {
    switch (message.tag) {
      case 'relation':
        this.chooseParsers(message);
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
    const wanted = this.options.columnParsers;
    if (!wanted || relation.name !== wanted.table.name || relation.schema !== wanted.table.schema) return;
    for (const column of relation.columns) {
      const parser = wanted.parserFor(column);
      if (parser) column.parser = parser;
    }
  }
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

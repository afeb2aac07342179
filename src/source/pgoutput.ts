import { PgoutputPlugin, type Pgoutput } from 'pg-logical-replication';
import { RelayError } from '../errors.js';
import { parseLsn, readLsn } from '../lsn.js';
import type { SourceMessage } from './messages.js';

// Streaming replication CopyData framing (protocol-replication.html): 'w' XLogData carries
// a pgoutput message after a 25-byte header; 'k' is the primary keepalive.
const XLOG_DATA = 0x77;
const KEEPALIVE = 0x6b;
const XLOG_HEADER_BYTES = 25;

/**
 * Turns CopyData frames into SourceMessages. pg-logical-replication's parser decodes the
 * pgoutput payload; the framing, LSNs and keepalives are handled here so that no library
 * default decides what position is confirmed.
 */
export class PgoutputDecoder {
  // Only the plugin's parser is used; starting replication and acknowledging stay here.
  private readonly parser = new PgoutputPlugin({ protoVersion: 1, publicationNames: [] });

  /** Returns null for pgoutput messages the relay has no use for (relation, type, origin). */
  decode(frame: Buffer): SourceMessage | null {
    const tag = frame[0];
    if (tag === KEEPALIVE) {
      return { kind: 'position', lsn: readLsn(frame, 1), replyRequested: frame[17] === 1 };
    }
    if (tag !== XLOG_DATA) {
      throw new RelayError('SOURCE_PROTOCOL', `unknown replication frame type 0x${tag?.toString(16) ?? '??'}`);
    }
    return this.toSourceMessage(this.parser.parse(frame.subarray(XLOG_HEADER_BYTES)));
  }

  private toSourceMessage(message: Pgoutput.Message): SourceMessage | null {
    switch (message.tag) {
      case 'begin':
        return {
          kind: 'begin',
          xid: message.xid,
          commitLsn: parseLsn(requireLsn(message.commitLsn, 'begin')),
          commitTime: toDate(message.commitTime),
        };
      case 'insert':
        return { kind: 'insert', relation: message.relation, row: message.new };
      case 'update':
      case 'delete':
        return { kind: 'change', operation: message.tag, relation: message.relation };
      case 'truncate': {
        const first = message.relations[0];
        return { kind: 'change', operation: 'truncate', relation: first ?? { schema: '?', name: '?' } };
      }
      case 'commit':
        return {
          kind: 'commit',
          commitLsn: parseLsn(requireLsn(message.commitLsn, 'commit')),
          endLsn: parseLsn(requireLsn(message.commitEndLsn, 'commit')),
          commitTime: toDate(message.commitTime),
        };
      default:
        return null;
    }
  }
}

function requireLsn(lsn: string | null, where: string): string {
  if (lsn === null) throw new RelayError('SOURCE_PROTOCOL', `pgoutput ${where} message without an LSN`);
  return lsn;
}

// eslint-disable-next-line @typescript-eslint/no-wrapper-object-types -- the parser's declared type
function toDate(microsSinceUnixEpoch: BigInt): Date {
  return new Date(Number((microsSinceUnixEpoch as bigint) / 1000n));
}

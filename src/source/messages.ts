import type { Lsn } from '../lsn.js';

/** One column value as pgoutput delivered it, after pg's type parser (int8 -> string, jsonb -> parsed). */
export type RowValues = Readonly<Record<string, unknown>>;

export interface RelationRef {
  readonly schema: string;
  readonly name: string;
  /** The table's columns as its Relation message described them (a relation of the stream); absent for a table read outright (replay). */
  readonly columns?: readonly { readonly name: string }[];
}

/**
 * What the replication stream hands to the pipeline, in WAL commit order. `position` is a
 * keepalive: no data, but a point the server has sent everything up to, which the checkpoint
 * may confirm when nothing is in flight (so an idle outbox does not hold WAL).
 */
export type SourceMessage =
  | { readonly kind: 'begin'; readonly commitLsn: Lsn; readonly commitTime: Date }
  | { readonly kind: 'insert'; readonly relation: RelationRef; readonly row: RowValues }
  | { readonly kind: 'change'; readonly operation: 'update' | 'delete' | 'truncate'; readonly relation: RelationRef }
  /**
   * A logical decoding message (pg_logical_emit_message), streamed only when the relay asks for
   * them (pgoutput's `messages` option). A transactional one comes between its transaction's
   * Begin and Commit; a non-transactional one on its own, at `lsn`, atomic with nothing.
   */
  | { readonly kind: 'message'; readonly transactional: boolean; readonly lsn: Lsn; readonly prefix: string; readonly content: Buffer }
  | { readonly kind: 'commit'; readonly commitLsn: Lsn; readonly endLsn: Lsn; readonly commitTime: Date }
  | { readonly kind: 'position'; readonly lsn: Lsn; readonly replyRequested: boolean };

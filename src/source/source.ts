import type { StatusReporter } from '../checkpoint/checkpointer.js';
import type { Lsn } from '../lsn.js';
import type { SourceMessage } from './messages.js';
import type { ServerTimeline } from './timeline-gate.js';

/** Which server the positions belong to: LSNs compare only within one system's history. */
export interface SourceOrigin {
  /** pg_control's system identifier: the same on a physical standby, new after initdb or a restore. */
  readonly systemId: string;
  readonly timeline: number;
  /** Where each earlier timeline of this server's history ended (TIMELINE_HISTORY): timeline -> switch LSN. */
  readonly timelineEnds: ReadonlyMap<number, Lsn>;
}

/** Where a session starts: the slot's confirmed position, on which server. */
export interface StreamStart {
  readonly confirmed: Lsn;
  readonly origin: SourceOrigin;
  /** The server is a standby in recovery (the slot of OUTBOX_REPLICA_URL); false on a primary. */
  readonly onStandby: boolean;
}

/**
 * One replication session as the relay sees it: ReplicationStream implements it on Postgres;
 * unit tests of the relay use a fake.
 */
export interface SourceStream extends StatusReporter {
  /** Connects and starts streaming; resolves to the slot's confirmed position and the server's identity. */
  start(): Promise<StreamStart>;
  /** The next message, undefined when none is buffered or reading stopped; throws what ended the stream. */
  take(): SourceMessage | undefined;
  /** Resolves when a message is buffered, the stream failed, or reading stopped. */
  wait(): Promise<void>;
  /** True once `stopReading()` was called. */
  readonly stopped: boolean;
  /** Ends `take()`; the connection stays open for a final status update. */
  stopReading(): void;
  /** Ends the stream with `error`, as a lost connection would. */
  abort(error: Error): void;
  /** Milliseconds since the server last sent anything. */
  readonly silentForMs: number;
  /**
   * The server's timeline now and what it replayed (timeline-gate.ts), read beside the stream;
   * absent from a source whose timeline never changes under it (the relay's unit tests' fake).
   */
  readTimeline?(): Promise<ServerTimeline>;
  /** Ends the session; true if the server confirmed it read everything sent (the last status update included). */
  close(): Promise<boolean>;
}

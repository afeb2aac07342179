import type { StatusReporter } from '../checkpoint/checkpointer.js';
import type { Lsn } from '../lsn.js';
import type { SourceMessage } from './messages.js';

/**
 * One replication session as the relay sees it: ReplicationStream implements it on Postgres;
 * unit tests of the relay use a fake.
 */
export interface SourceStream extends StatusReporter {
  /** Connects and starts streaming; resolves to the slot's confirmed position. */
  start(): Promise<Lsn>;
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
  /** Ends the session; true if the server confirmed it read everything sent (the last status update included). */
  close(): Promise<boolean>;
}

import { hostname } from 'node:os';
import pg from 'pg';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { RelayError } from '../errors.js';
import { Fifo } from '../fifo.js';
import { parseLsn, ZERO_LSN, type Lsn } from '../lsn.js';
import { connectPostgres, connectSameServer } from '../pg-connection.js';
import type { SlotServer } from '../slot-server.js';
import { refuseDuringRecovery } from '../setup/recovery-marker.js';
import { invalidation, slotLost, slotMissing } from './slot-errors.js';
import { finishesWithin } from '../time.js';
import type { RelationRef, SourceMessage } from './messages.js';
import { readOrigin } from './origin.js';
import type { SourceStream, StreamStart } from './source.js';
import type { ServerTimeline } from './timeline-gate.js';
import { PgoutputDecoder, type PgoutputDecoderOptions } from './pgoutput.js';

/** The part of pg's Connection that a replication client needs; pg does not type it. */
interface ReplicationWire {
  readonly stream: Duplex;
  on(event: 'copyData', listener: (message: { chunk: Buffer }) => void): void;
  sendCopyFromChunk(chunk: Buffer): void;
  /** CopyDone: asks the server to end START_REPLICATION once it has read everything before. */
  endCopyFrom(): void;
}

export interface ReplicationStreamOptions {
  /** Where the slot is: the primary, or a standby (OUTBOX_REPLICA_URL). */
  readonly slotServer: SlotServer;
  readonly slot: string;
  readonly publication: string;
  /** Messages buffered before the socket is paused: the memory bound on the source side. */
  readonly highWaterMessages: number;
  readonly logger: Logger;
  /** The outbox tables and patterns: streaming is refused while `recover` or `cutover` is unfinished on one of their tables. */
  readonly tables: readonly RelationRef[];
  readonly columnParsers?: PgoutputDecoderOptions['columnParsers'];
  /** Ask for logical decoding messages too (pgoutput's `messages`, Postgres 14+): there is a message outbox. */
  readonly messages: boolean;
  /**
   * A connection that delivered nothing (no data, no keepalive) for this long is dead: the
   * server sends a keepalive at least every wal_sender_timeout / 2, so silence means the
   * network path is gone even though the socket never closed.
   */
  readonly silenceTimeoutMs: number;
}

/** A close that the server does not answer within this is cut: the socket is destroyed. */
const CLOSE_TIMEOUT_MS = 3_000;

const POSTGRES_EPOCH_MS = 946_684_800_000n;
const OBJECT_IN_USE = '55006';
const OBJECT_NOT_IN_PREREQUISITE_STATE = '55000';
const UNDEFINED_OBJECT = '42704';

/**
 * One START_REPLICATION session on a logical slot, read with `take`/`wait` as SourceMessages
 * in commit order. It never acknowledges anything by itself: the only way a
 * position reaches Postgres is `sendStatus(lsn)`, and the wire carries exactly that lsn.
 */
export class ReplicationStream implements SourceStream {
  /** Connected by `start` (to the slot's server: the first primary of DATABASE_URL's hosts, or OUTBOX_REPLICA_URL's standby). */
  private client: pg.Client | null = null;
  private readonly decoder: PgoutputDecoder;
  private readonly messagesReceived = new Fifo<SourceMessage>();
  private wire: ReplicationWire | null = null;
  private paused = false;
  private failure: Error | null = null;
  /** Set by `abort()` (the sink failed): ends `take()`, but the connection is still good for a last status and a clean close. */
  private aborted: Error | null = null;
  private ended = false;
  private wake: (() => void) | null = null;
  /** Set by every frame received; the watchdog reads and clears it (no clock read per frame). */
  private heard = true;
  private lastHeardAt = Date.now();
  private watchdog: NodeJS.Timeout | undefined;
  /** Settles when START_REPLICATION ends: true if it completed (the server read everything the relay sent), false on an error. */
  private streaming: Promise<boolean> = Promise.resolve(false);
  /** readTimeline's connection, made at its first read. */
  private side: Promise<pg.Client> | null = null;

  constructor(private readonly options: ReplicationStreamOptions) {
    this.decoder = new PgoutputDecoder({ columnParsers: options.columnParsers });
  }

  /**
   * Connects and starts streaming from the slot's confirmed position. Returns that position,
   * the point from which Postgres will resend transactions, and which server it is on.
   */
  async start(): Promise<StreamStart> {
    // The application name shows in pg_stat_replication and `outbox-relay status`: which
    // instance (pod) is the active reader.
    const client = await connectPostgres(this.options.slotServer.database, `outbox-relay@${hostname()}`, { replication: true });
    this.client = client;
    client.on('error', (error) => this.fail(error));
    client.on('end', () => this.fail(new RelayError('SOURCE_DISCONNECTED', 'replication connection closed')));
    const confirmed = await this.readConfirmedPosition(client);
    // Recovery before the timeline: a standby promoted in between is taken for a standby on its
    // new timeline (its timeline checked again while streaming), never for a primary on its old one.
    const onStandby = (await client.query<{ standby: boolean }>('SELECT pg_is_in_recovery() AS standby')).rows[0]!.standby;
    const origin = await readOrigin(client);
    this.wire = client.connection as unknown as ReplicationWire;
    this.wire.on('copyData', ({ chunk }) => this.receive(chunk));
    const started = new Promise<void>((resolve) => client.connection.once('replicationStart', () => resolve()));
    // 0/0 asks the server to start from the slot's confirmed_flush_lsn: the relay never
    // chooses a start point of its own, so it cannot skip past what it has not confirmed.
    const sql =
      `START_REPLICATION SLOT ${pg.escapeIdentifier(this.options.slot)} LOGICAL 0/0 ` +
      `(proto_version '1', publication_names ${pg.escapeLiteral(this.options.publication)}${this.options.messages ? ", messages 'true'" : ''})`;
    this.streaming = client.query(sql).then(
      () => {
        this.fail(new RelayError('SOURCE_DISCONNECTED', 'replication ended by the server'));
        return true;
      },
      (error: unknown) => {
        this.fail(classifyStartError(error, this.options.slot));
        return false;
      },
    );
    await Promise.race([started, this.streaming]);
    if (this.failure) throw this.failure;
    this.watchdog = setInterval(() => this.checkSilence(), Math.min(1_000, this.options.silenceTimeoutMs / 4));
    return { confirmed, origin, onStandby };
  }

  /**
   * The next message, or undefined when none is buffered (then `wait()`), or when reading has
   * stopped (`stopped`). Throws what ended the stream once everything before it was taken.
   * A pull API rather than an async iterator: no promise per message on the hot path.
   */
  take(): SourceMessage | undefined {
    if (this.ended) return undefined;
    const message = this.messagesReceived.shift();
    if (message === undefined) {
      const ended = this.failure ?? this.aborted;
      if (ended) throw ended;
      return undefined;
    }
    if (this.paused && this.messagesReceived.length < this.options.highWaterMessages / 2) this.resume();
    return message;
  }

  /** Resolves when a message is buffered, the stream failed, or reading stopped. */
  wait(): Promise<void> {
    if (this.ended || this.failure || this.aborted || this.messagesReceived.length > 0) return Promise.resolve();
    return new Promise<void>((resolve) => (this.wake = resolve));
  }

  /** True once `stopReading()` was called. */
  get stopped(): boolean {
    return this.ended;
  }

  /**
   * The server's timeline and what it replayed, read in that order on a replication connection of
   * its own to the same server (the stream's is busy streaming), made at the first read.
   */
  async readTimeline(): Promise<ServerTimeline> {
    if (!this.client) throw new RelayError('INTERNAL', 'readTimeline before start');
    this.side ??= connectSameServer(this.options.slotServer.database, this.client, `outbox-relay@${hostname()}-timeline`, { replication: true });
    const side = await this.side;
    const replayed = await side.query<{ lsn: string | null }>('SELECT pg_last_wal_replay_lsn()::text AS lsn');
    const identity = await side.query<{ timeline: string | number }>('IDENTIFY_SYSTEM');
    return { timeline: Number(identity.rows[0]!.timeline), replayedTo: replayed.rows[0]!.lsn === null ? ZERO_LSN : parseLsn(replayed.rows[0]!.lsn) };
  }

  /** Standby status update carrying `lsn` as write, flush and apply position — not lsn + 1. */
  sendStatus(lsn: Lsn, replyRequested = false): void {
    if (!this.wire || this.failure) return;
    const update = Buffer.alloc(34);
    update[0] = 0x72; // 'r'
    update.writeBigUInt64BE(lsn, 1);
    update.writeBigUInt64BE(lsn, 9);
    update.writeBigUInt64BE(lsn, 17);
    update.writeBigInt64BE((BigInt(Date.now()) - POSTGRES_EPOCH_MS) * 1000n, 25);
    update[33] = replyRequested ? 1 : 0;
    this.wire.sendCopyFromChunk(update);
  }

  /** Ends `take()`; the connection stays open for a final status update. */
  stopReading(): void {
    this.ended = true;
    this.messagesReceived.clear();
    // Paused on purpose: the watchdog does not take a long drain for a silent server.
    this.paused = true;
    this.wire?.stream.pause();
    this.signal();
  }

  /** Milliseconds since the server last sent anything (0 while reading is paused on purpose). */
  get silentForMs(): number {
    return this.heard || this.paused ? 0 : Date.now() - this.lastHeardAt;
  }

  /**
   * Ends replication the protocol's way (CopyDone, answered by the server once it has read
   * everything sent before, the last status update included) and closes the connection. True
   * if the server answered; false if it had failed already, or did not answer within
   * CLOSE_TIMEOUT_MS (a silent connection), and was cut off.
   */
  async close(): Promise<boolean> {
    clearInterval(this.watchdog);
    this.ended = true;
    this.wake?.();
    const side = this.side;
    this.side = null;
    void side?.then((client) => client.end()).catch(() => undefined);
    const client = this.client;
    // Never connected (the connect failed): nothing to close.
    if (!client) return false;
    client.removeAllListeners('end');
    client.on('error', () => undefined);
    let answered = false;
    if (this.wire && this.failure === null) {
      this.wire.endCopyFrom();
      // Read again if paused: the server's answer comes after whatever it still sends.
      this.wire.stream.resume();
      await finishesWithin(this.streaming.then((completed) => (answered = completed)), CLOSE_TIMEOUT_MS);
    }
    if (!answered) this.cutOff();
    await finishesWithin(client.end().catch(() => undefined), CLOSE_TIMEOUT_MS);
    return answered;
  }

  /** Destroys the socket without waiting for the peer: the only way off a silent connection. */
  private cutOff(): void {
    (this.client?.connection as unknown as ReplicationWire | undefined)?.stream.destroy();
  }

  private checkSilence(): void {
    const now = Date.now();
    // Paused on purpose (the buffer is full): the socket is not read, so silence means nothing.
    if (this.heard || this.paused) {
      this.heard = false;
      this.lastHeardAt = now;
      return;
    }
    const silentMs = now - this.lastHeardAt;
    if (silentMs <= this.options.silenceTimeoutMs) return;
    clearInterval(this.watchdog);
    this.fail(new RelayError('SOURCE_TIMEOUT', `replication connection silent for ${Math.round(silentMs / 1000)}s (no data, no keepalive; OUTBOX_REPLICATION_TIMEOUT is ${this.options.silenceTimeoutMs}ms): the network path to Postgres is gone; reconnecting`));
    this.cutOff();
  }

  private async readConfirmedPosition(client: pg.Client): Promise<Lsn> {
    // A replication connection speaks only the simple query protocol: no bind parameters.
    // invalidation_reason is Postgres 17's (null before): an idle timeout (18) or a standby's
    // conflict leaves wal_status as it was.
    const result = await client.query<{ confirmed_flush_lsn: string | null; wal_status: string | null; invalidation_reason: string | null }>(
      `SELECT confirmed_flush_lsn::text, wal_status, to_jsonb(s) ->> 'invalidation_reason' AS invalidation_reason FROM pg_replication_slots s WHERE slot_name = ${pg.escapeLiteral(this.options.slot)}`,
    );
    const row = result.rows[0];
    if (!row) {
      throw slotMissing(this.options.slot, 'for the relay to stream from');
    }
    if (row.invalidation_reason) {
      const { why, prevent } = invalidation(row.invalidation_reason);
      throw slotLost(this.options.slot, row.confirmed_flush_lsn, why, undefined, prevent);
    }
    if (row.wal_status === 'lost') throw slotLost(this.options.slot, row.confirmed_flush_lsn, 'its wal_status is "lost": Postgres removed WAL the slot still needed (max_slot_wal_keep_size)');
    // Every session, not only at start: a relay that was reconnecting while a recover died must
    // not stream from the slot that recover left behind.
    await refuseDuringRecovery(client, this.options.tables, 'stream');
    return row.confirmed_flush_lsn ? parseLsn(row.confirmed_flush_lsn) : ZERO_LSN;
  }

  private receive(frame: Buffer): void {
    this.heard = true;
    // After stopReading (draining, closing) nothing more is taken: what the server still sends
    // is unconfirmed and comes again next session. Reading on lets its answer to the close through.
    if (this.ended) return;
    // Decoded at once: pg reuses the buffer that `frame` points into for the next socket read.
    let message: SourceMessage | null;
    try {
      message = this.decoder.decode(frame);
    } catch (error) {
      this.fail(error);
      return;
    }
    if (message === null) return;
    this.messagesReceived.push(message);
    if (!this.paused && this.messagesReceived.length >= this.options.highWaterMessages) {
      this.wire?.stream.pause();
      this.paused = true;
    }
    this.signal();
  }

  private resume(): void {
    this.paused = false;
    this.wire?.stream.resume();
  }

  /** Ends the stream with `error` (`take()` throws it next); the connection stays usable for the final status update. */
  abort(error: Error): void {
    if (this.ended || this.failure || this.aborted) return;
    this.aborted = error;
    this.signal();
  }

  private fail(error: unknown): void {
    if (this.ended || this.failure) return;
    this.failure = error instanceof Error ? error : new Error(String(error));
    this.signal();
  }

  private signal(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }
}

function classifyStartError(error: unknown, slot: string): RelayError {
  const code = (error as { code?: string }).code;
  if (code === OBJECT_IN_USE) {
    return new RelayError('SOURCE_SLOT_BUSY', `replication slot "${slot}" is in use by another reader`, { cause: error });
  }
  if (code === UNDEFINED_OBJECT) {
    return new RelayError('SOURCE_SLOT_MISSING', `replication slot or publication missing: ${(error as Error).message}`, { cause: error });
  }
  const detail = (error as { detail?: string }).detail;
  if (code === OBJECT_NOT_IN_PREREQUISITE_STATE && detail?.includes('invalidated')) return slotLost(slot, null, `Postgres says: ${(error as Error).message}: ${detail}`, error);
  return new RelayError('SOURCE_DISCONNECTED', `replication failed: ${(error as Error).message}`, { cause: error });
}

/**
 * Every error the relay raises on purpose is a RelayError with a stable `code`, for logs,
 * metrics and dead-letter headers. What a code means for the relay is declared here, once:
 * - retriable: reconnecting can help (the relay resumes from the confirmed position);
 * - poison: the problem is one event's, not the stream's (it goes to the dead-letter topic).
 */
export const ERROR_CODES = {
  CONFIG_INVALID: { retriable: false, poison: false },
  SETUP_WAL_LEVEL: { retriable: false, poison: false },
  SETUP_PRIVILEGE: { retriable: false, poison: false },
  SETUP_PUBLICATION: { retriable: false, poison: false },
  SETUP_TABLE: { retriable: false, poison: false },
  /** A table with rows and no slot ever made for it (a polling relay's): `cutover` takes over without skipping or resending. */
  SETUP_CUTOVER_NEEDED: { retriable: false, poison: false },
  /** `cutover --pending` or `handback --mark-sent` given SQL that Postgres refused, or that would not do what it must. */
  CUTOVER_CONDITION: { retriable: false, poison: false },
  SOURCE_PROTOCOL: { retriable: false, poison: false },
  SOURCE_DISCONNECTED: { retriable: true, poison: false },
  SOURCE_TIMEOUT: { retriable: true, poison: false },
  /** None of DATABASE_URL's hosts is a primary now (a failover in progress, or all down). */
  SOURCE_NO_PRIMARY: { retriable: true, poison: false },
  SOURCE_SLOT_BUSY: { retriable: true, poison: false },
  SOURCE_SLOT_MISSING: { retriable: false, poison: false },
  SOURCE_SLOT_LOST: { retriable: false, poison: false },
  /** A `recover` began and did not finish: streaming or pruning now could skip rows it has not published. */
  SOURCE_RECOVERY_UNFINISHED: { retriable: false, poison: false },
  /** Another recover, cutover or handback of the same outbox is running: one at a time. */
  SOURCE_HANDOVER_BUSY: { retriable: false, poison: false },
  SOURCE_UNEXPECTED_CHANGE: { retriable: false, poison: false },
  /** Exactly-once progress in Kafka was written from WAL this server's history does not contain (a failover to a standby that lacked it). */
  SOURCE_TIMELINE_DIVERGED: { retriable: false, poison: false },
  /** Postgres refused the login (password, pg_hba.conf, client certificate): retrying repeats the refusal. */
  SOURCE_AUTHENTICATION: { retriable: false, poison: false },
  /** Postgres's certificate is not trusted, or TLS could not be set up as DATABASE_URL asks. */
  SOURCE_TLS: { retriable: false, poison: false },
  DECODE_MISSING_COLUMN: { retriable: false, poison: true },
  DECODE_BAD_VALUE: { retriable: false, poison: true },
  ROUTE_BAD_TOPIC: { retriable: false, poison: true },
  ENCODE_NO_SCHEMA: { retriable: false, poison: true },
  ENCODE_SCHEMA_MISMATCH: { retriable: false, poison: true },
  ENCODE_REGISTRY: { retriable: true, poison: false },
  ENCODE_REGISTRY_REFUSED: { retriable: false, poison: false },
  SCHEMA_INVALID: { retriable: false, poison: false },
  SCHEMA_INCOMPATIBLE: { retriable: false, poison: false },
  SCHEMA_NOT_REGISTERED: { retriable: false, poison: false },
  SINK_PUBLISH: { retriable: true, poison: false },
  SINK_CLIENT: { retriable: false, poison: false },
  SINK_TOO_LARGE: { retriable: false, poison: true },
  SINK_TOPIC_MISSING: { retriable: false, poison: true },
  /** Kafka refused the credentials (SASL) or the relay could not present them: retrying repeats the refusal. */
  SINK_AUTHENTICATION: { retriable: false, poison: false },
  /** The principal lacks an ACL the relay needs (write, describe, idempotent write). */
  SINK_NOT_AUTHORIZED: { retriable: false, poison: false },
  /** The broker's certificate is not trusted (CA, expiry, host name), or the broker refused ours. */
  SINK_TLS: { retriable: false, poison: false },
  /** OUTBOX_DELIVERY=exactly-once cannot be kept with this broker or topic (no transactions, a progress topic that loses records, a refused transaction timeout). */
  SINK_EXACTLY_ONCE: { retriable: false, poison: false },
  /** Another instance took over the transactional id: this session ends (and waits as a standby if that instance holds the slot). */
  SINK_FENCED: { retriable: true, poison: false },
  /** The exactly-once progress record in Kafka cannot be read: resuming on a guess could skip events. */
  SINK_PROGRESS: { retriable: false, poison: false },
  /** A webhook endpoint given to the CLI that cannot be used as given (URL, event types, headers, limits). */
  WEBHOOK_ENDPOINT_INVALID: { retriable: false, poison: false },
  /** An endpoint's address resolves to a loopback, private, link-local or metadata range not in OUTBOX_WEBHOOK_ALLOW_ADDRESSES. */
  WEBHOOK_ADDRESS_REFUSED: { retriable: false, poison: false },
  /** No endpoint or delivery with the id given. */
  WEBHOOK_NOT_FOUND: { retriable: false, poison: false },
  /** The webhook tables are missing or older than this version: `outbox-relay webhooks setup` makes them. */
  WEBHOOK_SCHEMA_MISSING: { retriable: false, poison: false },
  /** A record on a webhooks topic that is not an outbox event (no event_id header, a value that does not decode): counted and skipped, it stays in Kafka. */
  WEBHOOK_UNDECODABLE: { retriable: false, poison: false },
  /** A broken invariant of the relay's own: a bug. The process stops (exit 1) instead of looping. */
  INTERNAL: { retriable: false, poison: false },
} as const satisfies Record<string, { readonly retriable: boolean; readonly poison: boolean }>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** The codes with a property set in ERROR_CODES (e.g. every poison code). */
export function codesWhere(property: 'retriable' | 'poison'): ErrorCode[] {
  return (Object.keys(ERROR_CODES) as ErrorCode[]).filter((code) => ERROR_CODES[code][property]);
}

export interface RelayErrorOptions {
  retriable?: boolean;
  cause?: unknown;
  /** Structured facts for logs (never payloads). */
  details?: Record<string, unknown>;
}

/** The shape every error of this package has: a stable code, whether retrying helps, facts. */
export class CodedError<Code extends string> extends Error {
  readonly code: Code;
  readonly retriable: boolean;
  readonly details: Record<string, unknown>;

  constructor(code: Code, message: string, options: RelayErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.retriable = options.retriable ?? false;
    this.details = options.details ?? {};
  }
}

/** `retriable` comes from the code (ERROR_CODES), not from where the error is raised. */
export class RelayError extends CodedError<ErrorCode> {
  constructor(code: ErrorCode, message: string, options: Omit<RelayErrorOptions, 'retriable'> = {}) {
    super(code, message, { ...options, retriable: ERROR_CODES[code].retriable });
  }
}

/**
 * A problem with one event rather than with the stream: the event goes to the dead-letter topic
 * (or stops the relay when the operator chose `--on-poison fail`), the stream goes on.
 */
export class PoisonEventError extends RelayError {}

/** The relay's code, else a driver's own (ECONNREFUSED, a Postgres SQLSTATE such as 28P01), else UNEXPECTED. */
export function errorCode(error: unknown): string {
  if (error instanceof RelayError) return error.code;
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code !== '' ? code : 'UNEXPECTED';
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The SQLSTATE of a node-postgres error (or anything carrying a string `code`). */
export function sqlState(error: unknown): string | undefined {
  if (error === null || typeof error !== 'object' || !('code' in error)) return undefined;
  const code = (error as { code: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

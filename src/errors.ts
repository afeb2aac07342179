/**
 * Every error the relay raises on purpose is a RelayError: a stable `code` for logs, metrics and
 * dead-letter headers, and `retriable` telling the supervisor whether reconnecting can help.
 */
export type ErrorCode =
  | 'CONFIG_INVALID'
  | 'SETUP_WAL_LEVEL'
  | 'SETUP_PRIVILEGE'
  | 'SETUP_PUBLICATION'
  | 'SETUP_TABLE'
  | 'SOURCE_PROTOCOL'
  | 'SOURCE_DISCONNECTED'
  | 'SOURCE_SLOT_BUSY'
  | 'SOURCE_SLOT_MISSING'
  | 'SOURCE_UNEXPECTED_CHANGE'
  | 'DECODE_MISSING_COLUMN'
  | 'DECODE_BAD_VALUE'
  | 'ROUTE_BAD_TOPIC'
  | 'ENCODE_NO_SCHEMA'
  | 'ENCODE_SCHEMA_MISMATCH'
  | 'ENCODE_REGISTRY'
  | 'SCHEMA_INVALID'
  | 'SCHEMA_INCOMPATIBLE'
  | 'SCHEMA_NOT_REGISTERED'
  | 'SINK_PUBLISH'
  | 'SINK_CLIENT'
  | 'SINK_TOO_LARGE';

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

export class RelayError extends CodedError<ErrorCode> {}

/**
 * A problem with one event rather than with the stream: the event goes to the dead-letter topic
 * (or stops the relay when the operator chose `--on-poison fail`), the stream goes on.
 */
export class PoisonEventError extends RelayError {
  constructor(code: ErrorCode, message: string, options: RelayErrorOptions = {}) {
    super(code, message, { ...options, retriable: false });
  }
}

export function errorCode(error: unknown): string {
  return error instanceof RelayError ? error.code : 'UNEXPECTED';
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

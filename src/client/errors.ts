import { CodedError, type RelayErrorOptions } from '../errors.js';

/**
 * Errors of the application-side helpers. Same shape as the relay's RelayError (`code`,
 * `retriable`, `details`, `cause`), but their own codes: these are raised inside the user's
 * process, about the user's events, and never reach the relay's metrics or dead letters.
 */
export type ClientErrorCode =
  /** The writer was called outside an explicit transaction (autocommit, or a pool). */
  | 'OUTBOX_NOT_IN_TRANSACTION'
  /** A required field is missing or empty, a header is not a string, a traceparent is malformed. */
  | 'OUTBOX_INVALID_EVENT'
  /** The payload does not fit the Avro schema of its event type. */
  | 'OUTBOX_PAYLOAD_MISMATCH'
  /** Schemas are configured but none exists for the event type (the relay would dead-letter it). */
  | 'OUTBOX_NO_SCHEMA'
  /** The schema directory has files that do not parse or compile. */
  | 'OUTBOX_SCHEMAS_INVALID'
  /** An option of a helper is invalid (a table name, a missing registry for Avro). */
  | 'CLIENT_CONFIG_INVALID'
  /** The event_id is already in the outbox: this business transaction already ran. */
  | 'OUTBOX_DUPLICATE_EVENT'
  /** A consumed record cannot become an event (no event_id header, undecodable value). */
  | 'CONSUMER_UNDECODABLE'
  /** The user's handler threw; its transaction was rolled back and the record will come again. */
  | 'CONSUMER_HANDLER_FAILED';

export type ClientErrorOptions = RelayErrorOptions;

export class OutboxClientError extends CodedError<ClientErrorCode> {}

export { sqlState } from '../errors.js';

import { CodedError, type RelayErrorOptions } from '../errors.js';

/**
 * Errors of the application-side helpers. Same shape as the relay's RelayError (`code`,
 * `retriable`, `details`, `cause`), but their own codes: these are raised inside the user's
 * process, about the user's events, and never reach the relay's metrics or dead letters. What
 * each means is declared here, once (docs/errors.md is generated from it).
 */
export const CLIENT_ERROR_CODES = {
  OUTBOX_NOT_IN_TRANSACTION: {
    retriable: false,
    meaning: 'The writer was called outside an explicit transaction (autocommit, or on a pool): the event and the change it records would commit separately.',
    action: 'Call it with the client that ran BEGIN, inside the transaction that changes your data.',
  },
  OUTBOX_INVALID_EVENT: {
    retriable: false,
    meaning: 'A required field of the event is missing or empty, a header is not a string, a traceparent is malformed, or the payload cannot be written as JSON.',
    action: "Fix the event the application builds; the error's details.field names the field.",
  },
  OUTBOX_PAYLOAD_MISMATCH: {
    retriable: false,
    meaning: 'The payload does not fit the Avro schema of its event type (the relay would dead-letter it as ENCODE_SCHEMA_MISMATCH).',
    action: 'Fix the payload or evolve the schema; the message names the path that does not fit.',
  },
  OUTBOX_NO_SCHEMA: {
    retriable: false,
    meaning: 'Schemas are configured but none exists for the event type (the relay would dead-letter it as ENCODE_NO_SCHEMA).',
    action: 'Add <event_type>.avsc to the schema folder, the same folder the relay reads.',
  },
  OUTBOX_SCHEMAS_INVALID: {
    retriable: false,
    meaning: 'The schema folder has files that do not parse or compile.',
    action: 'Run `outbox-relay schemas check --schemas-dir <folder>` and fix each problem it lists.',
  },
  CLIENT_CONFIG_INVALID: {
    retriable: false,
    meaning: 'An option of a helper is invalid: a table or column name, the avro format without a registry.',
    action: 'Correct the option the message names.',
  },
  OUTBOX_DUPLICATE_EVENT: {
    retriable: false,
    meaning: 'The event_id is already in the outbox, or twice in one batch: with a deterministic event id, this business transaction already ran.',
    action: 'Roll the transaction back: its work was done before, so answer the caller as for a success.',
  },
  CONSUMER_UNDECODABLE: {
    retriable: false,
    meaning: 'A consumed record cannot become an event: no event_id header, no value, or a value that does not decode.',
    action: 'Handle it in onUndecodable (the record is then skipped and its offset committed), or find its producer; without onUndecodable it is thrown to kafkajs, which retries it.',
  },
  CONSUMER_HANDLER_FAILED: {
    retriable: true,
    meaning: "The application's handler threw: its transaction was rolled back and the record will be delivered again.",
    action: "Fix the handler's cause; kafkajs retries the record (with backoff, then a consumer restart from the committed offset).",
  },
} as const satisfies Record<string, { readonly retriable: boolean; readonly meaning: string; readonly action: string }>;

export type ClientErrorCode = keyof typeof CLIENT_ERROR_CODES;

export type ClientErrorOptions = RelayErrorOptions;

/** `retriable` comes from the code (CLIENT_ERROR_CODES), as for the relay's own errors. */
export class OutboxClientError extends CodedError<ClientErrorCode> {
  constructor(code: ClientErrorCode, message: string, options: Omit<ClientErrorOptions, 'retriable'> = {}) {
    super(code, message, { ...options, retriable: CLIENT_ERROR_CODES[code].retriable });
  }
}

export { sqlState } from '../errors.js';

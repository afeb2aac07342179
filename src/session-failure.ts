import { errorMessage, RelayError } from './errors.js';
import { explainedPostgresError, isPostgresAnswer } from './source/connection-errors.js';

/**
 * What ended a session, as the relay decides on it: its own errors as they are; a Postgres
 * refusal that names its fix (login, privilege, TLS) as that; a connection that went away
 * (a SQLSTATE from the server, a socket error, the drivers' words for a closed connection) as
 * SOURCE_DISCONNECTED, which resumes from the confirmed position. Anything else is an error
 * nobody classified: a bug (a TypeError in a stage, a broken library), which retrying would
 * repeat for ever as a reconnect loop. It stops the relay loudly as INTERNAL (exit 1), naming
 * the error; nothing is lost (the slot holds everything after the confirmed position).
 */
export function sessionFailure(error: unknown): RelayError {
  if (error instanceof RelayError) return error;
  const explained = explainedPostgresError(error);
  if (explained) return explained;
  if (isConnectionFailure(error)) return new RelayError('SOURCE_DISCONNECTED', errorMessage(error), { cause: error });
  const name = error instanceof Error ? error.name : typeof error;
  return new RelayError('INTERNAL', `an error the relay does not classify (${name}: ${errorMessage(error)}) ended the session: a bug, so the relay stops instead of reconnecting into it again; nothing is lost (the slot keeps every event after the confirmed position). Report it with this log line (the stack is in its stack field)`, { cause: error });
}

/** Node's socket, DNS and stream errors: ECONNRESET, ETIMEDOUT, EPIPE, EAI_AGAIN, ...; ERR_SOCKET_*, ERR_STREAM_*, ERR_TLS_*. */
const SYSTEM_CODE = /^(E[A-Z0-9_]+|ERR_(SOCKET|STREAM|TLS|SSL)_[A-Z0-9_]+)$/;
/** What pg and kafkajs say of a connection that closed, timed out or could not be set up, without a code. */
const CLOSED_CONNECTION = /\bconnection\b.*\b(terminated|closed|ended|lost|reset|refused)\b|\bnot queryable\b|\btimed? ?out\b|\btimeout\b|\bsocket\b|error establishing an SSL connection/i;

function isConnectionFailure(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  // Postgres answered (an ErrorResponse carries a severity and a SQLSTATE: a shutdown, a slot in
  // use, too many connections): the server's state, not a bug.
  if (isPostgresAnswer(error)) return true;
  // Stopping (SIGTERM) aborts what is under way.
  if (error.name === 'AbortError') return true;
  if (error.name.startsWith('KafkaJS')) return true;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && SYSTEM_CODE.test(code)) return true;
  return saysConnectionClosed(error);
}

/** An error with no code whose words are a closed, timed-out or refused connection's (pg's "Connection terminated unexpectedly"). */
export function saysConnectionClosed(error: Error): boolean {
  return error.name === 'Error' && CLOSED_CONNECTION.test(error.message);
}

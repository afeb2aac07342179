import { errorMessage, RelayError } from '../errors.js';
import { saysConnectionClosed } from '../session-failure.js';
import { kafkaFailure } from '../kafka/failure.js';
import { explainedPostgresError, postgresAnswer, type AnswerContext } from '../source/connection-errors.js';

/**
 * Node's codes for a network connection that failed (not a file: ENOENT or EACCES from an
 * unreadable file is not a connection, and stays unclassified).
 */
const NETWORK_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'EHOSTDOWN', 'ENETUNREACH', 'ENETDOWN', 'EADDRNOTAVAIL',
  'ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL',
]);

/**
 * What ended a command, as the CLI prints it (`failed [CODE]`): always a code of the relay's
 * (docs/errors.md), never a driver's; a driver's code and Postgres's SQLSTATE stay in the text.
 * - the relay's own errors as they are;
 * - a Postgres refusal that names its fix (login, privilege, missing database, TLS) as that,
 *   another answer of Postgres by its SQLSTATE (SOURCE_QUERY_FAILED when none is known);
 * - a kafkajs error (the webhooks consumer's own, which reaches the CLI as kafkajs threw it) as
 *   the sink classifies Kafka's failures;
 * - a network error: Postgres's, as SOURCE_DISCONNECTED. The Kafka clients, the schema registry
 *   and the webhook sender wrap their network errors in their own codes, so a bare one comes
 *   from pg, the one client that throws them as they are;
 * - anything else as INTERNAL: an error nobody classified is a bug, and says so.
 * `context`: what a hint names of the command's configuration (the setting its tables come from).
 */
export function commandFailure(error: unknown, context?: AnswerContext): RelayError {
  if (error instanceof RelayError) return error;
  const fromPostgres = explainedPostgresError(error) ?? postgresAnswer(error, context);
  if (fromPostgres) return fromPostgres;
  if (error instanceof Error && error.name.startsWith('KafkaJS')) return kafkaFailure(error, 'Kafka failed');
  const code = (error as { code?: unknown } | null)?.code;
  if (error instanceof Error && ((typeof code === 'string' && NETWORK_CODES.has(code)) || saysConnectionClosed(error))) {
    return new RelayError('SOURCE_DISCONNECTED', `cannot reach Postgres (${typeof code === 'string' ? `${code}: ` : ''}${error.message}); check that it is up and that DATABASE_URL names its host and port`, { cause: error });
  }
  const name = error instanceof Error ? error.name : typeof error;
  return new RelayError('INTERNAL', `an error the relay does not classify (${name}${typeof code === 'string' ? ` ${code}` : ''}: ${errorMessage(error)}): a bug; please report it with this message`, { cause: error });
}

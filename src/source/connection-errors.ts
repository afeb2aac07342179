import { errorMessage, RelayError, sqlState, type ErrorCode } from '../errors.js';
import { isTlsTrustError } from '../security/tls-errors.js';

/** SQLSTATE class 28: invalid authorization specification (bad password, no pg_hba.conf entry, certificate refused). */
const AUTHORIZATION_CLASS = '28';
const INSUFFICIENT_PRIVILEGE = '42501';
const INVALID_CATALOG_NAME = '3D000';

/**
 * An error from the Postgres driver as the relay's own. A refused login, a missing privilege, a
 * database that does not exist or an untrusted certificate stops the relay naming what to fix:
 * reconnecting repeats them forever.
 * Anything else (refused or reset connections, timeouts) is SOURCE_DISCONNECTED, which resumes
 * from the confirmed position.
 */
export function postgresFailure(error: unknown): RelayError {
  if (error instanceof RelayError) return error;
  return explainedPostgresError(error) ?? new RelayError('SOURCE_DISCONNECTED', errorMessage(error), { cause: error });
}

/** The relay's error for a Postgres refusal that names its fix (login, privilege, database, TLS); null for anything else. */
export function explainedPostgresError(error: unknown): RelayError | null {
  const state = sqlState(error);
  const message = errorMessage(error);
  if (state?.startsWith(AUTHORIZATION_CLASS)) {
    return new RelayError('SOURCE_AUTHENTICATION', `Postgres refused the login (${state}: ${message}); check the user and password in DATABASE_URL (or DATABASE_PASSWORD[_FILE]), the client certificate (sslcert, sslkey), and pg_hba.conf`, { cause: error });
  }
  if (state === INSUFFICIENT_PRIVILEGE) {
    return new RelayError('SETUP_PRIVILEGE', `Postgres refused: ${message}; \`outbox-relay setup --print-roles\` prints the grants each role needs`, { cause: error });
  }
  if (state === INVALID_CATALOG_NAME) {
    return new RelayError('SOURCE_DATABASE_MISSING', `Postgres has no such database (${state}: ${message}); correct the database name in DATABASE_URL (postgres://user@host:5432/<database>) or create it`, { cause: error });
  }
  if (isTlsTrustError(error)) {
    return new RelayError('SOURCE_TLS', `Postgres's TLS certificate is not trusted (${(error as { code?: string }).code}: ${message}); set sslrootcert in DATABASE_URL to the CA that signed it (sslmode=verify-full checks the host name too)`, { cause: error });
  }
  if (/does not support SSL/i.test(message)) {
    return new RelayError('SOURCE_TLS', `${message}; DATABASE_URL asks for TLS (sslmode) and the server has none`, { cause: error });
  }
  return null;
}

/** What of a command's configuration a hint names (absent: a command that reads no tables). */
export interface AnswerContext {
  /**
   * The setting the command read its tables from, as the operator set it (OUTBOX_SOURCES,
   * OUTBOX_SOURCES_FILE, OUTBOX_TABLE, a flag, OUTBOX_WEBHOOK_SCHEMA).
   */
  readonly tables: string;
  /** Whose tables: an outbox's (`setup` makes the table, not its schema) or the webhooks' (`webhooks setup` makes both). */
  readonly of: 'outbox' | 'webhooks';
}

/**
 * Postgres's other answers, by SQLSTATE, as the CLI reports them: a one-shot command does not
 * reconnect, so its failure is named, with Postgres's code and text kept in the message.
 * Checked after explainedPostgresError; the first prefix that matches wins.
 */
const ANSWERS: readonly { readonly states: readonly string[]; readonly code: ErrorCode; readonly hint: string | ((context: AnswerContext | undefined) => string) }[] = [
  // Connection exceptions; admin, crash shutdown and "starting up"; too many connections.
  { states: ['08', '57P', '53300'], code: 'SOURCE_DISCONNECTED', hint: 'Postgres closed or refused the connection; run the command again once it accepts connections' },
  { states: ['25006'], code: 'SOURCE_NO_PRIMARY', hint: 'DATABASE_URL reaches a read-only server (a standby?); point it at the primary, or list every host with target_session_attrs=read-write' },
  { states: ['42P01'], code: 'SETUP_TABLE', hint: missingTableHint },
  { states: ['3F000'], code: 'SETUP_TABLE', hint: missingSchemaHint },
];

const SETUP_MAKES_EVERY_TABLE = '`outbox-relay setup` (or `outbox-relay webhooks setup`) creates what the relay needs; check OUTBOX_TABLE or OUTBOX_SOURCES, and OUTBOX_WEBHOOK_SCHEMA';

/** No such table (42P01): what makes it, and the setting that named it. */
function missingTableHint(context: AnswerContext | undefined): string {
  if (!context) return SETUP_MAKES_EVERY_TABLE;
  return `\`outbox-relay ${context.of === 'webhooks' ? 'webhooks setup` creates the webhook tables' : 'setup` creates an outbox table'}; check ${context.tables}`;
}

/** No such schema (3F000): `setup` makes an outbox table, not its schema (the application's migration does); `webhooks setup` makes its own. */
function missingSchemaHint(context: AnswerContext | undefined): string {
  if (!context) return SETUP_MAKES_EVERY_TABLE;
  if (context.of === 'webhooks') return `\`outbox-relay webhooks setup\` creates it; check ${context.tables}`;
  return `create the schema (setup makes an outbox table in a schema that exists), or correct the table's name in ${context.tables}`;
}

/** Postgres answered: an ErrorResponse carries a severity and a SQLSTATE (pg's DatabaseError). */
export function isPostgresAnswer(error: unknown): error is Error & { readonly code: string } {
  return error instanceof Error && 'severity' in error && /^[0-9A-Z]{5}$/.test(sqlState(error) ?? '');
}

/** A Postgres ErrorResponse as the relay's error; null when Postgres did not answer. */
export function postgresAnswer(error: unknown, context?: AnswerContext): RelayError | null {
  if (!isPostgresAnswer(error)) return null;
  const state = error.code;
  const answer = ANSWERS.find(({ states }) => states.some((prefix) => state.startsWith(prefix)));
  // Postgres's own hint names the fix where it knows one (out of shared memory: max_locks_per_transaction).
  const hint = (error as { hint?: unknown }).hint;
  const text = `Postgres answered ${state}: ${error.message}${typeof hint === 'string' && hint !== '' ? ` (Postgres's hint: ${hint})` : ''}`;
  if (answer) return new RelayError(answer.code, `${text}; ${typeof answer.hint === 'string' ? answer.hint : answer.hint(context)}`, { cause: error });
  return new RelayError('SOURCE_QUERY_FAILED', `${text} (a SQLSTATE the relay has no code of its own for: see Postgres's "PostgreSQL Error Codes")`, { cause: error });
}

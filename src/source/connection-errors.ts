import { errorMessage, RelayError, sqlState } from '../errors.js';
import { isTlsTrustError } from '../security/tls-errors.js';

/** SQLSTATE class 28: invalid authorization specification (bad password, no pg_hba.conf entry, certificate refused). */
const AUTHORIZATION_CLASS = '28';
const INSUFFICIENT_PRIVILEGE = '42501';

/**
 * An error from the Postgres driver as the relay's own. A refused login, a missing privilege or an
 * untrusted certificate stops the relay naming what to fix: reconnecting repeats them forever.
 * Anything else (refused or reset connections, timeouts) is SOURCE_DISCONNECTED, which resumes
 * from the confirmed position.
 */
export function postgresFailure(error: unknown): RelayError {
  if (error instanceof RelayError) return error;
  return explainedPostgresError(error) ?? new RelayError('SOURCE_DISCONNECTED', errorMessage(error), { cause: error });
}

/** The relay's error for a Postgres refusal that names its fix (login, privilege, TLS); null for anything else. */
export function explainedPostgresError(error: unknown): RelayError | null {
  const state = sqlState(error);
  const message = errorMessage(error);
  if (state?.startsWith(AUTHORIZATION_CLASS)) {
    return new RelayError('SOURCE_AUTHENTICATION', `Postgres refused the login (${state}: ${message}); check the user and password in DATABASE_URL (or DATABASE_PASSWORD[_FILE]), the client certificate (sslcert, sslkey), and pg_hba.conf`, { cause: error });
  }
  if (state === INSUFFICIENT_PRIVILEGE) {
    return new RelayError('SETUP_PRIVILEGE', `Postgres refused: ${message}; \`outbox-relay setup --print-roles\` prints the grants each role needs`, { cause: error });
  }
  if (isTlsTrustError(error)) {
    return new RelayError('SOURCE_TLS', `Postgres's TLS certificate is not trusted (${(error as { code?: string }).code}: ${message}); set sslrootcert in DATABASE_URL to the CA that signed it (sslmode=verify-full checks the host name too)`, { cause: error });
  }
  if (/does not support SSL/i.test(message)) {
    return new RelayError('SOURCE_TLS', `${message}; DATABASE_URL asks for TLS (sslmode) and the server has none`, { cause: error });
  }
  return null;
}

import { editPostgresUrl } from '../pg-url.js';

/** Query parameters that carry a secret in a connection string (pg honours `password` and `sslpassword`). */
const SECRET_PARAMETER = /pass|secret|token|credential|auth/i;

/**
 * A connection string as it may be shown: the password in the authority and every secret query
 * parameter replaced. What cannot be parsed as a URL is not shown at all.
 */
export function redactConnectionString(value: string): string {
  try {
    // A Postgres URL may name several hosts (pg-url.ts), which URL alone does not parse.
    return editPostgresUrl(value, (url) => {
      if (url.password) url.password = '***';
      for (const name of [...url.searchParams.keys()]) {
        if (SECRET_PARAMETER.test(name)) url.searchParams.set(name, '***');
      }
    });
  } catch {
    return '(redacted: not a URL)';
  }
}

import { editPostgresUrl } from '../pg-url.js';

/** Query parameters that carry a secret in a connection string (pg honours `password` and `sslpassword`). */
const SECRET_PARAMETER = /pass|secret|token|credential|auth/i;

/**
 * The password masked as text, before any parsing: a password with an unencoded `/`, `?` or `#`
 * makes URL parsers read it as a host, port or path (`postgres://relay:12/34@db/x` parses with
 * no password at all). Everything from the first `:` after the scheme up to the last `@` goes.
 */
function maskUserinfo(value: string): string {
  const start = value.indexOf('://');
  const at = value.lastIndexOf('@');
  if (start < 0 || at < start) return value;
  const userinfo = value.slice(start + 3, at);
  const colon = userinfo.indexOf(':');
  return colon < 0 ? value : `${value.slice(0, start + 3)}${userinfo.slice(0, colon)}:***${value.slice(at)}`;
}

/**
 * A connection string as it may be shown: the password in the authority and every secret query
 * parameter replaced. What cannot be parsed as a URL is not shown at all.
 */
export function redactConnectionString(value: string): string {
  try {
    // A Postgres URL may name several hosts (pg-url.ts), which URL alone does not parse.
    return editPostgresUrl(maskUserinfo(value), (url) => {
      if (url.password) url.password = '***';
      for (const name of [...url.searchParams.keys()]) {
        if (SECRET_PARAMETER.test(name)) url.searchParams.set(name, '***');
      }
    });
  } catch {
    return '(redacted: not a URL)';
  }
}

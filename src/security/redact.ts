/** Query parameters that carry a secret in a connection string (pg honours `password` and `sslpassword`). */
const SECRET_PARAMETER = /pass|secret|token|credential|auth/i;

/**
 * A connection string as it may be shown: the password in the authority and every secret query
 * parameter replaced. What cannot be parsed as a URL is not shown at all.
 */
export function redactConnectionString(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return '(redacted: not a URL)';
  }
  if (url.password) url.password = '***';
  for (const name of [...url.searchParams.keys()]) {
    if (SECRET_PARAMETER.test(name)) url.searchParams.set(name, '***');
  }
  return url.toString();
}

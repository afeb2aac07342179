/**
 * DATABASE_URL as libpq reads it, hosts included: `postgres://user@h1:5432,h2:5433/db` names
 * several servers, tried in order (libpq's multi-host URL). node-postgres and
 * pg-connection-string take one host only, so the URL is split here into one single-host URL
 * per server, each of which they parse as before; a one-host URL comes back unchanged.
 *
 * `target_session_attrs` says which server to keep. The relay streams from a slot and writes
 * only on a primary, so with several hosts it keeps the first primary whatever the URL says,
 * and refuses a value that asks for anything else; with one host it checks only when asked.
 */
export type SessionTarget = 'read-write' | 'primary';

export interface PostgresUrl {
  /** One single-host URL per server, in the order given; target_session_attrs removed. */
  readonly urls: readonly string[];
  /** `host:port` of each, for messages (no credentials). */
  readonly hosts: readonly string[];
  /** What a server must be to be kept; null: the one host is taken as it is (no check). */
  readonly target: SessionTarget | null;
}

const TARGETS: readonly string[] = ['read-write', 'primary'] satisfies SessionTarget[];
const URL_PARTS = /^(postgres(?:ql)?:\/\/)([^/?#]*)(.*)$/is;

/** Throws an Error saying what is wrong (the caller names the variable). */
export function parsePostgresUrl(value: string): PostgresUrl {
  const split = splitHosts(value);
  const urls = split ? split.hosts.map((host) => `${split.prefix}${host}${split.rest}`) : [value.trim()];
  const parsed = urls.map((url) => {
    try {
      return new URL(url);
    } catch {
      throw new Error('is not a URL');
    }
  });
  const asked = parsed[0]!.searchParams.get('target_session_attrs');
  if (asked !== null && !TARGETS.includes(asked)) {
    throw new Error(`asks for target_session_attrs=${asked}; the relay needs the primary: primary (the default with several hosts) or read-write`);
  }
  return {
    urls: asked === null ? urls : parsed.map((url) => withoutParameter(url, 'target_session_attrs')),
    hosts: parsed.map((url) => url.host || url.searchParams.get('host') || 'localhost'),
    // primary, not read-write, by default: the relay writes nothing, and a role hardened with
    // default_transaction_read_only must still find the primary.
    target: (asked as SessionTarget | null) ?? (urls.length > 1 ? 'primary' : null),
  };
}

/** The URL with `edit` applied (credentials, parameters) and its host list kept as given: for showing it with secrets hidden. */
export function editPostgresUrl(value: string, edit: (url: URL) => void): string {
  const split = splitHosts(value);
  const placeholder = 'hosts.invalid';
  const url = new URL(split ? `${split.prefix}${placeholder}${split.rest}` : value.trim());
  edit(url);
  return split ? url.toString().replace(placeholder, split.hosts.join(',')) : url.toString();
}

/** A URL with several hosts as its parts (prefix = scheme and user info); null for one host or no URL. */
function splitHosts(value: string): { prefix: string; hosts: string[]; rest: string } | null {
  const parts = URL_PARTS.exec(value.trim());
  if (!parts) return null;
  const authority = parts[2]!;
  const at = authority.lastIndexOf('@');
  const hosts = authority.slice(at + 1).split(',');
  if (hosts.length === 1) return null;
  if (hosts.some((host) => host === '')) throw new Error('has an empty host in its host list');
  return { prefix: `${parts[1]}${authority.slice(0, at + 1)}`, hosts, rest: parts[3]! };
}

function withoutParameter(url: URL, name: string): string {
  const copy = new URL(url);
  copy.searchParams.delete(name);
  return copy.toString();
}

import pg from 'pg';
import { parse } from 'pg-connection-string';
import { errorMessage, RelayError } from './errors.js';
import { parsePostgresUrl } from './pg-url.js';
import { Secret } from './security/secret.js';
import { explainedPostgresError } from './source/connection-errors.js';

/**
 * How every Postgres connection of the relay is made, in one place.
 *
 * Networks fail silently (a dropped NAT entry, a load balancer failover): no RST, no FIN, the
 * socket just stops. TCP keepalive makes the kernel probe an idle connection and fail it after
 * about a minute and a half of silence; a connect that does not complete fails after
 * CONNECT_TIMEOUT_MS; and every query of a SQL connection has a bound, so nothing the relay does
 * waits forever on a dead peer. The replication connection has no query bound (its one query,
 * START_REPLICATION, lasts the session): the stream's own watchdog
 * (OUTBOX_REPLICATION_TIMEOUT) bounds it.
 */
const KEEPALIVE_IDLE_MS = 30_000;
const CONNECT_TIMEOUT_MS = 10_000;
/** SQL the relay sends (slot reads, prune batches, status, setup) finishes well within this. */
export const QUERY_TIMEOUT_MS = 60_000;

/**
 * Settings every connection of the relay fixes for itself. A session would otherwise take them
 * from the database and the role (ALTER DATABASE ... SET DateStyle = 'SQL, DMY'), and from
 * DATABASE_URL's `options`, and the text Postgres sends for each column depends on them: the
 * stream's and `replay`'s rows, and the timestamps pg parses into Dates (its parser reads ISO
 * only). With these, a timestamptz is ISO 8601 in UTC (the created_at header), a float keeps
 * every digit, a bytea is hex (what pg's parser reads), an interval is in Postgres's default
 * form. (client_encoding needs nothing here: pg sends UTF8 as a startup parameter of its own,
 * which Postgres applies after `options`.)
 */
export const SESSION_SETTINGS: Readonly<Record<string, string>> = {
  DateStyle: 'ISO, MDY',
  TimeZone: 'UTC',
  IntervalStyle: 'postgres',
  extra_float_digits: '3',
  bytea_output: 'hex',
};

export interface ConnectionKind {
  /** A replication connection (START_REPLICATION): no query bound. */
  readonly replication?: boolean;
  /** Bound of each query in ms; 0 for none (`setup`, whose slot creation waits for running transactions). */
  readonly queryTimeoutMs?: number;
  /** pg's type parsers for this connection (default: pg's own). */
  readonly types?: pg.CustomTypesConfig;
}

/**
 * Where, and as whom, the relay connects: DATABASE_URL and, when given apart, the password.
 * Both are Secrets read when a connection is made (a rotated file applies at the next one); the
 * password even at each connection of a pool.
 */
export interface DatabaseAccess {
  readonly url: Secret;
  readonly password: Secret | null;
}

export function databaseAccess(url: string | Secret, password: Secret | null = null): DatabaseAccess {
  return { url: typeof url === 'string' ? Secret.fromValue('DATABASE_URL', url) : url, password };
}

/**
 * A connected client on the server DATABASE_URL names, or with several hosts on the first of
 * them that is a primary.
 *
 * node-postgres takes one host; libpq takes a list and `target_session_attrs`, and connects to
 * each host in turn, keeping the first that is what was asked for. The same is done here, on
 * every connection of the relay (replication, monitor, setup, status, prune): after a
 * promotion the relay finds the new primary at its next reconnect, with no DNS record or
 * virtual IP that must move first. A primary is a server that is not in recovery and whose
 * sessions are not read-only (libpq's `read-write`): the slot is read, and setup and prune
 * write, only there. A standby is not kept even though 16+ can decode on a standby: the slot
 * the relay confirms to is the primary's (a synced copy on a 17 standby refuses readers).
 *
 * The check runs on the connection that is then used (one query after connecting), not on a
 * probe before it: what was checked is what is kept. A one-host URL without
 * target_session_attrs is connected exactly as before, unchecked.
 *
 * When no host is kept: a refusal that names its fix (login, certificate) is thrown as it
 * came, since reconnecting repeats it; otherwise SOURCE_NO_PRIMARY, retriable (a failover in
 * progress: the old primary is gone and the standby is not promoted yet), naming each host's
 * answer.
 */
export async function connectPostgres(database: DatabaseAccess, applicationName: string, kind: ConnectionKind = {}): Promise<pg.Client> {
  const { hosts, target } = parsePostgresUrl(database.url.reveal());
  const configs = pgConnectionConfigs(database, applicationName, kind);
  const refusals: string[] = [];
  let explained: unknown = null;
  let explainedCount = 0;
  for (const [index, host] of hosts.entries()) {
    const client = newClient(configs[index]!);
    try {
      await client.connect();
    } catch (error) {
      if (target === null) throw error;
      refusals.push(`${host}: ${errorMessage(error)}`);
      if (explainedPostgresError(error)) {
        explained ??= error;
        explainedCount += 1;
      }
      continue;
    }
    if (target === null) return client;
    const answer = await sessionKind(client).catch((error: unknown) => `did not answer (${errorMessage(error)})`);
    if (answer === null || (answer === READ_ONLY && target === 'primary')) return client;
    refusals.push(`${host}: ${answer}`);
    await client.end().catch(() => undefined);
  }
  // A login or certificate refused by every host is a configuration error: stop. Refused by some
  // while the others are down or standbys (a restart, a failover under way): wait and retry.
  if (explained !== null && explainedCount === hosts.length) throw explained;
  throw new RelayError('SOURCE_NO_PRIMARY', `no server in DATABASE_URL is a primary (target_session_attrs=${target}): ${refusals.join('; ')}`, { details: { hosts } });
}

const READ_ONLY = 'read-only';

/** null for a read-write primary, else why the session does not qualify (a broken connection is heard: newClient). */
async function sessionKind(client: pg.Client): Promise<string | null> {
  // Plain SQL: a `replication=database` walsender answers it too.
  const { rows } = await client.query<{ standby: boolean; read_only: string }>("SELECT pg_is_in_recovery() AS standby, current_setting('transaction_read_only') AS read_only");
  const row = rows[0]!;
  return row.standby ? 'a standby (in recovery)' : row.read_only === 'on' ? READ_ONLY : null;
}

/** The hosts of DATABASE_URL, as `host:port`, in order (no credentials). */
export function databaseHosts(database: DatabaseAccess): readonly string[] {
  return parsePostgresUrl(database.url.reveal()).hosts;
}

/**
 * A connected client on the index-th host of DATABASE_URL, whatever it is (to read a
 * standby's copy of the slot); null if it cannot be reached.
 */
export async function connectHost(database: DatabaseAccess, index: number, applicationName: string): Promise<pg.Client | null> {
  const client = newClient(pgConnectionConfigs(database, applicationName)[index]!);
  return client.connect().then(() => client, () => null);
}

/**
 * A connection of its own to the very server `reached` is connected to (one of the hosts of
 * `database`), whatever that server is now: a second look at a replication session's server,
 * which with several hosts the first primary of the moment might not be.
 */
export async function connectSameServer(database: DatabaseAccess, reached: pg.Client, applicationName: string, kind: ConnectionKind = {}): Promise<pg.Client> {
  for (const config of pgConnectionConfigs(database, applicationName, kind)) {
    const client = newClient(config);
    if (client.host !== reached.host || client.port !== reached.port) continue;
    await client.connect();
    return client;
  }
  throw new RelayError('INTERNAL', `the server ${reached.host}:${reached.port} is none of the hosts of its URL`);
}

/**
 * Every client of the relay, with an 'error' listener from the start. pg emits 'error' when the
 * connection breaks while no query is running (a failover kills the server between two queries
 * of a prune pass, a status read, a poll): unheard, that event ends the process. Heard, it costs
 * nothing: pg marks the client broken, and its next query (or the one running) fails with the
 * cause, which its caller handles as any failed query. Callers may add listeners of their own
 * (the replication stream ends its session on it).
 */
function newClient(config: pg.ClientConfig): pg.Client {
  const client = new pg.Client(config);
  client.on('error', ignoreBrokenConnection);
  return client;
}

function ignoreBrokenConnection(): void {
  // The next query reports it: see newClient.
}

/**
 * pg's settings for a pool (the demo services'), which cannot choose a host per connection: a
 * DATABASE_URL of one host only.
 */
export function pgConnectionConfig(database: DatabaseAccess, applicationName: string, kind: ConnectionKind = {}): pg.ClientConfig {
  const configs = pgConnectionConfigs(database, applicationName, kind);
  if (configs.length > 1) throw new RelayError('CONFIG_INVALID', `DATABASE_URL names ${configs.length} hosts; ${applicationName} takes one (the relay's own connections take several)`);
  return configs[0]!;
}

/** pg's settings for each host of DATABASE_URL, in order (one for a one-host URL). */
export function pgConnectionConfigs(database: DatabaseAccess, applicationName: string, kind: ConnectionKind = {}): pg.ClientConfig[] {
  return parsePostgresUrl(database.url.reveal()).urls.map((url) => hostConnectionConfig(database, url, applicationName, kind));
}

function hostConnectionConfig(database: DatabaseAccess, url: string, applicationName: string, { replication = false, queryTimeoutMs = QUERY_TIMEOUT_MS, types }: ConnectionKind): pg.ClientConfig {
  const { password } = database;
  // Parsed here rather than given to pg as connectionString: pg lets every key of a connection
  // string, even an absent password, replace the config's, and the relay's settings must win.
  const parsed = parse(url) as pg.ClientConfig & { options?: string };
  return {
    ...parsed,
    options: sessionOptions(parsed.options),
    // pg calls a function password at every connection attempt.
    ...(password ? { password: () => password.reveal() } : {}),
    application_name: applicationName,
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    ...(replication ? { replication: 'database' } : queryTimeoutMs > 0 ? { query_timeout: queryTimeoutMs } : {}),
    ...(types ? { types } : {}),
  } as pg.ClientConfig;
}

/**
 * The startup `options`: SESSION_SETTINGS after the operator's own (DATABASE_URL's `options`,
 * else PGOPTIONS, as pg reads them), so that the relay's win: Postgres applies the `-c` switches
 * of a startup packet in order, the last for a setting counts. The operator's other options
 * (search_path, ...) stay.
 *
 * Winning rather than refusing: a DATABASE_URL is often shared with the application, whose
 * DateStyle is its own business; the relay's output must not depend on it either way.
 */
function sessionOptions(fromUrl: string | undefined): string {
  return joinOptions(fromUrl ?? process.env.PGOPTIONS, startupOptions(SESSION_SETTINGS));
}

function joinOptions(operator: string | undefined, fixed: string): string {
  return operator?.trim() ? `${operator.trim()} ${fixed}` : fixed;
}

/** The startup packet's `options`: -c name=value, spaces in values escaped as Postgres reads them. */
function startupOptions(settings: Readonly<Record<string, string>>): string {
  return Object.entries(settings).map(([name, value]) => `-c ${name}=${value.replaceAll(' ', '\\ ')}`).join(' ');
}

/**
 * The session settings that the operator's startup options (DATABASE_URL's `options`, else
 * PGOPTIONS) ask for and the relay overrides, by name as the relay spells them: said at start,
 * so that an operator who set one knows it has no effect on the relay.
 */
export function overriddenSessionSettings(database: DatabaseAccess): { readonly source: string; readonly settings: string[] } {
  const fromUrl = new URL(parsePostgresUrl(database.url.reveal()).urls[0]!).searchParams.get('options');
  const operator = fromUrl ?? process.env.PGOPTIONS ?? '';
  const named = new Set<string>();
  // -c name=value, -cname=value or --name=value; Postgres reads names case-insensitively, - as _.
  for (const [, name] of operator.matchAll(/(?:^|\s)(?:-c\s*|--)([A-Za-z_][\w.-]*)=/g)) named.add(name!.toLowerCase().replaceAll('-', '_'));
  return { source: fromUrl === null ? 'PGOPTIONS' : "DATABASE_URL's options", settings: Object.keys(SESSION_SETTINGS).filter((setting) => named.has(setting.toLowerCase())) };
}

import pg from 'pg';
import { parse } from 'pg-connection-string';
import { errorMessage, RelayError } from './errors.js';
import { parsePostgresUrl, type SessionTarget } from './pg-url.js';
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
    if (qualifies(answer, target)) return client;
    refusals.push(`${host}: ${answer}`);
    await client.end().catch(() => undefined);
  }
  // A login or certificate refused by every host is a configuration error: stop. Refused by some
  // while the others are down or standbys (a restart, a failover under way): wait and retry.
  if (explained !== null && explainedCount === hosts.length) throw explained;
  throw new RelayError('SOURCE_NO_PRIMARY', `no server in DATABASE_URL is a primary (target_session_attrs=${target}): ${refusals.join('; ')}`, { details: { hosts } });
}

const READ_ONLY = 'read-only';

/** Whether a session's kind (sessionKind) is what target_session_attrs asks for: a read-only primary is a primary. */
function qualifies(answer: string | null, target: SessionTarget): boolean {
  return answer === null || (answer === READ_ONLY && target === 'primary');
}

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

/** What a pool of sessions may set besides where and as whom it connects. */
export type PoolSettings = Pick<pg.PoolConfig, 'max' | 'idleTimeoutMillis' | 'statement_timeout'>;

/**
 * A pool whose every session is on the primary among DATABASE_URL's hosts (the webhooks
 * store's, the demo's): after a promotion its new sessions find the new primary by themselves,
 * as the relay's own connections do (connectPostgres).
 *
 * pg's pool connects each session to the one host its settings name, fixed when the session is
 * made; libpq's host list has no equivalent there. So each new session first learns where the
 * primary is (connectPostgres, tried host by host; remembered for the sessions after it), then
 * connects there and checks, on the session it keeps, that the server is still what was asked
 * for. A session that finds the remembered host gone or a standby fails (a failover under way,
 * which its caller retries as any failed query) and makes the next session look again. A
 * one-host URL without target_session_attrs is pooled exactly as before, unchecked.
 */
export function primaryPool(database: DatabaseAccess, applicationName: string, settings: PoolSettings, kind: ConnectionKind = {}): pg.Pool {
  const { target } = parsePostgresUrl(database.url.reveal());
  const config = { ...pgConnectionConfigs(database, applicationName, kind)[0]!, ...settings };
  if (target === null) return new pg.Pool(config);
  return new pg.Pool({ ...config, Client: primarySessions(database, applicationName, kind, target) });
}

/** Where a pool's sessions last found the primary. */
interface ServerAddress {
  readonly host: string;
  readonly port: number;
}

/** The pg.Client of a primaryPool: see there. */
function primarySessions(database: DatabaseAccess, applicationName: string, kind: ConnectionKind, target: SessionTarget): typeof pg.Client {
  // Shared by the sessions being made at once: one search, not one each.
  let primary: Promise<ServerAddress> | null = null;
  const findPrimary = (): Promise<ServerAddress> => {
    primary ??= connectPostgres(database, applicationName, kind).then(async (probe) => {
      await probe.end().catch(() => undefined);
      return { host: probe.host, port: probe.port };
    });
    primary.catch(() => (primary = null));
    return primary;
  };
  return class PrimarySession extends pg.Client {
    override connect(): Promise<pg.Client>;
    override connect(callback: ((err: Error) => void) | ((err: null, client: pg.Client) => void)): void;
    override connect(callback?: ((err: Error) => void) | ((err: null, client: pg.Client) => void)): Promise<pg.Client> | void {
      const connected = this.connectToPrimary();
      if (!callback) return connected;
      // pg's pool calls it node-style, as pg's own connect does.
      const done = callback as (err: Error | null, client?: pg.Client) => void;
      connected.then((client) => done(null, client), (error: Error) => done(error));
    }

    private async connectToPrimary(): Promise<pg.Client> {
      const at = await findPrimary();
      // The host and port pg connects to and checks the certificate against (pg reads them at
      // connect time, from these fields); everything else of the session is the same on every
      // host of one URL.
      this.host = at.host;
      this.port = at.port;
      try {
        await super.connect();
      } catch (error) {
        primary = null;
        throw error;
      }
      const answer = await sessionKind(this).catch((error: unknown) => `did not answer (${errorMessage(error)})`);
      if (qualifies(answer, target)) return this;
      primary = null;
      await this.end().catch(() => undefined);
      throw new RelayError('SOURCE_NO_PRIMARY', `${at.host}:${at.port}, the primary a moment ago, is now ${answer} (target_session_attrs=${target}): the next session looks for the primary again`, { details: { hosts: databaseHosts(database) } });
    }
  };
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

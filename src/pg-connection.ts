import type pg from 'pg';
import { parse } from 'pg-connection-string';
import { Secret } from './security/secret.js';

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

export function pgConnectionConfig(database: DatabaseAccess, applicationName: string, { replication = false, queryTimeoutMs = QUERY_TIMEOUT_MS }: ConnectionKind = {}): pg.ClientConfig {
  const { password } = database;
  // Parsed here rather than given to pg as connectionString: pg lets every key of a connection
  // string, even an absent password, replace the config's, and the relay's settings must win.
  const parsed = parse(database.url.reveal()) as pg.ClientConfig & { options?: string };
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
  const fromUrl = new URL(database.url.reveal()).searchParams.get('options');
  const operator = fromUrl ?? process.env.PGOPTIONS ?? '';
  const named = new Set<string>();
  // -c name=value, -cname=value or --name=value; Postgres reads names case-insensitively, - as _.
  for (const [, name] of operator.matchAll(/(?:^|\s)(?:-c\s*|--)([A-Za-z_][\w.-]*)=/g)) named.add(name!.toLowerCase().replaceAll('-', '_'));
  return { source: fromUrl === null ? 'PGOPTIONS' : "DATABASE_URL's options", settings: Object.keys(SESSION_SETTINGS).filter((setting) => named.has(setting.toLowerCase())) };
}

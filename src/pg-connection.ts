import type pg from 'pg';

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
 * Settings the replication session fixes for itself: it would otherwise inherit the database's
 * and the role's (ALTER DATABASE ... SET DateStyle = 'SQL, DMY'), and the text Postgres sends
 * for each column depends on them. With these, a timestamptz is ISO 8601 in UTC (the created_at
 * header), a float keeps every digit, a bytea is hex (what pg's parser reads), an interval is
 * in Postgres's default form.
 */
const REPLICATION_SESSION_SETTINGS: Readonly<Record<string, string>> = {
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

export function pgConnectionConfig(databaseUrl: string, applicationName: string, { replication = false, queryTimeoutMs = QUERY_TIMEOUT_MS }: ConnectionKind = {}): pg.ClientConfig {
  return {
    connectionString: databaseUrl,
    application_name: applicationName,
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    ...(replication ? { replication: 'database', options: sessionOptions(REPLICATION_SESSION_SETTINGS) } : queryTimeoutMs > 0 ? { query_timeout: queryTimeoutMs } : {}),
  } as pg.ClientConfig;
}

/** The startup packet's `options`: -c name=value, spaces in values escaped as Postgres reads them. */
function sessionOptions(settings: Readonly<Record<string, string>>): string {
  return Object.entries(settings).map(([name, value]) => `-c ${name}=${value.replaceAll(' ', '\\ ')}`).join(' ');
}

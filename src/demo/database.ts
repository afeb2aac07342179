import pg from 'pg';
import type { ArgSpec } from '../config/commands.js';
import { load } from '../config/load.js';
import { databaseAccess, primaryPool } from '../pg-connection.js';

/**
 * The demo services' Postgres pool, from the relay's own variables: DATABASE_URL (or
 * DATABASE_URL_FILE) and DATABASE_PASSWORD (or DATABASE_PASSWORD_FILE), so that under
 * docker-compose the password is a secret file, as the relay's is.
 */
export function demoPool(env: Readonly<Record<string, string | undefined>>, applicationName: string): pg.Pool {
  const config = load<'databaseUrl' | 'databasePassword', never, Record<never, ArgSpec>>({ summary: 'demo database', options: ['databaseUrl', 'databasePassword'] }, { env });
  return primaryPool(databaseAccess(config.databaseUrl, config.databasePassword), applicationName, { max: 2 });
}

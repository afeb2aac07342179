import type pg from 'pg';
import { connectPostgres, type DatabaseAccess } from './pg-connection.js';

/**
 * Where the relay's slot lives and its WAL is read: DATABASE_URL's primary, or a physical
 * standby of it (OUTBOX_REPLICA_URL, Postgres 16+), which spares the primary the decoding and
 * sending of every event. What writes (setup's publication, prune, the recovery marks) always
 * goes to DATABASE_URL; what reads the slot goes here.
 */
export interface SlotServer {
  readonly database: DatabaseAccess;
  /** Configured as a standby (OUTBOX_REPLICA_URL). Promoted since, it answers as a primary. */
  readonly standby: boolean;
}

/**
 * The WAL position a slot's lag is measured against, on either kind of server: a primary's
 * current position, or what a standby has replayed (pg_current_wal_lsn() fails during
 * recovery, and a standby's slot can only ever reach what it has replayed).
 */
export const SERVER_WAL_LSN_SQL = 'CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END';

/** `work` on a connection to the slot's server: `primary` itself when the slot is the primary's. */
export async function onSlotServer<T>(server: SlotServer, primary: pg.Client, work: (client: pg.Client) => Promise<T>, applicationName = 'outbox-relay'): Promise<T> {
  if (!server.standby) return work(primary);
  const client = await connectPostgres(server.database, applicationName);
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

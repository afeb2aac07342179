import { connectHost, databaseHosts, type DatabaseAccess } from '../pg-connection.js';

/**
 * What a standby holds of the slot, read on the standby itself: Postgres 17's
 * pg_replication_slots on the primary says whether a slot is a failover slot, never whether a
 * standby has synchronized it; the standby's own view does (`synced`, `temporary`,
 * `invalidation_reason`).
 * - synced: a copy a promotion can stream from (synced, not temporary, not invalidated);
 * - not-ready: a copy that is temporary (the standby waits for the primary's slot to pass its
 *   own position, which takes the relay confirming something) or invalidated;
 * - missing: no copy (not a failover slot, or sync_replication_slots is off there);
 * - too-old: the standby runs a Postgres before 17 (no slot synchronization);
 * - primary: this host is not a standby (the relay's own server, or a second primary);
 * - unreachable: no connection.
 */
export type StandbyCopyState = 'synced' | 'not-ready' | 'missing' | 'too-old' | 'primary' | 'unreachable';

export interface StandbyCopy {
  readonly host: string;
  readonly state: StandbyCopyState;
  /** The copy's confirmed_flush_lsn: where a promoted standby resumes (at or before the relay's). */
  readonly confirmedFlushLsn: string | null;
}

const POSTGRES_17 = 170_000;

/**
 * Every other host of DATABASE_URL, asked for its copy of the slot; empty when the URL names
 * one host (then the relay cannot know: docs/operations.md#postgres-failover says how to look on the standby).
 */
export async function readStandbyCopies(database: DatabaseAccess, slot: string): Promise<StandbyCopy[]> {
  const hosts = databaseHosts(database);
  if (hosts.length < 2) return [];
  return Promise.all(hosts.map((host, index) => readCopy(database, index, host, slot)));
}

async function readCopy(database: DatabaseAccess, index: number, host: string, slot: string): Promise<StandbyCopy> {
  const client = await connectHost(database, index, 'outbox-relay-monitor');
  if (!client) return { host, state: 'unreachable', confirmedFlushLsn: null };
  client.on('error', () => undefined);
  try {
    // to_jsonb: the columns of 17 (synced, temporary's meaning for synced slots,
    // invalidation_reason) read as absent keys before it, in one query for every version.
    const { rows } = await client.query<{ standby: boolean; version: number; copy: Record<string, unknown> | null }>(
      `SELECT pg_is_in_recovery() AS standby, current_setting('server_version_num')::int AS version,
              (SELECT to_jsonb(s) FROM pg_replication_slots s WHERE slot_name = $1) AS copy`,
      [slot],
    );
    const { standby, version, copy } = rows[0]!;
    const confirmedFlushLsn = typeof copy?.confirmed_flush_lsn === 'string' ? copy.confirmed_flush_lsn : null;
    return { host, state: copyState(standby, version, copy), confirmedFlushLsn };
  } catch {
    return { host, state: 'unreachable', confirmedFlushLsn: null };
  } finally {
    await client.end().catch(() => undefined);
  }
}

function copyState(standby: boolean, version: number, copy: Record<string, unknown> | null): StandbyCopyState {
  if (!standby) return 'primary';
  if (version < POSTGRES_17) return 'too-old';
  if (!copy) return 'missing';
  return copy.synced === true && copy.temporary === false && copy.invalidation_reason == null ? 'synced' : 'not-ready';
}

/** Standbys holding a copy a promotion can stream from; -1 when DATABASE_URL names no other host. */
export function syncedStandbys(copies: readonly StandbyCopy[]): number {
  return copies.length === 0 ? -1 : copies.filter((copy) => copy.state === 'synced').length;
}

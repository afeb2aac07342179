import type pg from 'pg';
import { RelayError } from '../errors.js';

const POSTGRES_16 = 160_000;
/** How often the primary is asked for a running-transactions record while a standby's slot is being made. */
const SNAPSHOT_NUDGE_MS = 500;

interface StandbyFacts {
  readonly inRecovery: boolean;
  readonly version: number;
  readonly versionText: string;
  readonly systemId: string;
  readonly walLevel: string;
  readonly hotStandbyFeedback: string;
  readonly primarySlotName: string;
}

/**
 * What a standby needs to hold a logical slot the relay can rely on, checked against its
 * primary; returns setup's and run's lines, and refuses (SETUP_STANDBY) naming the setting:
 * - Postgres 16 or later (logical decoding on a standby);
 * - the primary's cluster (same system identifier): a slot on another cluster would stream
 *   someone else's WAL;
 * - wal_level = logical on the standby (the primary's is checked as for any setup);
 * - hot_standby_feedback = on: without it the primary vacuums catalog rows the slot still needs
 *   and the standby invalidates the slot (a conflict), losing it;
 * - primary_slot_name, a physical slot on the primary that exists: it keeps the WAL and the
 *   catalog rows the standby needs while the standby is disconnected, which feedback alone
 *   does not.
 * A server that is not in recovery is accepted as the standby it was (promoted since): the
 * relay reads on from it as from any primary, and says so.
 */
export async function checkStandby(primary: pg.ClientBase, standby: pg.ClientBase): Promise<string[]> {
  const facts = await standbyFacts(standby);
  const primaryId = await systemIdentifier(primary);
  if (facts.systemId !== primaryId) {
    throw new RelayError('SETUP_STANDBY', `OUTBOX_REPLICA_URL is not a standby of DATABASE_URL's primary: its system identifier is ${facts.systemId}, the primary's ${primaryId} (another cluster, or a copy that was promoted long ago)`);
  }
  if (!facts.inRecovery) {
    return [`OUTBOX_REPLICA_URL: a primary now (Postgres ${facts.versionText}, not in recovery: promoted), of the same cluster as DATABASE_URL; the slot is read there as on any primary`];
  }
  if (facts.version < POSTGRES_16) {
    throw new RelayError('SETUP_STANDBY', `OUTBOX_REPLICA_URL is Postgres ${facts.versionText}: a standby can hold a logical slot from Postgres 16 on; read from the primary (unset OUTBOX_REPLICA_URL), or upgrade the standby`);
  }
  const missing: string[] = [];
  if (facts.walLevel !== 'logical') missing.push(`wal_level is "${facts.walLevel}" on the standby (expected logical, as on the primary; a restart applies it)`);
  if (facts.hotStandbyFeedback !== 'on') missing.push('hot_standby_feedback is off on the standby (expected on: without it the primary removes catalog rows the slot needs, and the standby invalidates the slot)');
  if (facts.primarySlotName === '') {
    missing.push("primary_slot_name is empty on the standby (expected a physical slot of the primary: without one the primary keeps neither the WAL nor the catalog rows the standby's slot needs while it is disconnected)");
  } else {
    const { rows } = await primary.query<{ slot_type: string }>('SELECT slot_type FROM pg_replication_slots WHERE slot_name = $1', [facts.primarySlotName]);
    if (rows[0]?.slot_type !== 'physical') missing.push(`primary_slot_name is "${facts.primarySlotName}" on the standby, and the primary has no physical slot of that name (expected: SELECT pg_create_physical_replication_slot('${facts.primarySlotName}', true) on the primary)`);
  }
  if (missing.length > 0) throw new RelayError('SETUP_STANDBY', `OUTBOX_REPLICA_URL cannot hold the relay's slot: ${missing.join('; ')}`, { details: { missing } });
  return [`OUTBOX_REPLICA_URL: a standby (Postgres ${facts.versionText}, hot_standby_feedback on, through the primary's physical slot ${facts.primarySlotName}): the slot lives and the WAL is read there`];
}

async function standbyFacts(client: pg.ClientBase): Promise<StandbyFacts> {
  const { rows } = await client.query<{ in_recovery: boolean; version: number; version_text: string; wal_level: string; feedback: string; primary_slot: string | null }>(
    `SELECT pg_is_in_recovery() AS in_recovery, current_setting('server_version_num')::int AS version, current_setting('server_version') AS version_text,
            current_setting('wal_level') AS wal_level, current_setting('hot_standby_feedback') AS feedback, current_setting('primary_slot_name', true) AS primary_slot`,
  );
  const row = rows[0]!;
  return {
    inRecovery: row.in_recovery,
    version: row.version,
    versionText: row.version_text,
    systemId: await systemIdentifier(client),
    walLevel: row.wal_level,
    hotStandbyFeedback: row.feedback,
    primarySlotName: row.primary_slot ?? '',
  };
}

async function systemIdentifier(client: pg.ClientBase): Promise<string> {
  const { rows } = await client.query<{ id: string }>('SELECT system_identifier::text AS id FROM pg_control_system()');
  return rows[0]!.id;
}

/**
 * Creates the logical slot on the standby; returns its start LSN. A standby's slot becomes
 * consistent only at a running-transactions record from the primary, which an idle primary
 * writes every 15 s at best (and not at all with nothing to log): the primary is asked for one
 * (pg_log_standby_snapshot, 16+) until the slot is made, so that setup takes a second, not
 * minutes.
 */
export async function createStandbySlot(standby: pg.ClientBase, primary: pg.ClientBase, slot: string): Promise<string> {
  let made = false;
  const creating = standby
    .query<{ lsn: string }>("SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')", [slot])
    .finally(() => (made = true));
  const nudging = (async () => {
    while (!made) {
      await primary.query('SELECT pg_log_standby_snapshot()');
      await new Promise((resolve) => setTimeout(resolve, SNAPSHOT_NUDGE_MS));
    }
  })();
  const [{ rows }] = await Promise.all([creating, nudging]);
  return rows[0]!.lsn;
}

/**
 * A slot made on a standby cannot be a failover slot (Postgres refuses: failover slots are a
 * primary's, copied to its standbys); OUTBOX_SLOT_FAILOVER=true with OUTBOX_REPLICA_URL is
 * refused rather than left to look granted.
 */
export function noFailoverOnStandby(option: 'auto' | 'true' | 'false'): false {
  if (option === 'true') {
    throw new RelayError('CONFIG_INVALID', "OUTBOX_SLOT_FAILOVER=true, but OUTBOX_REPLICA_URL puts the slot on a standby, where Postgres makes no failover slots: the standby's own slot stays when it is promoted. Set OUTBOX_SLOT_FAILOVER=auto (or false)");
  }
  return false;
}

import pg from 'pg';
import { RelayError } from '../errors.js';
import { connectPostgres, type DatabaseAccess } from '../pg-connection.js';

/** OUTBOX_SLOT_FAILOVER. */
export type SlotFailover = 'auto' | 'true' | 'false';

const POSTGRES_17 = 170_000;

/**
 * Whether the slot is to be a failover slot on this server: on 17 and later unless turned off;
 * never before 17, which has no such slots (asked for explicitly, that is refused rather than
 * leaving an operator to believe the slot survives a promotion).
 */
export function wantsFailover(option: SlotFailover, serverVersion: number): boolean {
  if (serverVersion >= POSTGRES_17) return option !== 'false';
  if (option === 'true') {
    throw new RelayError('CONFIG_INVALID', `OUTBOX_SLOT_FAILOVER=true, but Postgres ${Math.floor(serverVersion / 10_000)} has no failover slots (17 and later have): a promotion would leave the new primary without the slot, and \`outbox-relay recover\` would have to publish retained rows again. Set OUTBOX_SLOT_FAILOVER=auto (or false) on this server`);
  }
  return false;
}

/** The server's version number (170004 for 17.4). */
export async function serverVersion(client: pg.ClientBase): Promise<number> {
  const { rows } = await client.query<{ version: number }>("SELECT current_setting('server_version_num')::int AS version");
  return rows[0]!.version;
}

/** pg_create_logical_replication_slot, with failover on 17+ (its fifth argument); returns the slot's start LSN. */
export async function createSlot(client: pg.ClientBase, slot: string, failover: boolean, version: number): Promise<string> {
  const { rows } = version >= POSTGRES_17
    ? await client.query<{ lsn: string }>("SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput', false, false, $2)", [slot, failover])
    : await client.query<{ lsn: string }>("SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')", [slot]);
  return rows[0]!.lsn;
}

/**
 * An existing slot on 17+ made what `wanted` says: ALTER_REPLICATION_SLOT, a replication
 * command (there is no SQL function for it), which needs the slot free. Returns the line for
 * setup's report.
 */
export async function alignFailover(database: DatabaseAccess, client: pg.ClientBase, slot: string, wanted: boolean): Promise<string> {
  const { rows } = await client.query<{ failover: boolean; active: boolean }>('SELECT failover, active FROM pg_replication_slots WHERE slot_name = $1', [slot]);
  const row = rows[0]!;
  if (row.failover === wanted) return `slot ${slot}: exists (${describe(wanted)})`;
  if (row.active) return `slot ${slot}: exists (${describe(row.failover)}); not changed to ${describe(wanted)} while a relay reads it: stop the relay and run setup again`;
  const replication = await connectPostgres(database, 'outbox-relay-setup', { replication: true });
  try {
    await replication.query(`ALTER_REPLICATION_SLOT ${pg.escapeIdentifier(slot)} (FAILOVER ${wanted})`);
  } finally {
    await replication.end();
  }
  return `slot ${slot}: exists, now ${describe(wanted)}`;
}

/**
 * For `run` (which creates nothing): a slot on 17+ that is not what OUTBOX_SLOT_FAILOVER asks,
 * said at start; null when it is, or there is no slot (the stream says so), or before 17.
 */
export async function failoverFinding(client: pg.ClientBase, slot: string, option: SlotFailover): Promise<string | null> {
  const wanted = wantsFailover(option, await serverVersion(client));
  if (!wanted) return null;
  const { rows } = await client.query<{ failover: boolean }>('SELECT failover FROM pg_replication_slots WHERE slot_name = $1', [slot]);
  if (!rows[0] || rows[0].failover) return null;
  return `slot ${slot} is ${describe(false)}; \`outbox-relay setup\` makes it one while no relay reads it (OUTBOX_SLOT_FAILOVER)`;
}

export function describe(failover: boolean): string {
  return failover ? 'a failover slot: standbys with sync_replication_slots keep a copy' : 'not a failover slot: a promotion loses it';
}

/**
 * For a failover slot: without synchronized_standby_slots on the primary, the relay can be sent
 * (and publish) transactions the standby has not received; after a promotion those are gone
 * from the database, though already in Kafka. Said by setup, not refused: a primary without a
 * standby yet is a fair place to start.
 */
export async function standbySlotsFinding(client: pg.ClientBase): Promise<string> {
  const { rows } = await client.query<{ slots: string | null }>("SELECT current_setting('synchronized_standby_slots', true) AS slots");
  const slots = rows[0]!.slots;
  if (slots) return `synchronized_standby_slots = '${slots}': the relay is sent only what those standbys have`;
  return "synchronized_standby_slots is empty: the relay can publish a transaction no standby has yet, which a promotion then loses from the database (though not from Kafka); name the standbys' physical slots there (docs/operations.md#postgres-failover)";
}

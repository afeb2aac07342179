import { connectPostgres, type DatabaseAccess } from '../pg-connection.js';
import { RelayError } from '../errors.js';
import { SERVER_WAL_LSN_SQL } from '../slot-server.js';

/**
 * Drops the replication slot: Postgres releases the WAL it held, and every outbox row committed
 * after the slot's confirmed position will never be streamed. Returns that position so the
 * operator knows where to replay from.
 */
export async function dropSlot(database: DatabaseAccess, slot: string): Promise<{ confirmedFlushLsn: string | null; lagBytes: number | null }> {
  const client = await connectPostgres(database, 'outbox-relay-drop-slot');
  try {
    const { rows } = await client.query<{ active: boolean; confirmed: string | null; lag: string | null }>(
      `SELECT active, confirmed_flush_lsn::text AS confirmed, (${SERVER_WAL_LSN_SQL} - confirmed_flush_lsn)::text AS lag FROM pg_replication_slots WHERE slot_name = $1`,
      [slot],
    );
    const row = rows[0];
    if (!row) throw new RelayError('SOURCE_SLOT_MISSING', `replication slot "${slot}" does not exist`);
    if (row.active) throw new RelayError('SOURCE_SLOT_BUSY', `replication slot "${slot}" is being read; stop every relay instance first`);
    await client.query('SELECT pg_drop_replication_slot($1)', [slot]);
    return { confirmedFlushLsn: row.confirmed, lagBytes: row.lag === null ? null : Number(row.lag) };
  } finally {
    await client.end();
  }
}

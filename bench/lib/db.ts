import { readFile } from 'node:fs/promises';
import pg from 'pg';
import { run } from './proc.js';

const OUTBOX_SQL = new URL('../../sql/001_event_outbox.sql', import.meta.url);

/** The outbox every CDC contender reads (the relay's default table name). */
export const CDC_TABLE = 'event_outbox';
/** The polling relay's outbox: the same columns plus the status it needs. */
export const POLLING_TABLE = 'polling_outbox';
export const PUBLICATION = 'bench_pub';
/** application_name of the bench's own sessions (the load, its queries). */
export const BENCH_APPLICATION = 'bench';

export const EVENT_TYPE = 'PaymentRecorded';
export const AGGREGATE_TYPE = 'payment';

/**
 * Server-side helpers: a payload of about `size` bytes of JSON text that pglz cannot shrink
 * (distinct md5 chunks, like real ids and amounts), and a loader that commits every `perTx`
 * rows, so a backlog of single-row transactions loads at server speed instead of at one
 * network round trip per transaction.
 */
const HELPERS = `
CREATE OR REPLACE FUNCTION bench_payload(i bigint, size int) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $f$
  SELECT jsonb_build_object(
    'invoice_id', 'inv-' || i, 'customer_id', 'cust-' || (i % 5000), 'amount_cents', (i * 7919) % 1000000,
    'currency', 'EUR', 'method', 'card', 'note',
    (SELECT string_agg(md5(i::text || ':' || k), '') FROM generate_series(1, greatest(1, (size - 130) / 32)) k))
$f$;

-- 1,000 distinct payloads per size, computed once: loading then costs what an application's
-- INSERT costs, not 60 md5() calls per row. Each row still gets its own invoice id.
CREATE UNLOGGED TABLE IF NOT EXISTS bench_payloads (size int, k int, payload jsonb, PRIMARY KEY (size, k));

CREATE OR REPLACE PROCEDURE bench_load(tbl text, run text, first bigint, last bigint, per_tx int, size int)
LANGUAGE plpgsql AS $p$
DECLARE i bigint := first;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM bench_payloads p WHERE p.size = bench_load.size) THEN
    INSERT INTO bench_payloads SELECT bench_load.size, k, bench_payload(k, bench_load.size) FROM generate_series(0, 999) k
      ON CONFLICT DO NOTHING;
    COMMIT;
  END IF;
  WHILE i <= last LOOP
    IF tbl = '${CDC_TABLE}' THEN
      INSERT INTO ${CDC_TABLE} (event_id, aggregate_type, aggregate_id, event_type, payload)
        SELECT run || '-' || g, '${AGGREGATE_TYPE}', 'acct-' || (g % 1000), '${EVENT_TYPE}',
               p.payload || jsonb_build_object('invoice_id', 'inv-' || g)
          FROM generate_series(i, least(i + per_tx - 1, last)) g
          JOIN bench_payloads p ON p.size = bench_load.size AND p.k = g % 1000;
    ELSE
      INSERT INTO ${POLLING_TABLE} (event_id, aggregate_type, aggregate_id, event_type, payload)
        SELECT run || '-' || g, '${AGGREGATE_TYPE}', 'acct-' || (g % 1000), '${EVENT_TYPE}',
               p.payload || jsonb_build_object('invoice_id', 'inv-' || g)
          FROM generate_series(i, least(i + per_tx - 1, last)) g
          JOIN bench_payloads p ON p.size = bench_load.size AND p.k = g % 1000;
    END IF;
    COMMIT;
    i := i + per_tx;
  END LOOP;
END
$p$;
`;

export class Database {
  readonly pool: pg.Pool;

  /** `pool`: e.g. idleTimeoutMillis 0 for a load whose sessions must not come and go (bench:standby). */
  constructor(readonly url: string, pool: Pick<pg.PoolConfig, 'max' | 'idleTimeoutMillis'> = {}) {
    // Named, so that the soak can tell the load's backends from the contender's (pg-cpu.ts).
    this.pool = new pg.Pool({ connectionString: url, max: 12, application_name: BENCH_APPLICATION, ...pool });
    this.pool.on('error', () => undefined);
  }

  async close(): Promise<void> {
    await this.pool.end();
  }

  async query<R extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<R[]> {
    return (await this.pool.query<R>(sql, params)).rows;
  }

  /** Drops the slots, tables and publication of earlier runs; creates the helpers. */
  async reset(): Promise<void> {
    await this.clear();
    await this.query(HELPERS);
  }

  /**
   * Drops what the bench made: its slots (named bench_*; not the others of a server it may
   * share, e.g. OUTBOX_STACK_DIR pointing at the test stack), its tables and publication, and
   * with `helpers` the helpers too.
   */
  async clear(helpers = false): Promise<void> {
    const slots = await this.query<{ slot_name: string; active_pid: number | null }>("SELECT slot_name, active_pid FROM pg_replication_slots WHERE starts_with(slot_name, 'bench_')");
    for (const slot of slots) {
      if (slot.active_pid) await this.query('SELECT pg_terminate_backend($1)', [slot.active_pid]);
      await this.dropSlot(slot.slot_name);
    }
    await this.query(`DROP PUBLICATION IF EXISTS ${PUBLICATION}`);
    await this.query(`DROP TABLE IF EXISTS ${CDC_TABLE}, ${POLLING_TABLE}`);
    if (helpers) await this.query('DROP PROCEDURE IF EXISTS bench_load; DROP FUNCTION IF EXISTS bench_payload; DROP TABLE IF EXISTS bench_payloads');
  }

  /** A fresh outbox table, its publication (inserts only) and a slot created before any row. */
  async freshCdcOutbox(slot: string): Promise<void> {
    await this.reset();
    const sql = await readFile(OUTBOX_SQL, 'utf8');
    await this.query(sql);
    await this.query(`CREATE PUBLICATION ${PUBLICATION} FOR TABLE public.${CDC_TABLE} WITH (publish = 'insert')`);
    await this.query("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", [slot]);
  }

  /** The polling relay's table: same columns, a status, and a partial index on pending rows. */
  async freshPollingOutbox(): Promise<void> {
    await this.reset();
    // The outbox's own DDL under another name, plus what a polling relay needs on top of it.
    const sql = await readFile(OUTBOX_SQL, 'utf8');
    await this.query(sql.replaceAll('event_outbox', POLLING_TABLE));
    await this.query(`
      ALTER TABLE ${POLLING_TABLE} ADD COLUMN status text NOT NULL DEFAULT 'pending', ADD COLUMN sent_at timestamptz;
      CREATE INDEX ${POLLING_TABLE}_pending_idx ON ${POLLING_TABLE} (created_at) WHERE status = 'pending';`);
  }

  async dropSlot(slot: string): Promise<void> {
    for (let attempt = 0; ; attempt += 1) {
      try {
        await this.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1', [slot]);
        return;
      } catch (error) {
        // Still active for a moment after its reader disconnected.
        if (attempt > 50) throw error;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  }

  /**
   * Loads `count` events in transactions of `perTx` rows over `connections` sessions, with
   * synchronous_commit off (the loader is not what is measured).
   */
  async load(table: string, run: string, count: number, perTx: number, payloadBytes: number, connections = 2): Promise<void> {
    const share = Math.ceil(count / connections / perTx) * perTx;
    const jobs: Promise<void>[] = [];
    for (let c = 0; c < connections; c += 1) {
      const first = c * share + 1;
      const last = Math.min(count, (c + 1) * share);
      if (first > last) continue;
      jobs.push(
        (async () => {
          const client = new pg.Client({ connectionString: this.url });
          await client.connect();
          try {
            await client.query('SET synchronous_commit = off');
            await client.query('CALL bench_load($1, $2, $3, $4, $5, $6)', [table, run, first, last, perTx, payloadBytes]);
          } finally {
            await client.end();
          }
        })(),
      );
    }
    await Promise.all(jobs);
  }

  async counters(table: string): Promise<DbCounters> {
    const [row] = await this.query<{ lsn: string; ins: string | null; upd: string | null }>(
      `SELECT pg_current_wal_lsn()::text AS lsn,
              (SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = $1) AS ins,
              (SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = $1) AS upd`,
      [table],
    );
    return { walLsn: parseLsn(row!.lsn), rowsWritten: Number(row!.ins ?? 0) + Number(row!.upd ?? 0) };
  }

  /** Table statistics reach the shared counters up to a second after a backend's commit. */
  async settledCounters(table: string): Promise<DbCounters> {
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    return this.counters(table);
  }

  async currentLsn(): Promise<string> {
    const [row] = await this.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
    return row!.lsn;
  }

  async checkpoint(): Promise<void> {
    await this.query('CHECKPOINT');
  }

  /**
   * After a load, what it would otherwise leave to run during the first drain: autovacuum's
   * insert-triggered VACUUM and ANALYZE of the table (within autovacuum_naptime), and the
   * kernel writing back the pages a CHECKPOINT with fsync=off only hands to it. Without this,
   * whichever contender drained first ran slower (seen as an order effect between relay-json
   * and relay-json-sasl-ssl). Nothing the CDC contenders read: they decode WAL.
   */
  async settle(table: string): Promise<void> {
    await this.query(`VACUUM (ANALYZE) ${table}`);
    await this.checkpoint();
    await run('sync', []);
  }

  /**
   * Sets a reloadable setting for the run (ALTER SYSTEM, reload) unless the server has it
   * already; returns what puts the server's own value back.
   */
  async setForRun(name: string, value: string): Promise<() => Promise<void>> {
    if ((await this.setting(name)) === value) return async () => undefined;
    await this.query(`ALTER SYSTEM SET ${name} = '${value.replace(/'/g, "''")}'`);
    await this.query('SELECT pg_reload_conf()');
    for (let attempt = 0; (await this.setting(name)) !== value; attempt += 1) {
      if (attempt > 50) throw new Error(`${name} is still not ${value} 5 s after ALTER SYSTEM and a reload`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return async () => {
      await this.query(`ALTER SYSTEM RESET ${name}`);
      await this.query('SELECT pg_reload_conf()');
    };
  }

  /** The server and the settings the figures depend on, as the reports name them. */
  async description(): Promise<string> {
    return `${(await this.setting('server_version')).split(' ')[0]}, fsync=${await this.setting('fsync')}, synchronous_commit=${await this.setting('synchronous_commit')}, wal_level=${await this.setting('wal_level')}`;
  }

  async setting(name: string): Promise<string> {
    const [row] = await this.query<{ value: string }>('SELECT current_setting($1) AS value', [name]);
    return row!.value;
  }
}

export interface DbCounters {
  readonly walLsn: bigint;
  readonly rowsWritten: number;
}

export function parseLsn(text: string): bigint {
  const [high, low] = text.split('/');
  return (BigInt(`0x${high}`) << 32n) + BigInt(`0x${low}`);
}

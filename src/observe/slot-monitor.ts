import type pg from 'pg';
import { connectPostgres, type DatabaseAccess } from '../pg-connection.js';
import type { Logger } from 'pino';
import type { RelayMetrics } from './metrics.js';
import { WAL_STATUSES } from './metrics.js';
import { readStandbyCopies, syncedStandbys } from './standby-copies.js';
import { SERVER_WAL_LSN_SQL, type SlotServer } from '../slot-server.js';
import { parseLsn } from '../lsn.js';
import { slotOutageBudget } from './outage-budget.js';
import { readPrimary, readStandby, ReplayDelayTracker, type PrimaryReading, type ReplayDelay } from './replay-delay.js';

/** Weight of the newest poll in the WAL rate's moving average. */
const WAL_RATE_WEIGHT = 0.1;

export interface SlotReport {
  readonly slot: string;
  readonly exists: boolean;
  readonly active: boolean;
  readonly activePid: number | null;
  readonly confirmedFlushLsn: string | null;
  /** The server's WAL position: a primary's current one, or what a standby has replayed. */
  readonly currentWalLsn: string;
  /** The slot's server is a standby in recovery (OUTBOX_REPLICA_URL); false on a primary, a promoted one included. */
  readonly onStandby: boolean;
  readonly lagBytes: number | null;
  readonly walStatus: string | null;
  /** null when max_slot_wal_keep_size is unlimited. */
  readonly safeWalSizeBytes: number | null;
  /** How long ago the WAL now confirmed was written (pg_stat_replication.flush_lag); null when idle or inactive. */
  readonly flushLagSeconds: number | null;
  readonly reader: { readonly applicationName: string; readonly clientAddress: string | null; readonly since: Date } | null;
  /** A failover slot (Postgres 17+: standbys with sync_replication_slots keep a copy); null before 17, or no slot. */
  readonly failover: boolean | null;
  /** This slot is itself a copy synchronized from a primary (true on a promoted standby); null before 17, or no slot. */
  readonly synced: boolean | null;
  /** idle_replication_slot_timeout in seconds (Postgres 18): an unread slot is invalidated after it; null when off or before 18. */
  readonly idleTimeoutSeconds: number | null;
  /** When the slot stopped being read (inactive_since, 17+); null while read, or before 17. */
  readonly inactiveSince: Date | null;
}

/** What Postgres says about the slot: for `status` and for the relay's slot metrics. */
export async function readSlot(client: pg.ClientBase, slot: string): Promise<SlotReport> {
  const { rows } = await client.query<{
    active: boolean; active_pid: number | null; confirmed: string | null; current: string; lag: string | null; on_standby: boolean;
    wal_status: string | null; safe_wal_size: string | null; flush_lag: number | null;
    application_name: string | null; client_addr: string | null; backend_start: Date | null; failover: boolean | null; synced: boolean | null; inactive_since: Date | null; idle_timeout: number | null;
  }>(
    `SELECT s.active, s.active_pid, s.confirmed_flush_lsn::text AS confirmed, ${SERVER_WAL_LSN_SQL}::text AS current, pg_is_in_recovery() AS on_standby,
            (${SERVER_WAL_LSN_SQL} - s.confirmed_flush_lsn)::text AS lag, s.wal_status, s.safe_wal_size::text AS safe_wal_size,
            extract(epoch FROM r.flush_lag)::float8 AS flush_lag, r.application_name, r.client_addr::text, r.backend_start,
            -- Columns of Postgres 17: absent keys (null) before it.
            (to_jsonb(s) ->> 'failover')::boolean AS failover, (to_jsonb(s) ->> 'synced')::boolean AS synced,
            (to_jsonb(s) ->> 'inactive_since')::timestamptz AS inactive_since, ${IDLE_TIMEOUT_SQL} AS idle_timeout
       FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid
      WHERE s.slot_name = $1`,
    [slot],
  );
  const row = rows[0];
  if (!row) {
    const current = await client.query<{ lsn: string; on_standby: boolean; idle_timeout: number | null }>(`SELECT ${SERVER_WAL_LSN_SQL}::text AS lsn, pg_is_in_recovery() AS on_standby, ${IDLE_TIMEOUT_SQL} AS idle_timeout`);
    const server = current.rows[0]!;
    return { slot, exists: false, active: false, activePid: null, confirmedFlushLsn: null, currentWalLsn: server.lsn, onStandby: server.on_standby, lagBytes: null, walStatus: null, safeWalSizeBytes: null, flushLagSeconds: null, reader: null, failover: null, synced: null, idleTimeoutSeconds: server.idle_timeout, inactiveSince: null };
  }
  return {
    slot,
    exists: true,
    active: row.active,
    activePid: row.active_pid,
    confirmedFlushLsn: row.confirmed,
    currentWalLsn: row.current,
    onStandby: row.on_standby,
    lagBytes: row.lag === null ? null : Number(row.lag),
    walStatus: row.wal_status,
    // Null means unlimited, except for a lost slot, which has no WAL left to lose.
    safeWalSizeBytes: row.wal_status === 'lost' ? 0 : row.safe_wal_size === null ? null : Number(row.safe_wal_size),
    flushLagSeconds: row.flush_lag,
    reader: row.active && row.backend_start ? { applicationName: row.application_name ?? '', clientAddress: row.client_addr, since: row.backend_start } : null,
    failover: row.failover,
    synced: row.synced,
    idleTimeoutSeconds: row.idle_timeout,
    inactiveSince: row.inactive_since,
  };
}

/** idle_replication_slot_timeout (Postgres 18) in seconds; null when 0 (off) or on a server without it. */
const IDLE_TIMEOUT_SQL = `(SELECT nullif(setting::float8, 0) * CASE unit WHEN 'min' THEN 60 WHEN 'h' THEN 3600 ELSE 1 END FROM pg_settings WHERE name = 'idle_replication_slot_timeout')`;

/**
 * Polls the slot on an interval and exports what it finds. Runs on a normal connection, in
 * active and standby instances alike: the slot's lag matters most when nobody is reading it.
 * The connection is kept between polls and made again (to the primary of the moment) after
 * it failed. With several hosts in DATABASE_URL, the others are asked for their copy of the
 * slot (standby-copies.ts).
 */
export class SlotMonitor {
  private timer: NodeJS.Timeout | undefined;
  private client: pg.Client | null = null;
  /** Whether the last poll found the slot's server in recovery: a promotion is said once, when seen. */
  private lastOnStandby: boolean | null = null;
  /** The server's WAL position at the last poll, for the rate it writes (or replays) WAL at. */
  private lastWal: { readonly lsn: bigint; readonly atMs: number } | null = null;
  /** WAL bytes per second, smoothed over polls; null until two polls. */
  private walRate: number | null = null;
  /** The poll under way: one at a time (a slow server must not pile connections up). */
  private polling: Promise<void> | null = null;
  /** DATABASE_URL's primary, with the slot on a standby: what the standby has not replayed yet is measured against it. */
  private primary: pg.Client | null = null;
  private readonly replayDelays = new ReplayDelayTracker();

  /** `primary`: DATABASE_URL, where the standby's primary is (read only with the slot on a standby). */
  constructor(private readonly options: { slotServer: SlotServer; primary: DatabaseAccess; slot: string; intervalMs: number; metrics: RelayMetrics; logger: Logger }) {}

  start(): void {
    const poll = () => {
      this.polling ??= this.poll()
        .catch((error: unknown) => {
          this.options.logger.debug({ err: (error as Error).message }, 'slot poll failed');
          // Made again at the next poll, to whichever host is the primary then.
          void this.client?.end().catch(() => undefined);
          this.client = null;
        })
        .finally(() => (this.polling = null));
    };
    poll();
    this.timer = setInterval(poll, this.options.intervalMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.polling;
    await this.client?.end().catch(() => undefined);
    await this.primary?.end().catch(() => undefined);
  }

  /**
   * OUTBOX_REPLICA_URL's standby answering as a primary: it was promoted, and its own slot (a
   * standby's slot stays through a promotion) is read on from the same position, with nothing to
   * recover. Said once, loudly: DATABASE_URL, where prune and setup write, must name it too.
   */
  private notePromotion(onStandby: boolean): void {
    if (this.options.slotServer.standby && !onStandby && this.lastOnStandby !== false) {
      this.options.logger.warn({ slot: this.options.slot }, 'the standby of OUTBOX_REPLICA_URL is a primary now (promoted): the slot is read on there from the position it confirmed; DATABASE_URL must name it too for prune and setup');
    }
    this.lastOnStandby = onStandby;
  }

  /** A moving average over polls (a few minutes' worth at the default interval): one quiet or busy poll does not swing it. */
  private sampleWalRate(currentWalLsn: string): void {
    const now = { lsn: parseLsn(currentWalLsn), atMs: Date.now() };
    const last = this.lastWal;
    this.lastWal = now;
    if (!last || now.atMs <= last.atMs || now.lsn < last.lsn) return;
    const rate = Number(now.lsn - last.lsn) / ((now.atMs - last.atMs) / 1000);
    this.walRate = this.walRate === null ? rate : this.walRate + WAL_RATE_WEIGHT * (rate - this.walRate);
  }

  private async poll(): Promise<void> {
    const { metrics, slot } = this.options;
    const { database } = this.options.slotServer;
    if (!this.client) {
      const client = await connectPostgres(database, 'outbox-relay-monitor');
      client.on('error', () => undefined);
      this.client = client;
    }
    const report = await readSlot(this.client, slot);
    metrics.slotActive.set(report.active ? 1 : 0);
    metrics.slotOnStandby.set(report.onStandby ? 1 : 0);
    this.notePromotion(report.onStandby);
    if (report.lagBytes !== null) metrics.slotLagBytes.set(report.lagBytes);
    const walStatus = report.exists ? report.walStatus : 'missing';
    for (const status of WAL_STATUSES) metrics.slotWalStatus.set({ status }, walStatus === status ? 1 : 0);
    metrics.slotSafeWalSize.set(report.safeWalSizeBytes ?? -1);
    metrics.slotIdleTimeout.set(report.idleTimeoutSeconds ?? -1);
    this.sampleWalRate(report.currentWalLsn);
    metrics.walRate.set(this.walRate ?? 0);
    metrics.slotOutageBudget.set(slotOutageBudget(report, this.walRate) ?? -1);
    metrics.slotFailover.set(report.failover === null ? -1 : report.failover ? 1 : 0);
    // A standby's own slot (OUTBOX_REPLICA_URL) is no failover slot: no other server keeps a
    // copy of it, and it stays on that standby through its promotion. DATABASE_URL's hosts are
    // then the primary it replays (gone after the promotion), not copies to count.
    metrics.slotSyncedStandbys.set(this.options.slotServer.standby ? -1 : syncedStandbys(await readStandbyCopies(database, slot)));
    const delay = report.onStandby ? await this.readReplayDelay(this.client) : null;
    metrics.sourceReplayDelayBytes.set(delay ? delay.bytes : report.onStandby ? -1 : 0);
    metrics.sourceReplayDelaySeconds.set(delay ? delay.seconds : report.onStandby ? -1 : 0);
  }

  /** The standby's delay behind DATABASE_URL's primary; null when the primary cannot be read (a failover under way). */
  private async readReplayDelay(standby: pg.Client): Promise<ReplayDelay | null> {
    let primary: PrimaryReading;
    try {
      if (!this.primary) {
        const client = await connectPostgres(this.options.primary, 'outbox-relay-monitor');
        client.on('error', () => undefined);
        this.primary = client;
      }
      // The primary first: what the standby replays after it can only make the delay smaller.
      primary = await readPrimary(this.primary);
    } catch (error) {
      this.options.logger.debug({ err: (error as Error).message }, "the standby's primary could not be read for the replay delay");
      void this.primary?.end().catch(() => undefined);
      this.primary = null;
      this.replayDelays.reset();
      return null;
    }
    const reading = await readStandby(standby);
    return reading ? this.replayDelays.observe(primary, reading) : { bytes: 0, seconds: 0, paused: false };
  }
}

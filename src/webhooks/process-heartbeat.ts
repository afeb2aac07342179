import type pg from 'pg';
import type { Logger } from 'pino';
import { errorMessage } from '../errors.js';
import { sleep } from '../time.js';
import { MEMBER_TTL_MS, type EndpointShares, type MemberReport } from './endpoint-shares.js';
import type { WebhookTables } from './webhook-tables.js';

/** How often a webhooks process writes its heartbeat: a fifth of a member's life, so a few missed ones do not count it out. */
const HEARTBEAT_MS = 1_000;

/** Rows of processes gone this long are deleted (a few bytes each; kept a while for an operator's eye). */
const FORGET_AFTER_MS = 3_600_000;

/**
 * The membership the endpoint shares are cut by (see endpoint-shares.ts): this process's row in
 * `processes`, renewed every HEARTBEAT_MS with what it reports, and the other live members'
 * reports, read in the same statement. Times are Postgres's, one clock for every process.
 */
export class ProcessHeartbeat {
  constructor(
    private readonly pool: pg.Pool,
    private readonly tables: WebhookTables,
    private readonly owner: string,
    private readonly shares: EndpointShares,
    private readonly logger: Logger,
  ) {}

  /** One heartbeat: written, the others read, the shares told. */
  async beat(): Promise<void> {
    const { view, settled } = this.shares.report();
    const { rows } = await this.pool.query<{ owner: string | null; view: string; settled: boolean; previous_at: Date | null; now: Date }>(
      `WITH previous AS (SELECT heartbeat_at FROM ${this.tables.processes} WHERE owner = $1),
         written AS (
           INSERT INTO ${this.tables.processes} AS p (owner, heartbeat_at, view, settled) VALUES ($1, clock_timestamp(), $2, $3)
           ON CONFLICT (owner) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, view = excluded.view, settled = excluded.settled
           RETURNING heartbeat_at
         ),
         forgotten AS (DELETE FROM ${this.tables.processes} WHERE heartbeat_at < clock_timestamp() - make_interval(secs => $5 / 1000.0) AND owner <> $1)
       SELECT o.owner, o.view, o.settled, (SELECT heartbeat_at FROM previous) AS previous_at, (SELECT heartbeat_at FROM written) AS now
       FROM (SELECT 1) one LEFT JOIN ${this.tables.processes} o ON o.owner <> $1 AND o.heartbeat_at > clock_timestamp() - make_interval(secs => $4 / 1000.0)`,
      [this.owner, view, settled, MEMBER_TTL_MS, FORGET_AFTER_MS],
    );
    const others: MemberReport[] = rows.filter((row) => row.owner !== null).map((row) => ({ owner: row.owner!, view: row.view, settled: row.settled }));
    const before = this.shares.describe();
    this.shares.heard(others, rows[0]!.previous_at, rows[0]!.now);
    const after = this.shares.describe();
    if (after.members !== before.members || after.agreed !== before.agreed) {
      this.logger.info({ members: after.members, agreed: after.agreed }, after.agreed ? 'webhooks: process membership agreed: each endpoint\'s limit is shared over these processes' : 'webhooks: process membership changing: each process keeps to its smallest share until every member agrees');
    }
  }

  /** Beats until `signal` aborts; a failed beat is logged and tried again at the next (a process that misses MEMBER_TTL_MS of them takes no slot). */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await sleep(HEARTBEAT_MS, signal);
      if (signal.aborted) break;
      await this.beat().catch((error: unknown) => this.logger.warn({ err: errorMessage(error) }, 'webhooks: writing the process heartbeat failed; trying again'));
    }
  }

  /** Stopped cleanly: its row goes, and the others' shares grow at their next heartbeat rather than after MEMBER_TTL_MS. */
  async leave(): Promise<void> {
    await this.pool.query(`DELETE FROM ${this.tables.processes} WHERE owner = $1`, [this.owner]);
  }
}

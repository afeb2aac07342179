import type pg from 'pg';
import { RelayError } from '../errors.js';
import type { CustomerScope } from './endpoint-store.js';
import { troubledEndpoint, type WebhookTables } from './webhook-tables.js';

export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

export interface DeliveryRow {
  readonly id: string;
  readonly eventId: string;
  readonly eventType: string;
  readonly endpointId: string;
  /** The customer of its endpoint; null: a platform-wide endpoint's. */
  readonly customerId: string | null;
  readonly status: DeliveryStatus;
  readonly attempts: number;
  readonly failures: number;
  readonly nextAttemptAt: Date | null;
  readonly createdAt: Date;
  readonly finishedAt: Date | null;
  readonly lastError: string | null;
  readonly lastAttempt: AttemptRow | null;
}

export interface AttemptRow {
  readonly attempt: number;
  readonly startedAt: Date;
  readonly latencyMs: number;
  readonly statusCode: number | null;
  readonly outcome: string;
  readonly error: string | null;
  readonly response: string | null;
  readonly process: string;
}

export interface DeliveryFilter {
  /** To this customer's endpoints. */
  readonly customerId?: string;
  readonly endpointId?: string;
  readonly eventId?: string;
  readonly deliveryId?: string;
  readonly status?: DeliveryStatus;
  /** Recorded at or after. */
  readonly since?: Date;
  /** Recorded before. */
  readonly until?: Date;
  /** Only deliveries older than this one (the next page of a listing). */
  readonly beforeId?: string;
  readonly limit: number;
}

/** What `webhooks replay` sends again: one delivery, an event's deliveries, an endpoint's or a customer's since a time. */
export type ReplaySelection =
  | { readonly deliveryId: string }
  | { readonly eventId: string; readonly endpointId?: string }
  | { readonly endpointId: string; readonly since: Date }
  | { readonly customerId: string; readonly since: Date };

export interface StoreGauges {
  readonly pending: number;
  readonly failed: number;
  /** Events whose customer was not found, not yet replayed. */
  readonly withoutCustomer: number;
  /** Endpoints whose circuit is not closed: waiting out the cooldown, or probing. */
  readonly openCircuits: number;
  readonly disabledEndpoints: number;
  /** The endpoints with the oldest pending deliveries (at most `top`), age in seconds. */
  readonly oldestPending: readonly { readonly endpointId: string; readonly ageSeconds: number }[];
  readonly storeBytes: number;
}

/**
 * The delivery store as the operator and the API see it: listings, replay, pruning, the gauges.
 * Scoped to a customer, every listing, read and replay has the customer in its WHERE: another
 * customer's delivery is not found, exactly as a missing one.
 */
export class DeliveryQueries {
  constructor(
    private readonly pool: pg.Pool,
    private readonly tables: WebhookTables,
    private readonly scope: CustomerScope = null,
  ) {}

  /**
   * Newest first. Of one customer or one endpoint, it walks each of their endpoints' newest
   * deliveries (deliveries_endpoint_idx, or deliveries_failed_idx for status=failed, a LATERAL
   * per endpoint) and merges them: a customer's latest page costs its endpoints' index reads,
   * however many deliveries the store holds. With `scanCap`, a filter that skips rows (event,
   * times, status pending or delivered) examines at most that many per endpoint (per listing
   * without endpoints); `resumeBefore` is then where the next page continues, found or not.
   */
  async list(filter: DeliveryFilter): Promise<DeliveryRow[]> {
    return (await this.page(filter)).rows;
  }

  async page(filter: DeliveryFilter & { readonly scanCap?: number }): Promise<{ readonly rows: DeliveryRow[]; readonly resumeBefore: string | null }> {
    const customerId = this.customerOf(filter.customerId);
    const byEndpoint = customerId !== null || filter.endpointId !== undefined;
    const failed = filter.status === 'failed';
    const skipping = filter.eventId !== undefined || filter.since !== undefined || filter.until !== undefined || (filter.status !== undefined && !failed);
    const capped = skipping && filter.scanCap !== undefined;
    // The rows examined, newest first: every one a match without a skipping filter, so `limit` of them are enough.
    const conditions = `($1::text IS NULL OR d.event_id = $1) AND ($2::text IS NULL OR d.status = $2) AND ($3::timestamptz IS NULL OR d.created_at >= $3) AND ($4::timestamptz IS NULL OR d.created_at < $4)`;
    // Uncapped (the CLI), the filters stop the walk at `limit` matches, however far that is.
    const scan = (endpoint: string) =>
      `SELECT d.* FROM ${this.tables.deliveries} d WHERE ${endpoint} ${failed ? "d.status = 'failed' AND" : ''} ${capped ? '' : `${conditions} AND`} ($5::bigint IS NULL OR d.id < $5) AND ($6::bigint IS NULL OR d.id = $6)
       ORDER BY d.id DESC LIMIT ${capped ? '$10' : '$7'}`;
    const scanned = byEndpoint
      ? `SELECT d.*, e.customer_id, count(*) OVER w AS examined, min(d.id) OVER w AS lowest FROM ${this.tables.endpoints} e CROSS JOIN LATERAL (${scan('d.endpoint_id = e.id AND')}) d
         WHERE ($8::text IS NULL OR e.customer_id = $8) AND ($9::text IS NULL OR e.id = $9) WINDOW w AS (PARTITION BY e.id)`
      : `SELECT d.*, e.customer_id, count(*) OVER () AS examined, min(d.id) OVER () AS lowest FROM (${scan('')}) d JOIN ${this.tables.endpoints} e ON e.id = d.endpoint_id WHERE $8::text IS NULL AND $9::text IS NULL`;
    // Where an endpoint stopped at the cap, the rows below it are not known yet: the page ends there (its highest such stop).
    const { rows: found } = await this.pool.query(
      `WITH scanned AS MATERIALIZED (${scanned}),
         resume AS (SELECT max(lowest) AS before FROM scanned WHERE $11 AND examined >= $10)
       SELECT r.before::text AS resume_before, x.* FROM resume r LEFT JOIN LATERAL (
         SELECT d.id::text AS id, d.event_id, ev.event_type, d.endpoint_id, d.customer_id, d.status, d.attempts, d.failures,
           CASE WHEN d.status = 'pending' THEN d.next_attempt_at END AS next_attempt_at, d.created_at, d.finished_at, d.last_error, to_jsonb(a) AS last_attempt
         FROM (SELECT * FROM scanned d WHERE ${conditions} AND (r.before IS NULL OR d.id >= r.before) ORDER BY d.id DESC LIMIT $7) d
         JOIN ${this.tables.events} ev ON ev.event_id = d.event_id
         LEFT JOIN LATERAL (SELECT * FROM ${this.tables.allAttempts} a WHERE a.delivery_id = d.id ORDER BY a.attempt DESC LIMIT 1) a ON true
       ) x ON true
       ORDER BY x.id::bigint DESC`,
      [
        filter.eventId ?? null, filter.status ?? null, filter.since ?? null, filter.until ?? null, filter.beforeId ?? null,
        filter.deliveryId === undefined ? null : deliveryIdOf(filter.deliveryId), filter.limit, customerId, filter.endpointId ?? null,
        filter.scanCap ?? 0, capped,
      ],
    );
    const resumeBefore: string | null = found[0]?.resume_before ?? null;
    const rows = found.filter((row) => row.id !== null);
    return { resumeBefore, rows: rows.map((row) => ({
      id: row.id,
      eventId: row.event_id,
      eventType: row.event_type,
      endpointId: row.endpoint_id,
      customerId: row.customer_id,
      status: row.status,
      attempts: row.attempts,
      failures: row.failures,
      nextAttemptAt: row.next_attempt_at,
      createdAt: row.created_at,
      finishedAt: row.finished_at,
      lastError: row.last_error,
      lastAttempt: row.last_attempt === null ? null : attemptFrom({ ...row.last_attempt, started_at: new Date(row.last_attempt.started_at) }),
    })) };
  }

  /** The event types recorded, each with its first event's time (kept when their events are pruned). */
  async seenEventTypes(): Promise<{ readonly name: string; readonly firstSeenAt: Date }[]> {
    const { rows } = await this.pool.query<{ event_type: string; first_seen_at: Date }>(`SELECT event_type, first_seen_at FROM ${this.tables.eventTypes} ORDER BY event_type`);
    return rows.map((row) => ({ name: row.event_type, firstSeenAt: row.first_seen_at }));
  }

  async attempts(deliveryId: string): Promise<AttemptRow[]> {
    const { rows: found } = await this.pool.query(`SELECT 1 FROM ${this.tables.deliveries} d WHERE id = $1 AND ${this.scoped(2)}`, [deliveryIdOf(deliveryId), this.scope]);
    if (found.length === 0) throw new RelayError('WEBHOOK_NOT_FOUND', `no webhook delivery ${deliveryId}; \`outbox-relay webhooks deliveries list\` shows them`);
    const { rows } = await this.pool.query(`SELECT * FROM ${this.tables.allAttempts} WHERE delivery_id = $1 ORDER BY attempt`, [deliveryId]);
    return rows.map(attemptFrom);
  }

  /**
   * Makes the selected deliveries due now, with a fresh retry schedule: failed ones, and
   * delivered ones (the endpoint lost them; they go with the same webhook-id, so a receiver
   * that had them can tell). Pending ones are left as they are: they are on their way.
   */
  async replay(selection: ReplaySelection, now: Date): Promise<number> {
    if ('customerId' in selection) this.customerOf(selection.customerId);
    const where =
      'deliveryId' in selection
        ? { sql: 'd.id = $2', params: [deliveryIdOf(selection.deliveryId)] }
        : 'customerId' in selection
          ? { sql: `d.endpoint_id IN (SELECT id FROM ${this.tables.endpoints} WHERE customer_id = $2) AND d.created_at >= $3`, params: [selection.customerId, selection.since] }
          : 'since' in selection
            ? { sql: 'd.endpoint_id = $2 AND d.created_at >= $3', params: [selection.endpointId, selection.since] }
            : { sql: 'd.event_id = $2 AND ($3::text IS NULL OR d.endpoint_id = $3)', params: [selection.eventId, selection.endpointId ?? null] };
    const { rowCount } = await this.pool.query(
      `UPDATE ${this.tables.deliveries} d SET status = 'pending', failures = 0, next_attempt_at = $1, lease_owner = NULL, finished_at = NULL
       WHERE ${where.sql} AND d.status <> 'pending' AND ${this.scoped(where.params.length + 2)}`,
      [now, ...where.params, this.scope],
    );
    if (!rowCount) await this.requireExisting(selection);
    return rowCount ?? 0;
  }

  /** The customer a listing or replay is of: the scope's, whatever else is asked (another customer's is not found). */
  private customerOf(asked: string | undefined): string | null {
    if (this.scope !== null && asked !== undefined && asked !== this.scope) throw new RelayError('WEBHOOK_NOT_FOUND', `customer ${asked} has no webhook endpoint`);
    return this.scope ?? asked ?? null;
  }

  /** The scope's condition on a delivery `d`, its customer given as parameter $n (null: every delivery). */
  private scoped(n: number): string {
    return `($${n}::text IS NULL OR d.endpoint_id IN (SELECT id FROM ${this.tables.endpoints} WHERE customer_id = $${n}))`;
  }

  /** WEBHOOK_NOT_FOUND when a replay replayed nothing because what it names does not exist (a typo is not "0 due again"). */
  private async requireExisting(selection: ReplaySelection): Promise<void> {
    const ofScope = '($2::text IS NULL OR customer_id = $2)';
    const [what, sql, value]: [string, string, string] =
      'deliveryId' in selection
        ? [`no webhook delivery ${selection.deliveryId}`, `SELECT 1 FROM ${this.tables.deliveries} d WHERE id = $1 AND ${this.scoped(2)}`, deliveryIdOf(selection.deliveryId)]
        : 'customerId' in selection
          ? [`customer ${selection.customerId} has no webhook endpoint`, `SELECT 1 FROM ${this.tables.endpoints} WHERE customer_id = $1 AND ${ofScope}`, selection.customerId]
          : 'since' in selection || selection.endpointId !== undefined
            ? [`no webhook endpoint with id "${selection.endpointId}"`, `SELECT 1 FROM ${this.tables.endpoints} WHERE id = $1 AND ${ofScope}`, selection.endpointId!]
            : [`event ${selection.eventId} has no webhook delivery`, `SELECT 1 FROM ${this.tables.deliveries} d WHERE event_id = $1 AND ${this.scoped(2)}`, selection.eventId];
    const { rows } = await this.pool.query(sql, [value, this.scope]);
    if (rows.length === 0) throw new RelayError('WEBHOOK_NOT_FOUND', `${what}; \`outbox-relay webhooks deliveries list\` and \`webhooks endpoint list\` show what there is`);
  }

  /**
   * Deletes delivered deliveries finished before `before` (their attempts with them), then the
   * events no delivery refers to any more; in batches, so no transaction holds many locks.
   */
  async prune(before: Date, batchSize = 5_000): Promise<{ readonly deliveries: number; readonly events: number }> {
    let deliveries = 0;
    for (;;) {
      const { rowCount } = await this.pool.query(
        `DELETE FROM ${this.tables.deliveries} WHERE id IN (
           SELECT id FROM ${this.tables.deliveries} WHERE status = 'delivered' AND finished_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
        [before, batchSize],
      );
      deliveries += rowCount ?? 0;
      if ((rowCount ?? 0) < batchSize) break;
    }
    let events = 0;
    for (;;) {
      const { rowCount } = await this.pool.query(
        `DELETE FROM ${this.tables.events} WHERE event_id IN (
           SELECT ev.event_id FROM ${this.tables.events} ev WHERE ev.recorded_at < $1
             AND NOT EXISTS (SELECT 1 FROM ${this.tables.deliveries} d WHERE d.event_id = ev.event_id)
           LIMIT $2 FOR UPDATE SKIP LOCKED)`,
        [before, batchSize],
      );
      events += rowCount ?? 0;
      if ((rowCount ?? 0) < batchSize) break;
    }
    return { deliveries, events };
  }

  async gauges(now: Date, circuitFailures: number, top = 50): Promise<StoreGauges> {
    const { rows } = await this.pool.query(
      `SELECT
         (SELECT count(*) FROM ${this.tables.deliveries} WHERE status = 'pending')::float8 AS pending,
         (SELECT count(*) FROM ${this.tables.deliveries} WHERE status = 'failed')::float8 AS failed,
         (SELECT count(*) FROM ${this.tables.eventsWithoutCustomer})::float8 AS without_customer,
         (SELECT count(*) FROM ${this.tables.endpoints} e WHERE ${troubledEndpoint('e')} AND e.disabled_at IS NULL AND e.consecutive_failures >= $1)::float8 AS open_circuits,
         (SELECT count(*) FROM ${this.tables.endpoints} WHERE disabled_at IS NOT NULL)::float8 AS disabled,
         (SELECT coalesce(sum(pg_total_relation_size(t)), 0) FROM unnest($2::regclass[]) AS t)::float8 AS store_bytes`,
      [circuitFailures, [this.tables.events, this.tables.eventsWithoutCustomer, this.tables.deliveries, this.tables.attempts]],
    );
    const { rows: oldest } = await this.pool.query(
      // Held deliveries of a disabled endpoint are not a backlog anyone is working on: the disabled
      // gauge shows them. Told apart through the disabled endpoints' index, not a read of every endpoint.
      `SELECT d.endpoint_id, extract(epoch FROM $1::timestamptz - min(d.created_at))::float8 AS age FROM ${this.tables.deliveries} d
       WHERE d.status = 'pending' AND NOT EXISTS (SELECT 1 FROM ${this.tables.endpoints} e WHERE e.id = d.endpoint_id AND e.disabled_at IS NOT NULL)
       GROUP BY d.endpoint_id ORDER BY min(d.created_at) LIMIT $2`,
      [now, top],
    );
    const row = rows[0];
    return {
      pending: row.pending,
      failed: row.failed,
      withoutCustomer: row.without_customer,
      openCircuits: row.open_circuits,
      disabledEndpoints: row.disabled,
      storeBytes: row.store_bytes,
      oldestPending: oldest.map((o) => ({ endpointId: o.endpoint_id, ageSeconds: Math.max(0, o.age) })),
    };
  }
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a row of all_attempts, typed here once
function attemptFrom(row: any): AttemptRow {
  return {
    attempt: row.attempt,
    startedAt: row.started_at,
    latencyMs: row.latency_ms,
    statusCode: row.status_code,
    outcome: row.outcome,
    error: row.error,
    response: row.response,
    process: row.process,
  };
}

/** A delivery id as the store keys it; text that is no id matches no delivery (rather than failing the query). */
function deliveryIdOf(id: string): string {
  return /^[0-9]{1,18}$/.test(id) ? id : '-1';
}

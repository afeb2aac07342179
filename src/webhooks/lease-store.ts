import type pg from 'pg';
import { inTransaction } from '../pg-transaction.js';
import type { EndpointRules } from './endpoint-health-store.js';
import type { EndpointLimit, EndpointSlots } from './endpoint-shares.js';
import { signingSecretsOf, type EndpointAddress, type LoadedEndpoints } from './endpoint-store.js';
import type { ClaimedDelivery, HeldBack } from './lifecycle.js';
import { prepared } from './prepared.js';
import { troubledEndpoint, type WebhookTables } from './webhook-tables.js';

/** An endpoint's slots taken for first attempts sent before their deliveries are recorded (takeSlots), and what a request to it needs. */
export interface GrantedSlots extends EndpointAddress {
  readonly slots: number;
}

/**
 * Leases: which process may send which delivery, and until when. Two ways take one, each in
 * one statement that reads the endpoint's state in the store (disabled, paused, a backlog not
 * overtaken) and takes its slots from the process's share of the endpoint's limit
 * (EndpointSlots): a claim of due deliveries, and the slots of first attempts sent before their
 * deliveries are recorded (written leased or with their results by the result writer). A lease
 * the endpoint gate did not let go is given back.
 */
export class LeaseStore {
  /** The last endpoint this process claimed for: the next claim starts after it (round robin). */
  private claimCursor = '';

  constructor(
    private readonly pool: pg.Pool,
    private readonly tables: WebhookTables,
  ) {}

  /**
   * In-flight slots for first attempts sent before their deliveries are recorded (the result
   * writer writes each once, with its result: ResultStore.write). Of each endpoint `wanted`
   * names, as many of this process's free share of its limit as wanted (EndpointSlots), if it
   * is unordered and unthrottled (as `known`, the endpoints the process loaded, has it), healthy
   * and has nothing older due (a new delivery does not overtake a backlog). One read, no write:
   * the slots are counted in the process. The read touches no endpoint that is in good health
   * (the partial indexes of those that are not), so its cost does not grow with the endpoints a
   * chunk touches beyond one due-index probe each. None when an endpoint changed since `known`
   * was loaded: those deliveries are recorded due, and a claim reads the endpoints as they are.
   */
  async takeSlots(wanted: ReadonlyMap<string, number>, now: Date, slots: EndpointSlots, known: LoadedEndpoints): Promise<Map<string, GrantedSlots>> {
    const candidates = [...wanted.keys()].filter((endpointId) => known.get(endpointId)?.sendsFirst);
    if (candidates.length === 0) return new Map();
    const { rows } = await this.pool.query<{ version: string; open: string[] }>(
      prepared(`SELECT (SELECT version::text FROM ${this.tables.subscriptionsVersion}) AS version, ARRAY(
         SELECT w.id FROM unnest($1::text[]) AS w (id)
         WHERE NOT EXISTS (SELECT 1 FROM ${this.tables.endpoints} t WHERE t.id = w.id AND ${troubledEndpoint('t')} AND (t.consecutive_failures <> 0 OR t.paused_until > $2))
           AND NOT EXISTS (SELECT 1 FROM ${this.tables.endpoints} t WHERE t.id = w.id AND t.disabled_at IS NOT NULL)
           AND ${this.dueProbe('w', '$2')} IS NULL
       ) AS open`,
      [candidates, now]),
    );
    const granted = new Map<string, GrantedSlots>();
    if (rows[0]!.version !== known.version) return granted;
    for (const endpointId of rows[0]!.open) {
      const endpoint = known.get(endpointId)!;
      const n = slots.take({ endpointId, maxInFlight: endpoint.maxInFlight, halfOpen: false }, wanted.get(endpointId)!);
      if (n > 0) granted.set(endpointId, { slots: n, url: endpoint.url, secrets: endpoint.secrets, headers: endpoint.headers });
    }
    return granted;
  }

  /**
   * Whether anything may be sent to `endpoint` (an alias of the endpoints table) at `now`: not
   * disabled, and not paused (its circuit open, or a Retry-After it asked for). Every way a
   * delivery is leased (a claim, slots for first attempts) reads this.
   */
  private sendable(endpoint: string, now: string): string {
    return `${endpoint}.disabled_at IS NULL AND (${endpoint}.paused_until IS NULL OR ${endpoint}.paused_until <= ${now})`;
  }

  /**
   * True (else null) when `endpoint` has a delivery due at `now`: a claim takes endpoints that
   * have one, and a new delivery does not overtake it. A scalar subquery, not EXISTS: one
   * partial-index probe per endpoint (EXISTS became a join that read every due delivery).
   */
  private dueProbe(endpoint: string, now: string): string {
    return `(SELECT true FROM ${this.tables.deliveries} d WHERE d.endpoint_id = ${endpoint}.id AND d.status = 'pending' AND d.next_attempt_at <= ${now} LIMIT 1)`;
  }

  /**
   * Up to `limit` due deliveries, leased to `owner` until now + leaseMs. Two statements in one
   * transaction: first the endpoints are locked, round robin from the last one this process
   * claimed for (every endpoint with due deliveries gets its turn, a claim reads only endpoints
   * with deliveries waiting, and no fairness bookkeeping is written; SKIP LOCKED: another
   * process claiming for an endpoint is passed over, not waited for), then
   * — in a snapshot taken after the locks, so every earlier claim for those endpoints is seen —
   * each endpoint gets no more than the free slots of this process's share of its limit
   * (EndpointSlots; one over every process while its circuit is half-open), its rate limit's
   * remainder, and, when ordered, only the oldest pending delivery of each aggregate.
   */
  async claim(owner: string, now: Date, limit: number, leaseMs: number, rules: EndpointRules, slots: EndpointSlots, endpointsPerClaim = 200): Promise<ClaimedDelivery[]> {
    /** The slots taken per endpoint for this claim: what it did not lease (all, if it failed) is given back. */
    const taken = new Map<string, number>();
    let claimed: ClaimedDelivery[] = [];
    try {
      claimed = await this.claimIn(owner, now, limit, leaseMs, rules, slots, endpointsPerClaim, taken);
      return claimed;
    } finally {
      for (const delivery of claimed) taken.set(delivery.endpointId, taken.get(delivery.endpointId)! - 1);
      for (const [endpointId, unused] of taken) slots.release(endpointId, unused);
    }
  }

  private claimIn(owner: string, now: Date, limit: number, leaseMs: number, rules: EndpointRules, slots: EndpointSlots, endpointsPerClaim: number, taken: Map<string, number>): Promise<ClaimedDelivery[]> {
    return inTransaction(this.pool, async (client) => {
      /**
       * Locks up to `want` endpoints that may be sent to and have a delivery due, in id order:
       * those after the cursor, or (`throughCursor`) those from the first up to it. The walk is
       * over the endpoints that have pending deliveries, one partial-index descent each to the
       * next (a skip scan of deliveries_due_idx), not over every endpoint: a claim runs every
       * poll, and most of a platform's endpoints have nothing waiting most of the time (a walk
       * over every endpoint cost ~180 ms of Postgres CPU a claim with 100,000 of them). No ORDER
       * BY: the walk yields ids in order, and a sort would read all of it before the LIMIT. The
       * due probe is a scalar subquery, not EXISTS, which the planner would turn into a join
       * reading every due delivery. FOR NO KEY UPDATE: one claim at a time per endpoint, the
       * weakest lock that does it.
       */
      const lock = async (throughCursor: boolean, want: number): Promise<EndpointLimit[]> => {
        const { rows } = await client.query<{ id: string; max_in_flight: number; half_open: boolean }>(
          `WITH RECURSIVE owed (id) AS (
             (SELECT d.endpoint_id FROM ${this.tables.deliveries} d WHERE d.status = 'pending' ${throughCursor ? '' : 'AND d.endpoint_id > $3'} ORDER BY d.endpoint_id LIMIT 1)
             UNION ALL
             SELECT (SELECT d.endpoint_id FROM ${this.tables.deliveries} d WHERE d.status = 'pending' AND d.endpoint_id > owed.id ORDER BY d.endpoint_id LIMIT 1)
             FROM owed WHERE owed.id IS NOT NULL ${throughCursor ? 'AND owed.id < $3' : ''}
           )
           SELECT e.id, e.max_in_flight, e.consecutive_failures >= $4 AS half_open
           FROM owed JOIN ${this.tables.endpoints} e ON e.id = owed.id
           WHERE ${throughCursor ? 'e.id <= $3 AND ' : ''}${this.sendable('e', '$1')}
             AND ${this.dueProbe('e', '$1')}
           LIMIT $2
           FOR NO KEY UPDATE OF e SKIP LOCKED`,
          [now, want, this.claimCursor, rules.circuitFailures],
        );
        return rows.map((row) => ({ endpointId: row.id, maxInFlight: row.max_in_flight, halfOpen: row.half_open }));
      };
      const after = await lock(false, endpointsPerClaim);
      const wrapped = after.length < endpointsPerClaim && this.claimCursor !== '' ? await lock(true, endpointsPerClaim - after.length) : [];
      const locked = [...after, ...wrapped];
      if (locked.length === 0) return [];
      this.claimCursor = (wrapped.length > 0 ? wrapped : after).at(-1)!.endpointId;
      // This process's free share of each endpoint, held now (nothing else takes it meanwhile);
      // what the claim does not lease is given back (claim).
      const capacity = locked.map((endpoint) => slots.take(endpoint, limit));
      locked.forEach((endpoint, i) => taken.set(endpoint.endpointId, capacity[i]!));
      const ids = locked.map((endpoint) => endpoint.endpointId);
      const { rows } = await client.query(
        `WITH ep AS (
           SELECT e.id, e.ordered, LEAST(c.capacity,
             CASE WHEN e.rate_limit IS NULL THEN $3
                  WHEN e.rate_window = date_trunc('second', $2::timestamptz) THEN e.rate_limit - e.rate_window_count
                  ELSE e.rate_limit END
           ) AS capacity
           FROM unnest($1::text[], $5::int[]) AS c(id, capacity) JOIN ${this.tables.endpoints} e ON e.id = c.id
         ), picked AS (
           SELECT d.id FROM ep CROSS JOIN LATERAL (
             SELECT d.id FROM ${this.tables.deliveries} d
             WHERE d.endpoint_id = ep.id AND d.status = 'pending' AND d.next_attempt_at <= $2
               AND (NOT ep.ordered OR d.ordering_key IS NULL OR NOT EXISTS (
                 SELECT 1 FROM ${this.tables.deliveries} p WHERE p.endpoint_id = d.endpoint_id AND p.ordering_key = d.ordering_key AND p.status = 'pending' AND p.id < d.id))
             ORDER BY d.next_attempt_at, d.id
             LIMIT GREATEST(ep.capacity, 0)
           ) d
           LIMIT $3
         ), claimed AS (
           UPDATE ${this.tables.deliveries} d SET next_attempt_at = $2::timestamptz + make_interval(secs => $6 / 1000.0), lease_owner = $4, attempts = d.attempts + 1
           FROM picked WHERE d.id = picked.id
           RETURNING d.id, d.event_id, d.endpoint_id, d.attempts, d.failures
         ), counted AS (
           UPDATE ${this.tables.endpoints} e SET
             rate_window = date_trunc('second', $2::timestamptz),
             rate_window_count = (CASE WHEN e.rate_window = date_trunc('second', $2::timestamptz) THEN e.rate_window_count ELSE 0 END)
               + (SELECT count(*) FROM claimed c WHERE c.endpoint_id = e.id)
           WHERE e.id = ANY($1) AND e.rate_limit IS NOT NULL
         )
         SELECT c.id::text AS id, c.event_id, c.endpoint_id, c.attempts, c.failures, ev.body, ev.event_type, ev.produced_at, e.url, e.secrets, e.headers
         FROM claimed c JOIN ${this.tables.events} ev ON ev.event_id = c.event_id JOIN ${this.tables.endpoints} e ON e.id = c.endpoint_id`,
        [ids, now, limit, owner, capacity, leaseMs],
      );
      return rows.map((row) => ({
        id: row.id,
        eventId: row.event_id,
        eventType: row.event_type,
        endpointId: row.endpoint_id,
        attempt: row.attempts,
        failures: row.failures,
        body: row.body,
        producedAt: row.produced_at,
        url: row.url,
        secrets: signingSecretsOf(row.secrets),
        headers: row.headers,
      }));
    });
  }

  /**
   * Deliveries leased to `owner` that the endpoint gate did not let go: due again at their
   * `dueAt`, the lease given back and the claim's attempt not counted (it was never started).
   * A lease that ran out meanwhile (another process has it) is left alone.
   */
  async giveBack(client: pg.ClientBase, owner: string, heldBack: readonly HeldBack[]): Promise<void> {
    if (heldBack.length === 0) return;
    await client.query(
      prepared(`UPDATE ${this.tables.deliveries} d SET next_attempt_at = u.due, lease_owner = NULL, attempts = d.attempts - 1
       FROM unnest($2::bigint[], $3::int[], $4::timestamptz[]) AS u(id, attempt, due)
       WHERE d.id = u.id AND d.status = 'pending' AND d.lease_owner = $1 AND d.attempts = u.attempt`,
      [owner, heldBack.map((h) => h.delivery.id), heldBack.map((h) => h.delivery.attempt), heldBack.map((h) => h.dueAt)]),
    );
  }
}

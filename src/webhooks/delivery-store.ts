import { createHash } from 'node:crypto';
import type pg from 'pg';
import { inTransaction } from '../pg-transaction.js';
import type { Closing } from './endpoint-gate.js';
import type { EndpointLimit, EndpointSlots } from './endpoint-shares.js';
import { signingSecretsOf, type EndpointAddress, type LoadedEndpoints, type SigningSecret } from './endpoint-store.js';
import type { AttemptResult } from './http-sender.js';
import type { Verdict } from './retry-policy.js';
import { troubledEndpoint, type WebhookTables } from './webhook-tables.js';

/** One consumed event and the endpoints it is owed to. */
export interface EventToDeliver {
  readonly eventId: string;
  readonly eventType: string;
  readonly aggregateId: string | null;
  readonly body: string;
  readonly producedAt: Date;
  readonly endpointIds: readonly string[];
}

/** A delivery handed to this process: its lease runs until it is completed or the lease ends. */
export interface ClaimedDelivery {
  readonly id: string;
  readonly eventId: string;
  readonly eventType: string;
  readonly endpointId: string;
  /** The number of this attempt (1 for the first); an attempt a crash interrupted leaves a gap. */
  readonly attempt: number;
  readonly failures: number;
  readonly body: string;
  readonly producedAt: Date;
  readonly url: string;
  readonly secrets: readonly SigningSecret[];
  readonly headers: Readonly<Record<string, string>>;
}

export interface Completion {
  readonly delivery: ClaimedDelivery;
  readonly startedAt: Date;
  readonly result: AttemptResult;
  readonly verdict: Verdict;
}

/** A delivery the endpoint gate did not let go (endpoint-gate.ts): due again at `dueAt`, its lease given back, no attempt counted. */
export interface HeldBack {
  readonly delivery: ClaimedDelivery;
  readonly dueAt: Date;
}

/** An endpoint's slots taken for first attempts sent before their deliveries are recorded (takeSlots), and what a request to it needs. */
export interface GrantedSlots extends EndpointAddress {
  readonly slots: number;
}

/** What recordFirstAttempts writes. */
export interface FirstAttemptsToRecord {
  readonly owner: string;
  readonly now: Date;
  /** For the attempts still in flight: leased for this long from `now`. */
  readonly leaseMs: number;
  /** Every event the attempts and `due` belong to: their bodies are stored once each. */
  readonly events: readonly EventToDeliver[];
  /** First attempts that ended, with their verdicts. */
  readonly ended: readonly Completion[];
  /** First attempts still in flight. */
  readonly inFlight: readonly ClaimedDelivery[];
  /** Deliveries that got no slot: recorded due, as record() records them. */
  readonly due: readonly EventToDeliver[];
  /** First attempts the endpoint gate held back (not sent): recorded due at the gate's reopening, no attempt counted. */
  readonly heldBack: readonly HeldBack[];
  readonly firstAttemptAt: () => Date;
}

/** How endpoints react to failures: the same numbers in every process. */
export interface EndpointRules {
  readonly circuitFailures: number;
  readonly circuitCooldownMs: number;
  readonly disableAfterMs: number;
}

export interface EndpointChange {
  readonly endpointId: string;
  /** Set when this completion disabled the endpoint (410, or failing longer than the bound). */
  readonly disabledReason: string | null;
  /** This completion opened the endpoint's circuit (its failures reached the threshold). */
  readonly circuitOpened: boolean;
}

/**
 * The hot path of the delivery store: record deliveries (the consumer, before it commits its
 * offsets), hand due ones to exactly one process, complete them. Every statement takes `now`
 * from the caller's clock, so tests drive the schedule.
 */
export class DeliveryStore {
  /** The last endpoint this process claimed for: the next claim starts after it (round robin). */
  private claimCursor = '';

  constructor(
    private readonly pool: pg.Pool,
    private readonly tables: WebhookTables,
  ) {}

  /**
   * In the caller's transaction: the events' bodies once each, a delivery per (event,
   * endpoint), due at firstAttemptAt(), for the dispatchers' claims. A re-consumed event
   * conflicts on both and adds nothing. Returns how many deliveries were added.
   */
  async record(client: pg.ClientBase, events: readonly EventToDeliver[], firstAttemptAt: () => Date): Promise<number> {
    const owed = events.filter((event) => event.endpointIds.length > 0);
    if (owed.length === 0) return 0;
    await this.storeEvents(client, owed);
    return this.insertDue(client, owed, firstAttemptAt);
  }

  /**
   * Deliveries due at firstAttemptAt(), their events stored already. In consumption order
   * (WITH ORDINALITY ... ORDER BY): ids are assigned in it, which ordered endpoints send by;
   * only an ordered endpoint's deliveries carry the aggregate (the others write no entry in the
   * ordering index). A re-consumed event conflicts and adds nothing.
   */
  private async insertDue(client: pg.ClientBase, owed: readonly EventToDeliver[], firstAttemptAt: () => Date): Promise<number> {
    const rows = { eventIds: [] as string[], endpointIds: [] as string[], orderingKeys: [] as (string | null)[], dueAt: [] as Date[] };
    for (const event of owed) {
      for (const endpointId of event.endpointIds) {
        rows.eventIds.push(event.eventId);
        rows.endpointIds.push(endpointId);
        rows.orderingKeys.push(event.aggregateId);
        rows.dueAt.push(firstAttemptAt());
      }
    }
    const { rowCount } = await client.query(
      prepared(`INSERT INTO ${this.tables.deliveries} (event_id, endpoint_id, ordering_key, next_attempt_at)
         SELECT u.event_id, u.endpoint_id, CASE WHEN e.ordered THEN u.ordering_key END, u.due
         FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[]) WITH ORDINALITY AS u(event_id, endpoint_id, ordering_key, due, n)
         JOIN ${this.tables.endpoints} e ON e.id = u.endpoint_id
         ORDER BY u.n
         ON CONFLICT (event_id, endpoint_id) DO NOTHING`,
      [rows.eventIds, rows.endpointIds, rows.orderingKeys, rows.dueAt]),
    );
    return rowCount ?? 0;
  }

  /** First attempts the gate held back, their events stored already: due at the gate's reopening, never attempted. */
  private async insertHeldBack(client: pg.ClientBase, heldBack: readonly HeldBack[]): Promise<number> {
    if (heldBack.length === 0) return 0;
    const { rowCount } = await client.query(
      prepared(`INSERT INTO ${this.tables.deliveries} (event_id, endpoint_id, ordering_key, next_attempt_at)
         SELECT u.event_id, u.endpoint_id, NULL, u.due
         FROM unnest($1::text[], $2::text[], $3::timestamptz[]) WITH ORDINALITY AS u(event_id, endpoint_id, due, n)
         JOIN ${this.tables.endpoints} e ON e.id = u.endpoint_id
         ORDER BY u.n
         ON CONFLICT (event_id, endpoint_id) DO NOTHING`,
      [heldBack.map((h) => h.delivery.eventId), heldBack.map((h) => h.delivery.endpointId), heldBack.map((h) => h.dueAt)]),
    );
    return rowCount ?? 0;
  }

  /**
   * The events' bodies, once each. A re-consumed event's row is kept (its body is what a retry
   * signs again) and locked, with its recorded_at moved on: the deliveries have no foreign key
   * to it, so this lock is what keeps the pruner, which deletes old events no delivery refers to
   * yet, from deleting it before this transaction's deliveries are committed. (DO UPDATE
   * touches a row once per statement: an event twice in a chunk, which Kafka's at-least-once
   * can bring, goes in once.) First in every recording, it takes the lock that removing an
   * endpoint waits for (sql/004_webhooks.sql, lock_out_recordings): the deliveries' inserts,
   * later statements, find only endpoints not removed, and a removal deletes what they wrote.
   * A type not recorded before is added to the event types (in name order, so that two
   * recordings bringing the same new types cannot wait on each other in a circle); a known one
   * costs a look-up and writes nothing.
   */
  private async storeEvents(client: pg.ClientBase, owed: readonly EventToDeliver[]): Promise<void> {
    const events = [...new Map(owed.map((event) => [event.eventId, event])).values()];
    await client.query(
      prepared(`WITH recording AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared(hashtext($6))),
         types AS (
           INSERT INTO ${this.tables.eventTypes} (event_type, first_seen_at)
           SELECT t.event_type, min(t.produced_at) FROM unnest($2::text[], $5::timestamptz[]) AS t (event_type, produced_at) GROUP BY t.event_type ORDER BY t.event_type
           ON CONFLICT (event_type) DO NOTHING)
         INSERT INTO ${this.tables.events} AS ev (event_id, event_type, aggregate_id, body, produced_at)
         SELECT u.* FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[]) AS u CROSS JOIN recording
         ON CONFLICT (event_id) DO UPDATE SET recorded_at = GREATEST(ev.recorded_at, excluded.recorded_at)`,
      [events.map((e) => e.eventId), events.map((e) => e.eventType), events.map((e) => e.aggregateId), events.map((e) => e.body), events.map((e) => e.producedAt), this.tables.endpointsRemovedLock]),
    );
  }

  /** Events whose customer was not found (see WebhookIntake.recordWithoutCustomer); one read again adds nothing. */
  async recordWithoutCustomer(events: readonly EventWithoutCustomer[]): Promise<void> {
    await this.pool.query(
      prepared(`INSERT INTO ${this.tables.eventsWithoutCustomer} (event_id, event_type, aggregate_id, body, headers, produced_at, reason)
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::jsonb[], $6::timestamptz[], $7::text[])
         ON CONFLICT (event_id) DO NOTHING`,
      [events.map((e) => e.eventId), events.map((e) => e.eventType), events.map((e) => e.aggregateId), events.map((e) => e.body), events.map((e) => JSON.stringify(e.headers)), events.map((e) => e.producedAt), events.map((e) => e.reason)]),
    );
  }

  /**
   * In-flight slots for first attempts sent before their deliveries are recorded (the intake
   * records them once, with their results: recordFirstAttempts). Of each endpoint `wanted`
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
           AND (SELECT true FROM ${this.tables.deliveries} d WHERE d.endpoint_id = w.id AND d.status = 'pending' AND d.next_attempt_at <= $2 LIMIT 1) IS NULL
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
   * One transaction for first attempts sent before their deliveries were recorded (takeSlots),
   * and the rest of their events' deliveries: the events' bodies, what the attempts did to their
   * endpoints, each attempted delivery written once — with its verdict and its attempt when the
   * attempt ended, or leased to `owner` with attempt 1 when it is still in
   * flight (its completion writes it, as a claimed one's does) — and the deliveries that got no
   * slot recorded due, as record() records them. Returns the ids of those still in flight.
   */
  async recordFirstAttempts(input: FirstAttemptsToRecord, rules: EndpointRules): Promise<{ readonly inFlight: ReadonlyMap<ClaimedDelivery, string>; readonly changes: readonly EndpointChange[]; readonly added: number }> {
    const { owner, now, leaseMs, ended, inFlight } = input;
    return inTransaction(this.pool, async (client) => {
      await this.storeEvents(client, input.events);
      const changes = ended.length > 0 ? await this.applyEndpointEffects(client, now, ended, rules) : [];
      const attempted = [...ended.map((completion) => ({ delivery: completion.delivery, completion })), ...inFlight.map((delivery) => ({ delivery, completion: null }))];
      const leaseEnd = new Date(now.getTime() + leaseMs);
      const { rows } = await this.writeFirstAttempts(client, owner, now, leaseEnd, attempted);
      // Their events were stored with the others above: only the deliveries are left to insert.
      const due = await this.insertDue(client, input.due.filter((event) => event.endpointIds.length > 0), input.firstAttemptAt);
      const heldBack = await this.insertHeldBack(client, input.heldBack);
      const ids = new Map(rows.map((row) => [`${row.event_id}\n${row.endpoint_id}`, row.id]));
      const recorded = new Map<ClaimedDelivery, string>();
      for (const delivery of inFlight) {
        const id = ids.get(`${delivery.eventId}\n${delivery.endpointId}`);
        if (id !== undefined) recorded.set(delivery, id);
      }
      return { inFlight: recorded, changes, added: ended.length + recorded.size + due + heldBack };
    });
  }

  /**
   * First attempts' deliveries, each written once: ended ones with their verdict, their attempt
   * in the row (first_*: no row of attempts); those in flight leased to
   * `owner` until `leaseEnd`, attempt 1 started (their completion writes it to attempts).
   * Returns the ids of the ones in flight.
   */
  private async writeFirstAttempts(client: pg.ClientBase, owner: string, now: Date, leaseEnd: Date, attempted: readonly { readonly delivery: ClaimedDelivery; readonly completion: Completion | null }[]): Promise<{ readonly rows: readonly { id: string; event_id: string; endpoint_id: string }[] }> {
    if (attempted.length === 0) return { rows: [] };
    return client.query<{ id: string; event_id: string; endpoint_id: string }>(
      prepared(`WITH u AS (
         SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::int[], $6::timestamptz[], $7::bool[], $8::text[], $9::timestamptz[], $10::int[], $11::int[], $12::text[], $13::text[])
           WITH ORDINALITY AS u(event_id, endpoint_id, status, failures, next_at, in_flight, error, started_at, latency_ms, status_code, outcome, response, n)
       ), inserted AS (
         INSERT INTO ${this.tables.deliveries} (event_id, endpoint_id, status, attempts, failures, next_attempt_at, lease_owner, finished_at, last_error,
                                                first_started_at, first_latency_ms, first_status_code, first_outcome, first_error, first_response, first_process)
         SELECT u.event_id, u.endpoint_id, u.status, 1, u.failures, u.next_at, CASE WHEN u.in_flight THEN $1 END, CASE WHEN u.status = 'pending' THEN NULL ELSE $14::timestamptz END, u.error,
                u.started_at, u.latency_ms, u.status_code, u.outcome, u.error, u.response, CASE WHEN NOT u.in_flight THEN $1 END
         FROM u JOIN ${this.tables.endpoints} e ON e.id = u.endpoint_id ORDER BY u.n
         ON CONFLICT (event_id, endpoint_id) DO NOTHING
         RETURNING id, event_id, endpoint_id, lease_owner
       )
       SELECT id::text AS id, event_id, endpoint_id FROM inserted WHERE lease_owner IS NOT NULL`,
      [
        owner,
        attempted.map(({ delivery }) => delivery.eventId),
        attempted.map(({ delivery }) => delivery.endpointId),
        attempted.map(({ completion }) => completion?.verdict.delivery.status ?? 'pending'),
        attempted.map(({ completion }) => (completion && completion.verdict.delivery.status !== 'delivered' ? completion.verdict.delivery.failures : 0)),
        attempted.map(({ completion }) => (completion ? (completion.verdict.delivery.status === 'pending' ? completion.verdict.delivery.nextAttemptAt : now) : leaseEnd)),
        attempted.map(({ completion }) => completion === null),
        attempted.map(({ completion }) => completion?.result.error ?? null),
        attempted.map(({ completion }) => completion?.startedAt ?? null),
        attempted.map(({ completion }) => (completion ? Math.round(completion.result.latencyMs) : null)),
        attempted.map(({ completion }) => completion?.result.statusCode ?? null),
        attempted.map(({ completion }) => completion?.result.outcome ?? null),
        // Postgres text holds no NUL: a binary answer keeps its other characters.
        attempted.map(({ completion }) => completion?.result.response?.replaceAll('\0', '') ?? null),
        now,
      ]),
    );
  }

  /**
   * Whether anything may be sent to `endpoint` (an alias of the endpoints table) at `now`: not
   * disabled, and not paused (its circuit open, or a Retry-After it asked for). Every way a
   * delivery is leased (a claim, a recording leased, slots for first attempts) reads this.
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
   * What closed an endpoint's gate in this process (endpoint-gate.ts), written at once, on its
   * own: the pause it asked for, or its disabling on a 410. The other processes' next leases of
   * it read this. The completions' batch writes the same again with the attempt (nothing
   * changes then). The change, when this disabled the endpoint.
   */
  async closeEndpoint(closing: Closing, now: Date): Promise<EndpointChange | null> {
    const { rows } = await this.pool.query<{ disabled_now: boolean; disabled_reason: string | null }>(
      prepared(`UPDATE ${this.tables.endpoints} e SET
         paused_until = CASE WHEN $2::timestamptz IS NULL THEN e.paused_until ELSE GREATEST(COALESCE(e.paused_until, $2), $2) END,
         disabled_at = COALESCE(e.disabled_at, CASE WHEN $3::text IS NOT NULL THEN $4::timestamptz END),
         disabled_reason = CASE WHEN e.disabled_at IS NULL AND $3::text IS NOT NULL THEN $3 ELSE e.disabled_reason END,
         updated_at = CASE WHEN e.disabled_at IS NULL AND $3::text IS NOT NULL THEN $4 ELSE e.updated_at END
       WHERE e.id = $1
       RETURNING (e.disabled_at = $4 AND e.updated_at = $4) AS disabled_now, e.disabled_reason`,
      [closing.endpointId, closing.pauseUntil, closing.gone, now]),
    );
    const row = rows[0];
    return row?.disabled_now ? { endpointId: closing.endpointId, disabledReason: row.disabled_reason, circuitOpened: false } : null;
  }

  /**
   * Deliveries leased to `owner` that the endpoint gate did not let go: due again at their
   * `dueAt`, the lease given back and the claim's attempt not counted (it was never started).
   * A lease that ran out meanwhile (another process has it) is left alone.
   */
  async giveBack(owner: string, heldBack: readonly HeldBack[]): Promise<void> {
    if (heldBack.length === 0) return;
    await this.pool.query(
      prepared(`UPDATE ${this.tables.deliveries} d SET next_attempt_at = u.due, lease_owner = NULL, attempts = d.attempts - 1
       FROM unnest($2::bigint[], $3::int[], $4::timestamptz[]) AS u(id, attempt, due)
       WHERE d.id = u.id AND d.status = 'pending' AND d.lease_owner = $1 AND d.attempts = u.attempt`,
      [owner, heldBack.map((h) => h.delivery.id), heldBack.map((h) => h.delivery.attempt), heldBack.map((h) => h.dueAt)]),
    );
  }

  /**
   * Records attempts and their verdicts, in one transaction for many completions. A failure
   * counts only while this process still holds the lease for that attempt (a lease that ran out
   * was handed to another process, whose result wins); a success always counts.
   */
  async complete(owner: string, now: Date, completions: readonly Completion[], rules: EndpointRules): Promise<EndpointChange[]> {
    if (completions.length === 0) return [];
    return inTransaction(this.pool, async (client) => {
      const changes = await this.applyEndpointEffects(client, now, completions, rules);
      await this.writeResults(client, owner, now, completions);
      return changes;
    });
  }

  /**
   * What completions do to their endpoints (failure streaks, circuits, pauses, disabling), in
   * the caller's transaction, before their deliveries' results are written. Endpoints a failure
   * changes are locked in id order first, as the consumer locks them.
   */
  private async applyEndpointEffects(client: pg.ClientBase, now: Date, completions: readonly Completion[], rules: EndpointRules): Promise<EndpointChange[]> {
    const effects = endpointEffects(completions);
    const successOnly = (c: EndpointEffect) => c.reset && c.failures === 0 && !c.streak && c.pauseUntil === null;
    const failing = effects.filter((c) => !successOnly(c));
    // Of the endpoints that only succeeded, those with a streak, a count or a pause to clear,
    // found through endpoints_troubled_idx: few, and most batches have none, then nothing below
    // runs. (One statement joining every completion's endpoint read them all, or the whole table
    // when the planner chose a hash join.)
    const succeeded = effects.filter(successOnly).map((c) => c.endpointId);
    const { rows: troubled } = succeeded.length === 0 ? { rows: [] } : await client.query<{ id: string }>(prepared(`SELECT t.id FROM ${this.tables.endpoints} t WHERE t.id = ANY($1::text[]) AND ${troubledEndpoint('t')}`, [succeeded]));
    const troubledIds = new Set(troubled.map((row) => row.id));
    const changes = [...failing, ...effects.filter((c) => successOnly(c) && troubledIds.has(c.endpointId))];
    if (changes.length === 0) return [];
    if (failing.length > 0) await client.query(`SELECT 1 FROM ${this.tables.endpoints} WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE`, [failing.map((c) => c.endpointId)]);
    const { rows } = await client.query<{ id: string; disabled_now: boolean; disabled_reason: string | null; opened: boolean }>(
      prepared(`WITH u AS (
         SELECT * FROM unnest($3::text[], $4::bool[], $5::int[], $6::bool[], $7::timestamptz[], $8::text[], $9::text[]) AS u(id, reset, failures, streak, pause_until, gone, last_error)
       ), next AS (
         SELECT e.id,
           (CASE WHEN u.reset THEN 0 ELSE e.consecutive_failures END) + u.failures AS consecutive,
           CASE WHEN u.streak THEN (CASE WHEN u.reset THEN $1::timestamptz ELSE COALESCE(e.failing_since, $1) END) WHEN u.reset THEN NULL ELSE e.failing_since END AS failing_since,
           e.consecutive_failures AS before, u.reset, u.failures, u.streak, u.pause_until, u.gone, u.last_error
         FROM ${this.tables.endpoints} e JOIN u ON u.id = e.id
       )
       UPDATE ${this.tables.endpoints} e SET
         consecutive_failures = n.consecutive,
         failing_since = n.failing_since,
         paused_until = CASE
           WHEN n.failures > 0 AND n.consecutive >= $2 THEN GREATEST(COALESCE(n.pause_until, $1), $1::timestamptz + make_interval(secs => $10 / 1000.0))
           WHEN n.pause_until IS NOT NULL THEN GREATEST(COALESCE(e.paused_until, n.pause_until), n.pause_until)
           -- A success ends a pause that is over (the circuit's probe), never one still running.
           WHEN n.reset AND e.paused_until <= $1 THEN NULL
           ELSE e.paused_until END,
         disabled_at = CASE
           WHEN e.disabled_at IS NOT NULL THEN e.disabled_at
           WHEN n.gone IS NOT NULL THEN $1
           WHEN n.streak AND n.failing_since <= $1::timestamptz - make_interval(secs => $11 / 1000.0) THEN $1
           END,
         disabled_reason = CASE
           WHEN e.disabled_at IS NOT NULL THEN e.disabled_reason
           WHEN n.gone IS NOT NULL THEN n.gone
           WHEN n.streak AND n.failing_since <= $1::timestamptz - make_interval(secs => $11 / 1000.0)
             THEN format('failing since %s, longer than OUTBOX_WEBHOOK_DISABLE_AFTER (%s); last attempt: %s', to_char(n.failing_since AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), $12::text, n.last_error)
           END,
         updated_at = CASE WHEN e.disabled_at IS NULL AND (n.gone IS NOT NULL OR (n.streak AND n.failing_since <= $1::timestamptz - make_interval(secs => $11 / 1000.0))) THEN $1 ELSE e.updated_at END
       FROM next n WHERE e.id = n.id
       RETURNING e.id, (e.disabled_at = $1 AND e.updated_at = $1) AS disabled_now, e.disabled_reason, (n.before < $2 AND n.consecutive >= $2) AS opened`,
      [
        now,
        rules.circuitFailures,
        changes.map((c) => c.endpointId),
        changes.map((c) => c.reset),
        changes.map((c) => c.failures),
        changes.map((c) => c.streak),
        changes.map((c) => c.pauseUntil),
        changes.map((c) => c.gone),
        changes.map((c) => c.lastError),
        rules.circuitCooldownMs,
        rules.disableAfterMs,
        humanDuration(rules.disableAfterMs),
      ]),
    );
    return rows
      .filter((row) => row.disabled_now || row.opened)
      .map((row) => ({ endpointId: row.id, disabledReason: row.disabled_now ? row.disabled_reason : null, circuitOpened: row.opened }));
  }

  /**
   * The deliveries' verdicts and their attempts, in one statement. Last
   * in the transaction: the endpoints' updates before it may wait for a claim holding an
   * endpoint, and hold nothing a claim waits for while they do.
   */
  private async writeResults(client: pg.ClientBase, owner: string, now: Date, completions: readonly Completion[]): Promise<void> {
    await client.query(
      prepared(`WITH verdicts AS (
         UPDATE ${this.tables.deliveries} d SET status = u.status, next_attempt_at = COALESCE(u.next_at, d.next_attempt_at), failures = u.failures, lease_owner = NULL,
           finished_at = CASE WHEN u.status = 'pending' THEN NULL ELSE $2::timestamptz END, last_error = u.error
         FROM unnest($3::bigint[], $4::text[], $5::timestamptz[], $6::int[], $7::text[], $8::int[]) AS u(id, status, next_at, failures, error, attempt)
         WHERE d.id = u.id AND d.status = 'pending' AND (u.status = 'delivered' OR (d.lease_owner = $1 AND d.attempts = u.attempt))
       )
       INSERT INTO ${this.tables.attempts} (delivery_id, attempt, started_at, latency_ms, status_code, outcome, error, response, process)
       SELECT *, $1 FROM unnest($3::bigint[], $8::int[], $9::timestamptz[], $10::int[], $11::int[], $12::text[], $7::text[], $13::text[])
       ON CONFLICT (delivery_id, attempt) DO NOTHING`,
      [
        owner,
        now,
        completions.map(({ delivery }) => delivery.id),
        completions.map(({ verdict }) => verdict.delivery.status),
        completions.map(({ verdict }) => (verdict.delivery.status === 'pending' ? verdict.delivery.nextAttemptAt : null)),
        completions.map(({ delivery, verdict }) => (verdict.delivery.status === 'delivered' ? delivery.failures : verdict.delivery.failures)),
        completions.map(({ result }) => result.error),
        completions.map(({ delivery }) => delivery.attempt),
        completions.map((c) => c.startedAt),
        completions.map((c) => Math.round(c.result.latencyMs)),
        completions.map((c) => c.result.statusCode),
        completions.map((c) => c.result.outcome),
        // Postgres text holds no NUL: a binary answer keeps its other characters.
        completions.map((c) => c.result.response?.replaceAll('\0', '') ?? null),
      ]),
    );
  }
}

interface EndpointEffect {
  readonly endpointId: string;
  /** A success among these completions: the streak and the circuit start again from it. */
  reset: boolean;
  /** Failures counting toward the circuit, after the last success. */
  failures: number;
  /** Any failure after the last success (a 429 too): the endpoint is failing. */
  streak: boolean;
  pauseUntil: Date | null;
  gone: string | null;
  lastError: string | null;
}

/** What a batch of completions does to each endpoint, in the order the attempts ended. */
function endpointEffects(completions: readonly Completion[]): EndpointEffect[] {
  const effects = new Map<string, EndpointEffect>();
  for (const { delivery, result, verdict } of completions) {
    let effect = effects.get(delivery.endpointId);
    if (!effect) effects.set(delivery.endpointId, (effect = { endpointId: delivery.endpointId, reset: false, failures: 0, streak: false, pauseUntil: null, gone: null, lastError: null }));
    const { endpoint } = verdict;
    if (endpoint.kind === 'success') {
      // The streak and the circuit start again; a pause the endpoint asked for (Retry-After)
      // and its 410 stand: a request that was already on its way succeeding says nothing about
      // the endpoint's wish not to be sent anything (endpoint-gate.ts).
      Object.assign(effect, { reset: true, failures: 0, streak: false });
      continue;
    }
    effect.streak = true;
    effect.lastError = result.error;
    if (endpoint.circuit) effect.failures += 1;
    if (endpoint.pauseUntil && (!effect.pauseUntil || endpoint.pauseUntil > effect.pauseUntil)) effect.pauseUntil = endpoint.pauseUntil;
    if (endpoint.gone) effect.gone = `answered 410 Gone (${delivery.url}): the receiver says this endpoint no longer exists`;
  }
  return [...effects.values()];
}

function humanDuration(ms: number): string {
  const units: [number, string][] = [[86_400_000, 'd'], [3_600_000, 'h'], [60_000, 'm'], [1_000, 's']];
  for (const [size, unit] of units) if (ms % size === 0) return `${ms / size}${unit}`;
  return `${ms}ms`;
}

/** An event whose customer was not found, with what the rule reads, for a replay once it can be. */
export interface EventWithoutCustomer extends Omit<EventToDeliver, 'endpointIds'> {
  readonly headers: Readonly<Record<string, string>>;
  /** What the rule found missing. */
  readonly reason: string;
}

/** Of `eventIds`, those the store has (their deliveries were recorded, all or some of them). */
export async function storedEvents(pool: pg.Pool, tables: WebhookTables, eventIds: readonly string[]): Promise<Set<string>> {
  if (eventIds.length === 0) return new Set();
  const { rows } = await pool.query<{ event_id: string }>(prepared(`SELECT event_id FROM ${tables.events} WHERE event_id = ANY($1::text[])`, [eventIds]));
  return new Set(rows.map((row) => row.event_id));
}

const statementNames = new Map<string, string>();

/**
 * A statement of the hot path (record, complete) prepared once per connection, named by its
 * text (the tables' names are in it): parsing and planning these CTEs again for every chunk was
 * about a fifth of Postgres's work per delivery. Not the claim's: which of an endpoint's due
 * deliveries it reads depends on its parameters, and a generic plan would not know them.
 */
function prepared(text: string, values: unknown[]): pg.QueryConfig {
  let name = statementNames.get(text);
  if (!name) statementNames.set(text, (name = `wh_${createHash('sha1').update(text).digest('hex').slice(0, 16)}`));
  return { name, text, values };
}

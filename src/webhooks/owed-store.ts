import type pg from 'pg';
import type { ClaimedDelivery, Completion, EventToDeliver } from './lifecycle.js';
import { prepared } from './prepared.js';
import type { WebhookTables } from './webhook-tables.js';

/**
 * A delivery owed, as its row is first written: in the state it reached before its recording.
 * Every delivery row is written by one statement (OwedStore.write), whichever it is.
 */
export type OwedRow =
  /** Owed, due at `dueAt` for a claim: recorded first, or held back by the endpoint gate (its request never started). */
  | { readonly state: 'due'; readonly event: Pick<EventToDeliver, 'eventId' | 'aggregateId'>; readonly endpointId: string; readonly dueAt: Date }
  /** Its first attempt sent before it was recorded and still in flight: leased to the writer until `until`, attempt 1 started. */
  | { readonly state: 'leased'; readonly delivery: ClaimedDelivery; readonly until: Date }
  /** Its first attempt sent before it was recorded and ended: written once, with the attempt in its row (first_*). */
  | { readonly state: 'ended'; readonly completion: Completion };

/** What OwedStore.write wrote: how many rows it added, and the ids of those leased (keyed by event and endpoint). */
export interface OwedWritten {
  readonly added: number;
  readonly leased: ReadonlyMap<string, string>;
}

/** The key of a delivery's (event, endpoint) in OwedWritten.leased. */
export function owedKey(eventId: string, endpointId: string): string {
  return `${eventId}\n${endpointId}`;
}

/**
 * What the store owes: the events' bodies, once each, and a row per (event, endpoint) owed it.
 * The intake's recordings and the dispatcher's result writes both write their rows here.
 */
export class OwedStore {
  constructor(private readonly tables: WebhookTables) {}

  /**
   * In the caller's transaction: the events' bodies once each, a delivery per (event,
   * endpoint), due at firstAttemptAt(), for the dispatchers' claims. A re-consumed event
   * conflicts on both and adds nothing. Returns how many deliveries were added.
   */
  async record(client: pg.ClientBase, events: readonly EventToDeliver[], firstAttemptAt: () => Date): Promise<number> {
    const owed = events.filter((event) => event.endpointIds.length > 0);
    if (owed.length === 0) return 0;
    await this.storeEvents(client, owed);
    const rows = owed.flatMap((event) => event.endpointIds.map((endpointId): OwedRow => ({ state: 'due', event, endpointId, dueAt: firstAttemptAt() })));
    return (await this.write(client, null, new Date(0), rows)).added;
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
  async storeEvents(client: pg.ClientBase, owed: readonly Omit<EventToDeliver, 'endpointIds'>[]): Promise<void> {
    const events = [...new Map(owed.map((event) => [event.eventId, event])).values()];
    if (events.length === 0) return;
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

  /**
   * Delivery rows, their events stored already (storeEvents, in the same transaction), each in
   * its state: due, leased to `owner` (attempt 1 in flight), or ended (with its first attempt
   * and verdict in the row: no row of attempts). In the order given (WITH ORDINALITY ... ORDER
   * BY): ids are assigned in it, which ordered endpoints send by; only an ordered endpoint's
   * deliveries carry the aggregate (the others write no entry in the ordering index). A
   * re-consumed event conflicts on (event, endpoint) and adds nothing. `now` is the ended ones'
   * finish.
   */
  async write(client: pg.ClientBase, owner: string | null, now: Date, rows: readonly OwedRow[]): Promise<OwedWritten> {
    if (rows.length === 0) return { added: 0, leased: new Map() };
    const c = columnsOf(rows, now);
    // Rows without an attempt (every row of a recording due) name no first_* column: a narrower
    // statement, and one that an earlier setup's table (without those columns) takes too.
    const attempted = rows.some((row) => row.state === 'ended');
    const attempt = {
      params: attempted ? ', $10::text[], $11::timestamptz[], $12::int[], $13::int[], $14::text[], $15::text[]' : '',
      names: attempted ? ', error, started_at, latency_ms, status_code, outcome, response' : '',
      columns: attempted ? ', finished_at, last_error, first_started_at, first_latency_ms, first_status_code, first_outcome, first_error, first_response, first_process' : '',
      values: attempted
        ? `, CASE WHEN u.status = 'pending' THEN NULL ELSE $16::timestamptz END, u.error, u.started_at, u.latency_ms, u.status_code, u.outcome, CASE WHEN u.started_at IS NOT NULL THEN u.error END, u.response, CASE WHEN u.started_at IS NOT NULL THEN $1 END`
        : '',
    };
    const values = [owner, c.eventIds, c.endpointIds, c.orderingKeys, c.statuses, c.attempts, c.failures, c.nextAt, c.leased, ...(attempted ? [c.errors, c.startedAt, c.latencyMs, c.statusCodes, c.outcomes, c.responses, now] : [])];
    const { rows: [written] } = await client.query<{ added: number; ids: string[] | null; event_ids: string[] | null; endpoint_ids: string[] | null }>(
      prepared(`WITH u AS (
         SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::int[], $8::timestamptz[], $9::bool[]${attempt.params})
           WITH ORDINALITY AS u(event_id, endpoint_id, ordering_key, status, attempts, failures, next_at, leased${attempt.names}, n)
       ), inserted AS (
         INSERT INTO ${this.tables.deliveries} (event_id, endpoint_id, ordering_key, status, attempts, failures, next_attempt_at, lease_owner${attempt.columns})
         SELECT u.event_id, u.endpoint_id, CASE WHEN e.ordered THEN u.ordering_key END, u.status, u.attempts, u.failures, u.next_at, CASE WHEN u.leased THEN $1::text END${attempt.values}
         FROM u JOIN ${this.tables.endpoints} e ON e.id = u.endpoint_id ORDER BY u.n
         ON CONFLICT (event_id, endpoint_id) DO NOTHING
         RETURNING id, event_id, endpoint_id, lease_owner
       )
       SELECT count(*)::int AS added, array_agg(id::text) FILTER (WHERE lease_owner IS NOT NULL) AS ids,
              array_agg(event_id) FILTER (WHERE lease_owner IS NOT NULL) AS event_ids, array_agg(endpoint_id) FILTER (WHERE lease_owner IS NOT NULL) AS endpoint_ids
       FROM inserted`,
      values),
    );
    const leased = new Map<string, string>();
    (written!.ids ?? []).forEach((id, i) => leased.set(owedKey(written!.event_ids![i]!, written!.endpoint_ids![i]!), id));
    return { added: written!.added, leased };
  }
}

/** The rows as the statement's arrays, one per column. */
function columnsOf(rows: readonly OwedRow[], now: Date) {
  const c = {
    eventIds: [] as string[], endpointIds: [] as string[], orderingKeys: [] as (string | null)[], statuses: [] as string[], attempts: [] as number[], failures: [] as number[], nextAt: [] as Date[], leased: [] as boolean[],
    errors: [] as (string | null)[], startedAt: [] as (Date | null)[], latencyMs: [] as (number | null)[], statusCodes: [] as (number | null)[], outcomes: [] as (string | null)[], responses: [] as (string | null)[],
  };
  const push = (row: { eventId: string; endpointId: string; orderingKey: string | null; status: string; attempts: number; failures: number; nextAt: Date; leased: boolean }, completion: Completion | null) => {
    c.eventIds.push(row.eventId);
    c.endpointIds.push(row.endpointId);
    c.orderingKeys.push(row.orderingKey);
    c.statuses.push(row.status);
    c.attempts.push(row.attempts);
    c.failures.push(row.failures);
    c.nextAt.push(row.nextAt);
    c.leased.push(row.leased);
    c.errors.push(completion?.result.error ?? null);
    c.startedAt.push(completion?.startedAt ?? null);
    c.latencyMs.push(completion ? Math.round(completion.result.latencyMs) : null);
    c.statusCodes.push(completion?.result.statusCode ?? null);
    c.outcomes.push(completion?.result.outcome ?? null);
    // Postgres text holds no NUL: a binary answer keeps its other characters.
    c.responses.push(completion?.result.response?.replaceAll('\0', '') ?? null);
  };
  for (const row of rows) {
    if (row.state === 'due') push({ eventId: row.event.eventId, endpointId: row.endpointId, orderingKey: row.event.aggregateId, status: 'pending', attempts: 0, failures: 0, nextAt: row.dueAt, leased: false }, null);
    else if (row.state === 'leased') push({ eventId: row.delivery.eventId, endpointId: row.delivery.endpointId, orderingKey: null, status: 'pending', attempts: 1, failures: 0, nextAt: row.until, leased: true }, null);
    else {
      const { delivery, verdict } = row.completion;
      const status = verdict.delivery.status;
      // A finished one's next_attempt_at is never read again: its finish.
      const nextAt = status === 'pending' ? verdict.delivery.nextAttemptAt : now;
      push({ eventId: delivery.eventId, endpointId: delivery.endpointId, orderingKey: null, status, attempts: 1, failures: status === 'delivered' ? 0 : verdict.delivery.failures, nextAt, leased: false }, row.completion);
    }
  }
  return c;
}

/** Of `eventIds`, those the store has (their deliveries were recorded, all or some of them). */
export async function storedEvents(pool: pg.Pool, tables: WebhookTables, eventIds: readonly string[]): Promise<Set<string>> {
  if (eventIds.length === 0) return new Set();
  const { rows } = await pool.query<{ event_id: string }>(prepared(`SELECT event_id FROM ${tables.events} WHERE event_id = ANY($1::text[])`, [eventIds]));
  return new Set(rows.map((row) => row.event_id));
}

import type pg from 'pg';
import type { Closing } from './endpoint-gate.js';
import type { Completion } from './lifecycle.js';
import { prepared } from './prepared.js';
import { troubledEndpoint, type WebhookTables } from './webhook-tables.js';

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
 * Each endpoint's health as the store keeps it: its failure streak, its circuit, a pause it
 * asked for, its disabling. Written by the attempts' results (apply, in their transaction) and,
 * at once, by what closes an endpoint's gate (close); read by every lease (lease-store.ts).
 */
export class EndpointHealthStore {
  constructor(
    private readonly pool: pg.Pool,
    private readonly tables: WebhookTables,
  ) {}

  /**
   * What closed an endpoint's gate in this process (endpoint-gate.ts), written at once, on its
   * own: the pause it asked for, or its disabling on a 410. The other processes' next leases of
   * it read this. The completions' batch writes the same again with the attempt (nothing
   * changes then). The change, when this disabled the endpoint.
   */
  async close(closing: Closing, now: Date): Promise<EndpointChange | null> {
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
   * What completions do to their endpoints (failure streaks, circuits, pauses, disabling), in
   * the caller's transaction, before their deliveries' results are written. Endpoints a failure
   * changes are locked in id order first, as the consumer locks them.
   */
  async apply(client: pg.ClientBase, now: Date, completions: readonly Completion[], rules: EndpointRules): Promise<EndpointChange[]> {
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


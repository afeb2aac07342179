import type pg from 'pg';
import { inTransaction } from '../pg-transaction.js';
import type { EndpointChange, EndpointHealthStore, EndpointRules } from './endpoint-health-store.js';
import type { LeaseStore } from './lease-store.js';
import type { Completion, EventToDeliver, HeldBack } from './lifecycle.js';
import type { OwedRow, OwedStore, OwedWritten } from './owed-store.js';
import { prepared } from './prepared.js';
import type { WebhookTables } from './webhook-tables.js';

/** What one write of results holds: everything a process's deliveries reached since the last one. */
export interface ResultsToWrite {
  readonly owner: string;
  readonly now: Date;
  /** The events of `owed`: their bodies stored once each. */
  readonly events: readonly Omit<EventToDeliver, 'endpointIds'>[];
  /** Deliveries not recorded yet, each in the state it reached (first attempts sent before their recording, the rest of their chunks due). */
  readonly owed: readonly OwedRow[];
  /** Ended attempts of recorded deliveries (claimed, or recorded leased). */
  readonly completions: readonly Completion[];
  /** Recorded deliveries the endpoint gate held back: their leases given back. */
  readonly givenBack: readonly HeldBack[];
}

export interface ResultsWritten {
  /** Endpoints the attempts disabled or whose circuit they opened. */
  readonly changes: readonly EndpointChange[];
  readonly owed: OwedWritten;
}

/**
 * The one writer of attempts' results: in one transaction, what the attempts did to their
 * endpoints, the deliveries not recorded yet (each written once, with its first attempt when it
 * ended: OwedStore.write), the verdicts and attempts of recorded ones, and the leases given back.
 */
export class ResultStore {
  constructor(
    private readonly pool: pg.Pool,
    private readonly tables: WebhookTables,
    private readonly owed: OwedStore,
    private readonly health: EndpointHealthStore,
    private readonly leases: LeaseStore,
  ) {}

  async write(results: ResultsToWrite, rules: EndpointRules): Promise<ResultsWritten> {
    const { owner, now, owed, completions, givenBack } = results;
    if (owed.length === 0 && completions.length === 0 && givenBack.length === 0) return { changes: [], owed: { added: 0, leased: new Map() } };
    return inTransaction(this.pool, async (client) => {
      await this.owed.storeEvents(client, results.events);
      const ended = [...owed.flatMap((row) => (row.state === 'ended' ? [row.completion] : [])), ...completions];
      const changes = ended.length > 0 ? await this.health.apply(client, now, ended, rules) : [];
      const written = await this.owed.write(client, owner, now, owed);
      if (completions.length > 0) await this.writeResults(client, owner, now, completions);
      await this.leases.giveBack(client, owner, givenBack);
      return { changes, owed: written };
    });
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

import type pg from 'pg';
import { inTransaction } from '../pg-transaction.js';
import { customerIdProblem, customerOf, type CustomerRule } from './customer-rule.js';
import type { DeliveryStore } from './delivery-store.js';
import { loadSubscribers } from './endpoint-store.js';
import { SubscriptionIndex } from './event-types.js';
import type { WebhookTables } from './webhook-tables.js';
import { RelayError } from '../errors.js';

/**
 * Events whose customer the rule could not find (recorded by the intake): listed for the
 * operator, and delivered once their customer can be found — by the rule as it is now (the
 * producer or the rule fixed), or named by the operator for one event. Never guessed.
 */

export interface EventWithoutCustomerRow {
  readonly eventId: string;
  readonly eventType: string;
  readonly aggregateId: string | null;
  readonly reason: string;
  readonly producedAt: Date;
  readonly recordedAt: Date;
}

export async function listWithoutCustomer(pool: pg.Pool, tables: WebhookTables, limit: number): Promise<EventWithoutCustomerRow[]> {
  const { rows } = await pool.query(`SELECT event_id, event_type, aggregate_id, reason, produced_at, recorded_at FROM ${tables.eventsWithoutCustomer} ORDER BY produced_at, event_id LIMIT $1`, [limit]);
  return rows.map((row) => ({ eventId: row.event_id, eventType: row.event_type, aggregateId: row.aggregate_id, reason: row.reason, producedAt: row.produced_at, recordedAt: row.recorded_at }));
}

/** Who finds the customer: the rule, or the operator naming it for one event. */
export type CustomerFinder = { readonly rule: CustomerRule } | { readonly eventId: string; readonly customerId: string };

export interface ReplayedWithoutCustomer {
  /** Events whose customer was found: their deliveries recorded, the events off the list. */
  readonly found: number;
  /** Deliveries recorded for them, due now. */
  readonly deliveries: number;
  /** Still without a customer, and why (the first few). */
  readonly stillWithout: readonly { readonly eventId: string; readonly reason: string }[];
  readonly stillWithoutCount: number;
}

/**
 * Each listed event (or the one `onlyEventId` names) given its customer, its deliveries to
 * that customer's endpoints subscribed to it recorded due (those the platform-wide endpoints
 * had conflict and add nothing), and taken off the list, in one transaction per event.
 */
export async function replayWithoutCustomer(pool: pg.Pool, tables: WebhookTables, store: DeliveryStore, finder: CustomerFinder, onlyEventId: string | null, now: Date): Promise<ReplayedWithoutCustomer> {
  if ('customerId' in finder) {
    const problem = customerIdProblem(finder.customerId);
    if (problem) throw new RelayError('CONFIG_INVALID', `--customer ${problem}`);
    // A mistyped customer would take the event off the list with nothing delivered.
    const { rows: endpoints } = await pool.query(`SELECT 1 FROM ${tables.endpoints} WHERE customer_id = $1 LIMIT 1`, [finder.customerId]);
    if (endpoints.length === 0) throw new RelayError('WEBHOOK_NOT_FOUND', `customer ${finder.customerId} has no webhook endpoint (\`webhooks endpoint list\` shows whose endpoints there are); the event stays listed`);
  }
  const eventId = 'eventId' in finder ? finder.eventId : onlyEventId;
  const { rows } = await pool.query(`SELECT * FROM ${tables.eventsWithoutCustomer} WHERE $1::text IS NULL OR event_id = $1 ORDER BY produced_at, event_id`, [eventId]);
  if (eventId !== null && rows.length === 0) throw new RelayError('WEBHOOK_NOT_FOUND', `event ${eventId} is not among the events without a customer; \`outbox-relay webhooks without-customer\` lists them`);
  const client = await pool.connect();
  const subscriptions = await loadSubscribers(client, tables).finally(() => client.release());
  const index = new SubscriptionIndex(subscriptions.subscribers);
  const stillWithout: { eventId: string; reason: string }[] = [];
  let found = 0;
  let deliveries = 0;
  for (const row of rows) {
    const body = JSON.parse(row.body) as { readonly data?: unknown };
    const customer = 'customerId' in finder ? { customerId: finder.customerId } : customerOf(finder.rule, { headers: row.headers, payload: body.data, aggregateId: row.aggregate_id });
    if (customer.customerId === null) {
      stillWithout.push({ eventId: row.event_id, reason: 'missing' in customer ? customer.missing : '' });
      continue;
    }
    const producedAt: Date = row.produced_at;
    const endpointIds = index.endpointsFor(customer.customerId, row.event_type, producedAt.getTime());
    const recorded = await inTransaction(pool, async (tx) => {
      const added = await store.record(tx, [{ eventId: row.event_id, eventType: row.event_type, aggregateId: row.aggregate_id, body: row.body, producedAt, endpointIds }], () => now);
      await tx.query(`DELETE FROM ${tables.eventsWithoutCustomer} WHERE event_id = $1`, [row.event_id]);
      return added;
    });
    found += 1;
    deliveries += recorded;
  }
  return { found, deliveries, stillWithout: stillWithout.slice(0, 20), stillWithoutCount: stillWithout.length };
}

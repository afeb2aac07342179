import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { inTransaction } from '../pg-transaction.js';
import type { DeliveryStore } from './delivery-store.js';
import type { Endpoint } from './endpoint-store.js';
import type { WebhookTables } from './webhook-tables.js';

export const TEST_EVENT_TYPE = 'webhook.test';

/**
 * A `webhook.test` event for one endpoint, recorded as the intake records any event: its body
 * stored, one delivery due now. The running `webhooks` processes claim and send it like any
 * other (signed, retried, listed with its attempts): what the receiver sees is real.
 */
export async function recordTestEvent(pool: pg.Pool, tables: WebhookTables, store: DeliveryStore, endpoint: Endpoint, now: Date): Promise<string> {
  const eventId = `evt_test_${randomBytes(8).toString('hex')}`;
  const body = JSON.stringify({
    id: eventId,
    type: TEST_EVENT_TYPE,
    timestamp: now.toISOString(),
    aggregate: { type: 'webhook_endpoint', id: endpoint.id },
    data: { endpointId: endpoint.id, customerId: endpoint.customerId, message: 'A test event: this endpoint receives and verifies webhooks.' },
  });
  return inTransaction(pool, async (client) => {
    await store.record(client, [{ eventId, eventType: TEST_EVENT_TYPE, aggregateId: endpoint.id, body, producedAt: now, endpointIds: [endpoint.id] }], () => now);
    const { rows } = await client.query<{ id: string }>(`SELECT id::text AS id FROM ${tables.deliveries} WHERE event_id = $1 AND endpoint_id = $2`, [eventId, endpoint.id]);
    return rows[0]!.id;
  });
}

import type pg from 'pg';
import type { EventHandler } from '../client/index.js';

/** The entitlement side of the demo: each paid invoice extends its customer's access by 30 days. */
export interface EntitlementTables {
  readonly entitlements: string;
  readonly extensions: string;
}

export function entitlementTables(prefix: string): EntitlementTables {
  return { entitlements: `${prefix}_entitlements`, extensions: `${prefix}_entitlement_extensions` };
}

export const EXTENSION_DAYS = 30;

export async function createEntitlementSchema(db: pg.Pool, tables: EntitlementTables): Promise<void> {
  await db.query(`CREATE TABLE IF NOT EXISTS ${tables.entitlements} (
    customer_id  text        PRIMARY KEY,
    access_until timestamptz NOT NULL,
    extensions   integer     NOT NULL
  )`);
  // No unique constraint on purpose: an event applied twice would show as two rows.
  await db.query(`CREATE TABLE IF NOT EXISTS ${tables.extensions} (
    seq          bigserial   PRIMARY KEY,
    customer_id  text        NOT NULL,
    invoice_id   text        NOT NULL,
    event_id     text        NOT NULL,
    extended_at  timestamptz NOT NULL DEFAULT now()
  )`);
}

interface InvoicePaid {
  readonly invoice_id: string;
  readonly customer_id: string;
  readonly paid_at: Date | string;
}

/**
 * The handler: not idempotent by itself (it adds 30 days each time it runs). The consumer helper
 * makes it run once per event: its dedup row commits in the same transaction.
 */
export function extendEntitlement(tables: EntitlementTables): EventHandler<InvoicePaid> {
  return async (event, tx) => {
    if (event.eventType !== 'invoice.paid') return;
    const { customer_id: customerId, invoice_id: invoiceId } = event.payload;
    const paidAt = new Date(event.payload.paid_at);
    await tx.query(
      `INSERT INTO ${tables.entitlements} AS e (customer_id, access_until, extensions)
       VALUES ($1, $2::timestamptz + make_interval(days => $3), 1)
       ON CONFLICT (customer_id) DO UPDATE
         SET access_until = greatest(e.access_until, $2::timestamptz) + make_interval(days => $3), extensions = e.extensions + 1`,
      [customerId, paidAt, EXTENSION_DAYS],
    );
    await tx.query(`INSERT INTO ${tables.extensions} (customer_id, invoice_id, event_id) VALUES ($1, $2, $3)`, [customerId, invoiceId, event.eventId]);
  };
}

import type pg from 'pg';
import { deterministicEventId, OutboxClientError, type createOutboxWriter } from '../client/index.js';

/** The billing side of the demo: invoices, paid in one transaction with their `invoice.paid` event. */
export interface BillingTables {
  readonly invoices: string;
}

export function billingTables(prefix: string): BillingTables {
  return { invoices: `${prefix}_invoices` };
}

export async function createBillingSchema(db: pg.Pool, tables: BillingTables): Promise<void> {
  await db.query(`CREATE TABLE IF NOT EXISTS ${tables.invoices} (
    id           text        PRIMARY KEY,
    customer_id  text        NOT NULL,
    amount_cents bigint      NOT NULL,
    currency     text        NOT NULL,
    status       text        NOT NULL DEFAULT 'open',
    payment_id   text,
    paid_at      timestamptz
  )`);
}

export interface OpenInvoice {
  readonly id: string;
  readonly customerId: string;
  readonly amountCents: number;
}

export async function createInvoices(db: pg.Pool, tables: BillingTables, invoices: readonly OpenInvoice[]): Promise<void> {
  for (const invoice of invoices) {
    await db.query(`INSERT INTO ${tables.invoices} (id, customer_id, amount_cents, currency) VALUES ($1, $2, $3, 'EUR')`, [invoice.id, invoice.customerId, invoice.amountCents]);
  }
}

export type PaymentOutcome = 'paid' | 'already-paid';

/**
 * Marks the invoice paid and writes `invoice.paid`, in ONE transaction: both or neither. The
 * event id is derived from the invoice, so running this again for the same invoice (a retry after
 * a lost COMMIT acknowledgement, a job run twice) conflicts on the outbox's primary key and rolls
 * back instead of announcing the payment twice.
 */
export async function payInvoice(db: pg.Pool, tables: BillingTables, outbox: ReturnType<typeof createOutboxWriter>, invoiceId: string, paymentId: string): Promise<PaymentOutcome> {
  const client = await db.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query<{ customer_id: string; amount_cents: string; currency: string; paid_at: Date }>(
      `UPDATE ${tables.invoices} SET status = 'paid', payment_id = $2, paid_at = now() WHERE id = $1 RETURNING customer_id, amount_cents, currency, paid_at`,
      [invoiceId, paymentId],
    );
    const invoice = rows[0];
    if (!invoice) throw new Error(`no invoice ${invoiceId}`);
    await outbox.write(client, {
      eventId: deterministicEventId(['invoice.paid', invoiceId]),
      aggregateType: 'invoice',
      aggregateId: invoiceId,
      eventType: 'invoice.paid',
      payload: {
        invoice_id: invoiceId,
        customer_id: invoice.customer_id,
        subscription_id: null,
        payment_id: paymentId,
        amount_cents: Number(invoice.amount_cents),
        currency: invoice.currency,
        lines: [{ description: 'Pro plan, 30 days', quantity: 1, amount_cents: Number(invoice.amount_cents) }],
        paid_at: invoice.paid_at,
      },
    });
    await client.query('COMMIT');
    return 'paid';
  } catch (error) {
    await client.query('ROLLBACK');
    if (error instanceof OutboxClientError && error.code === 'OUTBOX_DUPLICATE_EVENT') return 'already-paid';
    throw error;
  } finally {
    client.release();
  }
}

/**
 * The demo's billing service as a process (docker-compose profile `demo`): opens DEMO_INVOICES
 * invoices and pays each in one transaction with its `invoice.paid` outbox event, then exits.
 * Env: DATABASE_URL (or DATABASE_URL_FILE), DATABASE_PASSWORD(_FILE), OUTBOX_TABLE (default
 * public.event_outbox), DEMO_INVOICES (20), DEMO_CUSTOMERS (10), DEMO_PREFIX (demo: table
 * names), DEMO_INTERVAL_MS (pause between payments, 200).
 */
import { fileURLToPath } from 'node:url';
import { createOutboxWriter, loadOutboxSchemas } from '../client/index.js';
import { billingTables, createBillingSchema, createInvoices, payInvoice } from './billing-service.js';
import { demoPool } from './database.js';

const SCHEMAS_DIR = fileURLToPath(new URL('../../schemas', import.meta.url));

async function main(): Promise<void> {
  const env = process.env;
  const count = positive(env.DEMO_INVOICES ?? '20', 'DEMO_INVOICES');
  const customers = positive(env.DEMO_CUSTOMERS ?? '10', 'DEMO_CUSTOMERS');
  const pause = Number(env.DEMO_INTERVAL_MS ?? '200');
  const tables = billingTables(env.DEMO_PREFIX ?? 'demo');
  const outbox = createOutboxWriter({ table: env.OUTBOX_TABLE ?? 'public.event_outbox', schemas: await loadOutboxSchemas(SCHEMAS_DIR) });
  const pool = demoPool(env, 'demo-billing');
  try {
    await createBillingSchema(pool, tables);
    const run = `r${Date.now().toString(36)}`;
    const invoices = Array.from({ length: count }, (_, i) => ({ id: `inv_${run}_${i + 1}`, customerId: `cus_${run}_${(i % customers) + 1}`, amountCents: 1_900 }));
    await createInvoices(pool, tables, invoices);
    let paid = 0;
    for (const [i, invoice] of invoices.entries()) {
      if ((await payInvoice(pool, tables, outbox, invoice.id, `pay_${run}_${i + 1}`)) === 'paid') paid += 1;
      if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause));
    }
    process.stdout.write(`billing: paid ${paid} invoices (run ${run}); each wrote invoice.paid to ${env.OUTBOX_TABLE ?? 'public.event_outbox'} in the same transaction\n`);
  } finally {
    await pool.end();
  }
}

function positive(raw: string, name: string): number {
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < 1) throw new Error(`${name}=${JSON.stringify(raw)}: expected a positive integer`);
  return value;
}

main().catch((error: unknown) => {
  process.stderr.write(`billing: ${(error as Error).message}\n`);
  process.exitCode = 1;
});

import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';

// `npm run demo` end to end, as a newcomer runs it (`node dist/demo/run.js`), on the test's
// services and its own names: N invoices paid -> exactly N entitlement extensions, with the relay
// killed (SIGKILL) and restarted once in the middle, and a replay of every event skipped.

const DEMO = fileURLToPath(new URL('../../dist/demo/run.js', import.meta.url));
const prefix = `demo_t${randomUUID().replaceAll('-', '').slice(0, 8)}`;
const INVOICES = 30;
const pool = new pg.Pool({ connectionString: inject('services').databaseUrl });

function runDemo(): Promise<{ code: number | null; output: string }> {
  const services = inject('services');
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [DEMO], {
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: services.databaseUrl, KAFKA_BROKERS: services.kafkaBrokers, SCHEMA_REGISTRY_URL: services.schemaRegistryUrl, DEMO_PREFIX: prefix, DEMO_INVOICES: String(INVOICES), DEMO_CUSTOMERS: '10' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.once('exit', (code) => resolve({ code, output }));
  });
}

afterAll(async () => {
  for (const table of ['invoices', 'entitlements', 'entitlement_extensions', 'event_outbox']) await pool.query(`DROP TABLE IF EXISTS ${prefix}_${table}`).catch(() => undefined);
  await pool.end();
});

describe('demo', () => {
  it('N invoices paid -> exactly N entitlement extensions, across a relay kill -9 and a full replay', async () => {
    const { code, output } = await runDemo();
    expect(output, output).toMatch(/relay: killed with SIGKILL mid-stream/);
    expect(output, output).toMatch(/relay: restarted \(pid \d+\)/);
    expect(output, output).toMatch(new RegExp(`OK: ${INVOICES} invoices paid -> ${INVOICES} entitlement extensions \\(10 customers`));
    expect(output).toMatch(/retried 3 payments .*: 3 refused by the event_id primary key/);
    expect(output).toMatch(new RegExp(`entitlements: ${INVOICES} replayed duplicates skipped`));
    expect(code).toBe(0);

    // The database agrees with what the demo printed.
    const paid = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${prefix}_invoices WHERE status = 'paid'`);
    expect(paid.rows[0]!.n).toBe(INVOICES);
    const outboxRows = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${prefix}_event_outbox`);
    expect(outboxRows.rows[0]!.n).toBe(INVOICES);
    const extensions = await pool.query<{ invoice_id: string; n: number }>(`SELECT invoice_id, count(*)::int AS n FROM ${prefix}_entitlement_extensions GROUP BY invoice_id`);
    expect(extensions.rows).toHaveLength(INVOICES);
    expect(extensions.rows.every((row) => row.n === 1)).toBe(true);
    const entitlements = await pool.query<{ extensions: number }>(`SELECT extensions FROM ${prefix}_entitlements`);
    expect(entitlements.rows).toHaveLength(10);
    expect(entitlements.rows.map((row) => row.extensions)).toEqual(Array(10).fill(3));
    const dedup = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM consumed_events WHERE consumer_group = $1`, [`${prefix}-entitlements`]);
    expect(dedup.rows[0]!.n).toBe(INVOICES);
    // The demo leaves no slot holding WAL.
    const slots = await pool.query(`SELECT 1 FROM pg_replication_slots WHERE slot_name = $1`, [`${prefix}_relay`]);
    expect(slots.rowCount).toBe(0);
  });
});

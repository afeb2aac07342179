/**
 * `npm run demo`: the whole pattern on the local services, with a relay crash in the middle.
 *
 *   billing (UPDATE invoice + invoice.paid, one transaction) -> outbox table -> relay (child
 *   process, Avro) -> Kafka -> entitlements (idempotent consumer: +30 days per paid invoice)
 *
 * Services: DATABASE_URL, KAFKA_BROKERS, SCHEMA_REGISTRY_URL, else `scripts/stack.sh env`.
 * DEMO_INVOICES (20), DEMO_CUSTOMERS (10), DEMO_PREFIX (demo: names of its tables, outbox, slot,
 * topics and consumer group). Exits 0 when every paid invoice extended access exactly once.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { kafkajs } from '../kafka/kafkajs/kafkajs.js';
import pg from 'pg';
import { avroRegistryFromEnv, createIdempotentConsumer, createOutboxWriter, ensureConsumedEventsTable, kafkaConfigFromEnv, loadOutboxSchemas } from '../client/index.js';

/** The relay's connection-security variables (and their *_FILE forms), passed through as they are. */
const SECURITY_VARIABLE = /^(KAFKA_SSL|KAFKA_SASL|SCHEMA_REGISTRY_(CA_FILE|USERNAME|PASSWORD)|DATABASE_PASSWORD)/;
import { databaseAccess } from '../pg-connection.js';
import { setup } from '../setup/setup.js';
import { billingTables, createBillingSchema, createInvoices, payInvoice } from './billing-service.js';
import { createEntitlementSchema, entitlementTables, EXTENSION_DAYS, extendEntitlement } from './entitlement-service.js';
import { demoServices, type DemoServices } from './services.js';

const CLI = fileURLToPath(new URL('../cli.js', import.meta.url));
const SCHEMAS_DIR = fileURLToPath(new URL('../../schemas', import.meta.url));
const say = (line: string) => process.stdout.write(`${line}\n`);

/** The relay as a child process; its JSON log lines are kept for a failure message. */
class Relay {
  private child: ChildProcess | null = null;
  private readonly lines: string[] = [];
  private exited: Promise<unknown> = Promise.resolve();
  constructor(private readonly env: Record<string, string>) {}

  async start(): Promise<number> {
    const child = spawn(process.execPath, [CLI, 'run'], { env: { PATH: process.env.PATH ?? '', ...this.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', resolve));
    let active = false;
    let pending = '';
    const onData = (chunk: Buffer) => {
      pending += chunk.toString('utf8');
      const parts = pending.split('\n');
      pending = parts.pop() ?? '';
      for (const line of parts) {
        this.lines.push(line);
        if (/"msg":"active:/.test(line)) active = true;
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    const deadline = Date.now() + 60_000;
    while (!active) {
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the relay did not become active; its last lines:\n${this.tail()}`);
      await sleep(50);
    }
    return child.pid!;
  }

  async kill9(): Promise<void> {
    this.child?.kill('SIGKILL');
    await this.exited;
  }

  async stop(): Promise<void> {
    this.child?.kill('SIGTERM');
    await this.exited;
  }

  tail(): string {
    return this.lines.slice(-20).join('\n');
  }
}

async function runDemo(services: DemoServices, env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  const invoiceCount = positive(env.DEMO_INVOICES ?? '20', 'DEMO_INVOICES');
  const customerCount = Math.min(positive(env.DEMO_CUSTOMERS ?? '10', 'DEMO_CUSTOMERS'), invoiceCount);
  const prefix = env.DEMO_PREFIX ?? 'demo';
  if (!/^[a-z][a-z0-9_]{0,39}$/.test(prefix)) throw new Error(`DEMO_PREFIX=${JSON.stringify(prefix)}: expected lowercase letters, digits, _`);
  const outboxTable = `${prefix}_event_outbox`;
  const slot = `${prefix}_relay`;
  const topic = `${prefix}.invoice`;
  const groupId = `${prefix}-entitlements`;
  const billing = billingTables(prefix);
  const entitlements = entitlementTables(prefix);
  const run = `r${Date.now().toString(36)}`;
  const started = new Date(Date.now() - 1_000);

  say('outbox-relay demo: billing -> outbox -> relay -> Kafka -> entitlements');
  say(`  postgres ${redact(services.databaseUrl)}, kafka ${services.kafkaBrokers}, registry ${services.schemaRegistryUrl}`);

  const pool = new pg.Pool({ connectionString: services.databaseUrl, max: 6 });
  // TLS, SASL and registry credentials, as the relay reads them, go to the relay and the demo's own clients.
  const securityEnv = Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => SECURITY_VARIABLE.test(entry[0]) && entry[1] !== undefined));
  const connectionEnv = { ...securityEnv, KAFKA_BROKERS: services.kafkaBrokers, SCHEMA_REGISTRY_URL: services.schemaRegistryUrl };
  const { Kafka, logLevel } = kafkajs();
  const kafka = new Kafka({ clientId: 'outbox-relay-demo', ...kafkaConfigFromEnv(connectionEnv), logLevel: logLevel.NOTHING });
  const relayEnv: Record<string, string> = {
    ...securityEnv,
    DATABASE_URL: services.databaseUrl,
    KAFKA_BROKERS: services.kafkaBrokers,
    SCHEMA_REGISTRY_URL: services.schemaRegistryUrl,
    OUTBOX_TABLE: `public.${outboxTable}`,
    OUTBOX_SLOT: slot,
    OUTBOX_PUBLICATION: slot,
    OUTBOX_TOPIC_TEMPLATE: `${prefix}.{aggregate_type}`,
    OUTBOX_DEAD_LETTER_TOPIC: `${prefix}.dead-letter`,
    OUTBOX_FORMAT: 'avro',
    OUTBOX_AUTO_REGISTER: 'true',
    OUTBOX_SCHEMAS_DIR: SCHEMAS_DIR,
    OUTBOX_HTTP_PORT: '0',
    LOG_LEVEL: 'info',
  };
  let relay = new Relay(relayEnv);
  const runEvents = { applied: 0, duplicates: 0 };
  const isThisRun = (invoiceId: unknown) => typeof invoiceId === 'string' && invoiceId.startsWith(`inv_${run}_`);
  const consumer = createIdempotentConsumer<{ invoice_id: string; customer_id: string; paid_at: Date }>({
    kafka,
    groupId,
    topics: [topic],
    pool,
    handler: extendEntitlement(entitlements),
    format: 'avro',
    registry: avroRegistryFromEnv(connectionEnv),
    fromBeginning: true,
    // Counts this run's events only (the topic keeps earlier runs').
    onOutcome: (outcome, event) => {
      if (!isThisRun(event.payload.invoice_id)) return;
      if (outcome === 'applied') runEvents.applied += 1;
      else runEvents.duplicates += 1;
    },
  });
  const consumerStarted = { value: false };
  try {
    await createBillingSchema(pool, billing);
    await createEntitlementSchema(pool, entitlements);
    await ensureConsumedEventsTable(pool);
    await setup({ database: databaseAccess(services.databaseUrl), outboxes: [{ table: { schema: 'public', name: outboxTable } }], publication: slot, slot });
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 1 }], waitForLeaders: true });
    await admin.disconnect();
    say(`setup: tables ${billing.invoices}, ${entitlements.entitlements}, consumed_events; outbox ${outboxTable} with publication and slot ${slot}`);

    say(`relay: started (pid ${await relay.start()}), Avro through the schema registry, to topic ${topic}`);
    await consumer.start();
    consumerStarted.value = true;
    say(`entitlements: consuming ${topic} as group ${groupId} (dedup in consumed_events)`);

    const outbox = createOutboxWriter({ table: `public.${outboxTable}`, schemas: await loadOutboxSchemas(SCHEMAS_DIR) });
    const invoices = Array.from({ length: invoiceCount }, (_, i) => ({ id: `inv_${run}_${i + 1}`, customerId: `cus_${run}_${(i % customerCount) + 1}`, amountCents: 1_900 }));
    await createInvoices(pool, billing, invoices);
    const half = Math.ceil(invoiceCount / 2);
    const pay = async (from: number, to: number) => {
      for (let i = from; i < to; i += 1) {
        const outcome = await payInvoice(pool, billing, outbox, invoices[i]!.id, `pay_${run}_${i + 1}`);
        if (outcome !== 'paid') throw new Error(`invoice ${invoices[i]!.id} was already paid`);
      }
    };
    await pay(0, half);
    say(`billing: paid invoices 1-${half} (each: UPDATE the invoice + write invoice.paid, one transaction)`);
    await waitFor(`the first ${half} entitlements`, () => runEvents.applied >= half, relay);

    await relay.kill9();
    say('relay: killed with SIGKILL mid-stream');
    await pay(half, invoiceCount);
    say(`billing: paid invoices ${half + 1}-${invoiceCount} while the relay was down`);
    relay = new Relay(relayEnv);
    say(`relay: restarted (pid ${await relay.start()}), resuming from the slot's confirmed position`);

    let retried = 0;
    for (const invoice of invoices.slice(0, 3)) if ((await payInvoice(pool, billing, outbox, invoice.id, `pay_${run}_retry`)) === 'already-paid') retried += 1;
    say(`billing: retried ${Math.min(3, invoiceCount)} payments (as after a lost COMMIT acknowledgement): ${retried} refused by the event_id primary key, no second event`);

    await waitFor(`all ${invoiceCount} entitlements`, () => runEvents.applied >= invoiceCount, relay);
    await sleep(1_000);
    const afterCrash = runEvents.duplicates;
    say(`entitlements: ${runEvents.applied} invoice.paid events applied, ${afterCrash} duplicates from the relay restart skipped`);

    const replay = await runCli(['replay', '--since', started.toISOString(), '--event-type', 'invoice.paid'], relayEnv);
    say(`replay: outbox-relay replay ${replay.trim().replace(/^replayed/, 're-published')} (same event ids)`);
    await waitFor('the replayed events', () => runEvents.duplicates >= afterCrash + invoiceCount, relay);
    say(`entitlements: ${runEvents.duplicates - afterCrash} replayed duplicates skipped`);

    const { rows } = await pool.query<{ extensions: number; customers: number; days_ok: boolean }>(
      `SELECT count(*)::int AS extensions,
              count(DISTINCT x.customer_id)::int AS customers,
              bool_and(e.extensions * $2 = (SELECT count(*) FROM ${entitlements.extensions} y WHERE y.customer_id = x.customer_id) * $2) AS days_ok
         FROM ${entitlements.extensions} x JOIN ${entitlements.entitlements} e USING (customer_id)
        WHERE x.invoice_id LIKE $1`,
      [`inv_${run}_%`, EXTENSION_DAYS],
    );
    const { rows: perInvoice } = await pool.query<{ twice: number }>(
      `SELECT count(*)::int AS twice FROM (SELECT invoice_id FROM ${entitlements.extensions} WHERE invoice_id LIKE $1 GROUP BY invoice_id HAVING count(*) > 1) d`,
      [`inv_${run}_%`],
    );
    const result = rows[0]!;
    const ok = result.extensions === invoiceCount && perInvoice[0]!.twice === 0 && result.days_ok;
    say('');
    say(`${ok ? 'OK' : 'FAILED'}: ${invoiceCount} invoices paid -> ${result.extensions} entitlement extensions (${result.customers} customers, +${EXTENSION_DAYS} days each time); duplicates skipped: ${runEvents.duplicates}`);
    say(`  look: psql ${redact(services.databaseUrl)} -c "SELECT * FROM ${entitlements.entitlements} WHERE customer_id LIKE 'cus_${run}_%'"`);
    return ok;
  } finally {
    if (consumerStarted.value) await consumer.stop().catch(() => undefined);
    await relay.stop().catch(() => undefined);
    // The slot holds WAL while no relay reads it: a demo leaves none behind (the next run sets up again).
    await pool.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active', [slot]).catch(() => undefined);
    await pool.query(`DROP PUBLICATION IF EXISTS ${pg.escapeIdentifier(slot)}`).catch(() => undefined);
    await pool.end();
  }
}

async function waitFor(what: string, done: () => boolean, relay: Relay, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000}s waiting for ${what}; the relay's last lines:\n${relay.tail()}`);
    await sleep(100);
  }
}

function runCli(args: readonly string[], env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', ...env, LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    child.stderr!.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    child.once('exit', (code) => (code === 0 ? resolve(out.split('\n').filter((line) => line.startsWith('replayed')).join('')) : reject(new Error(`outbox-relay ${args.join(' ')} exited ${code}:\n${out}`))));
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function positive(raw: string, name: string): number {
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < 1) throw new Error(`${name}=${JSON.stringify(raw)}: expected a positive integer`);
  return value;
}

function redact(url: string): string {
  return url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
}

async function main(): Promise<void> {
  const ok = await runDemo(await demoServices());
  process.exitCode = ok ? 0 : 1;
}

main().catch((error: unknown) => {
  process.stderr.write(`demo failed: ${(error as Error).message}\n`);
  process.exitCode = 1;
});

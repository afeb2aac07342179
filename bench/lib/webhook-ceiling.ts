/**
 * The ceiling of `npm run bench:webhooks`: the deliveries a case is owed, sent by a plain loop
 * with the webhooks command's own client and signing (WebhookSender and webhookHeaders, loaded
 * from dist/ as `outbox-relay webhooks` loads them), at the same concurrency, to the same
 * receiver, and nothing else: no Kafka, no store, no retry bookkeeping. What it reaches is the
 * most the HTTP side allows on this machine.
 *
 * Reads the case's events (in the order they were recorded) and endpoints from the webhook
 * schema first, outside the timing, each event's customer from its body (`customerFrom`, a rule
 * on the payload: the bench writes the customer in the header the webhooks process reads and in
 * the payload alike). In the loop, each event's endpoints are found as the intake finds them
 * (its customer's by a map lookup in the command's SubscriptionIndex, and the platform-wide
 * ones), each (event, endpoint) sent. Before the timing it checks that these pairs are exactly
 * the deliveries the webhooks process recorded (`mismatched` counts those that are not, both
 * ways). Then prints one JSON line: the time and CPU (user + system) of the loop alone.
 *
 * Its one argument is JSON: CeilingArgs.
 */
import pg from 'pg';
import { loadBenchClient, loadRouting, loadTargets } from './webhook-client.js';

export interface CeilingArgs {
  readonly databaseUrl: string;
  /** The case's webhook schema (OUTBOX_WEBHOOK_SCHEMA of its webhooks run). */
  readonly schema: string;
  /** OUTBOX_WEBHOOK_CONCURRENCY of the webhooks run: loops in flight, and the client's connections. */
  readonly concurrency: number;
  /** The built relay's dist/. */
  readonly dist: string;
  /** The customer rule read on each event's payload (OUTBOX_WEBHOOK_CUSTOMER_FROM's syntax, a payload: rule). */
  readonly customerFrom: string;
}

const { databaseUrl, dist, concurrency, customerFrom, ...args } = JSON.parse(process.argv[2] ?? '{}') as CeilingArgs;
const schema = pg.escapeIdentifier(args.schema);
const { sender, request } = await loadBenchClient(dist, concurrency);

const db = new pg.Client({ connectionString: databaseUrl, application_name: 'bench-webhook-ceiling' });
await db.connect();
const endpoints = new Map((await loadTargets(db, schema)).map((target) => [target.id, target]));
const routing = await loadRouting(dist, db, args.schema, customerFrom);
const events = (
  await db.query<{ event_id: string; event_type: string; aggregate_id: string | null; body: string; produced_ms: number }>(
    `SELECT event_id, event_type, aggregate_id, body, extract(epoch FROM produced_at)::float8 * 1000 AS produced_ms FROM ${schema}.events ORDER BY recorded_at, event_id`,
  )
).rows.map((row) => ({ eventId: row.event_id, eventType: row.event_type, body: row.body, producedMs: row.produced_ms, customerId: routing.customerOf({ headers: {}, payload: (JSON.parse(row.body) as { data: unknown }).data, aggregateId: row.aggregate_id }) }));
const recorded = new Set((await db.query<{ pair: string }>(`SELECT event_id || ' ' || endpoint_id AS pair FROM ${schema}.deliveries`)).rows.map((row) => row.pair));
await db.end();

// Outside the timing: the pairs the loop will send against those the webhooks process recorded.
let owed = 0;
let mismatched = 0;
for (const event of events) {
  for (const endpointId of routing.index.endpointsFor(event.customerId, event.eventType, event.producedMs)) {
    owed += 1;
    if (!recorded.has(`${event.eventId} ${endpointId}`)) mismatched += 1;
  }
}
mismatched += Math.max(0, recorded.size - (owed - mismatched));

/** The (event, endpoint) pairs in order, each event's endpoints found when the loop reaches it. */
function* pairs(): Generator<{ readonly event: (typeof events)[number]; readonly endpointId: string }> {
  for (const event of events) for (const endpointId of routing.index.endpointsFor(event.customerId, event.eventType, event.producedMs)) yield { event, endpointId };
}
const queue = pairs();

let delivered = 0;
let failed = 0;
let firstError: string | null = null;
/** One of `concurrency` loops: the next delivery, signed as the dispatcher signs an attempt, sent, counted. */
async function worker(): Promise<void> {
  for (let next = queue.next(); !next.done; next = queue.next()) {
    const { event, endpointId } = next.value;
    const result = await sender.send(request(endpoints.get(endpointId)!, event.eventId, event.body));
    if (result.outcome === 'delivered') delivered += 1;
    else {
      failed += 1;
      firstError ??= result.error;
    }
  }
}

const cpuBefore = process.cpuUsage();
const started = performance.now();
await Promise.all(Array.from({ length: concurrency }, worker));
const seconds = (performance.now() - started) / 1000;
const cpu = process.cpuUsage(cpuBefore);
process.stdout.write(`${JSON.stringify({ done: true, deliveries: owed, mismatched, delivered, failed, firstError, seconds, cpuSeconds: (cpu.user + cpu.system) / 1e6 })}\n`);
await sender.close();

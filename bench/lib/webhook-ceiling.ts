/**
 * The ceiling of `npm run bench:webhooks`: the deliveries a case recorded, sent by a plain loop
 * with the webhooks command's own client and signing (WebhookSender and webhookHeaders, loaded
 * from dist/ as `outbox-relay webhooks` loads them), at the same concurrency, to the same
 * receiver, and nothing else: no Kafka, no store, no retry bookkeeping. What it reaches is the
 * most the HTTP side allows on this machine.
 *
 * Reads the case's deliveries (in id order, as the dispatcher claims them), bodies and endpoints
 * from the webhook schema first, outside the timing; then prints one JSON line: the time and
 * CPU (user + system) of the loop alone.
 *
 * Its one argument is JSON: CeilingArgs.
 */
import pg from 'pg';
import { loadBenchClient, loadTargets } from './webhook-client.js';

export interface CeilingArgs {
  readonly databaseUrl: string;
  /** The case's webhook schema (OUTBOX_WEBHOOK_SCHEMA of its webhooks run). */
  readonly schema: string;
  /** OUTBOX_WEBHOOK_CONCURRENCY of the webhooks run: loops in flight, and the client's connections. */
  readonly concurrency: number;
  /** The built relay's dist/. */
  readonly dist: string;
}

const { databaseUrl, dist, concurrency, ...args } = JSON.parse(process.argv[2] ?? '{}') as CeilingArgs;
const schema = pg.escapeIdentifier(args.schema);
const { sender, request } = await loadBenchClient(dist, concurrency);

const db = new pg.Client({ connectionString: databaseUrl, application_name: 'bench-webhook-ceiling' });
await db.connect();
const endpoints = new Map((await loadTargets(db, schema)).map((target) => [target.id, target]));
const bodies = new Map<string, string>();
for (const row of (await db.query(`SELECT event_id, body FROM ${schema}.events`)).rows) bodies.set(row.event_id, row.body);
const deliveries = (await db.query<{ event_id: string; endpoint_id: string }>(`SELECT event_id, endpoint_id FROM ${schema}.deliveries ORDER BY id`)).rows;
await db.end();

let next = 0;
let delivered = 0;
let failed = 0;
let firstError: string | null = null;
/** One of `concurrency` loops: the next delivery, signed as the dispatcher signs an attempt, sent, counted. */
async function worker(): Promise<void> {
  for (let i = next++; i < deliveries.length; i = next++) {
    const { event_id: eventId, endpoint_id: endpointId } = deliveries[i]!;
    const result = await sender.send(request(endpoints.get(endpointId)!, eventId, bodies.get(eventId)!));
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
process.stdout.write(`${JSON.stringify({ done: true, deliveries: deliveries.length, delivered, failed, firstError, seconds, cpuSeconds: (cpu.user + cpu.system) / 1e6 })}\n`);
await sender.close();

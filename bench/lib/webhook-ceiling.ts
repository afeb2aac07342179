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
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import type * as Guard from '../../src/webhooks/address-guard.js';
import type * as EndpointStore from '../../src/webhooks/endpoint-store.js';
import type * as Sender from '../../src/webhooks/http-sender.js';
import type * as Signature from '../../src/webhooks/signature.js';

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
const load = <M>(path: string): Promise<M> => import(pathToFileURL(join(dist, path)).href) as Promise<M>;
const { WebhookSender } = await load<typeof Sender>('webhooks/http-sender.js');
const { webhookHeaders } = await load<typeof Signature>('webhooks/signature.js');
const { signingSecrets } = await load<typeof EndpointStore>('webhooks/endpoint-store.js');
const { AddressGuard } = await load<typeof Guard>('webhooks/address-guard.js');
const version = (JSON.parse(readFileSync(join(dist, '..', 'package.json'), 'utf8')) as { version: string }).version;

interface Target {
  readonly url: string;
  readonly secrets: readonly EndpointStore.SigningSecret[];
  readonly headers: Readonly<Record<string, string>>;
}

const db = new pg.Client({ connectionString: databaseUrl, application_name: 'bench-webhook-ceiling' });
await db.connect();
const endpoints = new Map<string, Target>();
for (const row of (await db.query(`SELECT id, url, secrets, headers FROM ${schema}.endpoints`)).rows) {
  endpoints.set(row.id, { url: row.url, headers: row.headers, secrets: (row.secrets as { secret: string; expires_at: string | null }[]).map((s) => ({ secret: s.secret, expiresAt: s.expires_at })) });
}
const bodies = new Map<string, string>();
for (const row of (await db.query(`SELECT event_id, body FROM ${schema}.events`)).rows) bodies.set(row.event_id, row.body);
const deliveries = (await db.query<{ event_id: string; endpoint_id: string }>(`SELECT event_id, endpoint_id FROM ${schema}.deliveries ORDER BY id`)).rows;
await db.end();

// As src/commands/webhooks.ts builds it, with the defaults of OUTBOX_WEBHOOK_CONNECT_TIMEOUT,
// OUTBOX_WEBHOOK_TIMEOUT and OUTBOX_WEBHOOK_RESPONSE_SNIPPET (the bench's webhooks runs set none).
const sender = new WebhookSender({
  connectTimeoutMs: 5_000,
  timeoutMs: 15_000,
  responseSnippetBytes: 1_024,
  guard: new AddressGuard(['127.0.0.1']),
  connectionsPerOrigin: concurrency,
  userAgent: `outbox-relay/${version}`,
});

let next = 0;
let delivered = 0;
let failed = 0;
let firstError: string | null = null;
/** One of `concurrency` loops: the next delivery, signed as the dispatcher signs an attempt, sent, counted. */
async function worker(): Promise<void> {
  for (let i = next++; i < deliveries.length; i = next++) {
    const { event_id: eventId, endpoint_id: endpointId } = deliveries[i]!;
    const endpoint = endpoints.get(endpointId)!;
    const body = bodies.get(eventId)!;
    const startedAt = new Date();
    const headers = { ...endpoint.headers, ...webhookHeaders({ secrets: signingSecrets(endpoint.secrets, startedAt), webhookId: eventId, timestampSeconds: Math.floor(startedAt.getTime() / 1000), body }) };
    const result = await sender.send({ url: endpoint.url, headers, body });
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

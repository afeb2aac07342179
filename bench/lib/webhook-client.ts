/**
 * What the ceiling (webhook-ceiling.ts) and the durable loop (webhook-durable-loop.ts) send with:
 * the webhooks command's own client and signing, loaded from the built relay's dist/ as
 * `outbox-relay webhooks` loads them, and a case's endpoints as targets.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type pg from 'pg';
import type * as Guard from '../../src/webhooks/address-guard.js';
import type * as CustomerRule from '../../src/webhooks/customer-rule.js';
import type * as EndpointStore from '../../src/webhooks/endpoint-store.js';
import type * as EventTypes from '../../src/webhooks/event-types.js';
import type * as Sender from '../../src/webhooks/http-sender.js';
import type * as Signature from '../../src/webhooks/signature.js';
import type * as Tables from '../../src/webhooks/webhook-tables.js';

export interface Target {
  readonly id: string;
  readonly url: string;
  readonly secrets: readonly EndpointStore.SigningSecret[];
  readonly headers: Readonly<Record<string, string>>;
}

export interface BenchClient {
  readonly sender: Sender.WebhookSender;
  /** The request of one attempt to `target`, signed now as the dispatcher signs one. */
  request(target: Target, eventId: string, body: string): Sender.WebhookRequest;
}

/** Every endpoint of the webhook schema `schema` (an escaped identifier), in id order. */
export async function loadTargets(db: pg.ClientBase | pg.Pool, schema: string): Promise<Target[]> {
  const { rows } = await db.query(`SELECT id, url, secrets, headers FROM ${schema}.endpoints ORDER BY id`);
  return rows.map((row) => ({ id: row.id, url: row.url, headers: row.headers, secrets: (row.secrets as { secret: string; expires_at: string | null }[]).map((s) => ({ secret: s.secret, expiresAt: s.expires_at })) }));
}

/** Whose endpoints an event is owed to, as the intake finds them: the webhooks command's own code, from dist/. */
export interface Routing {
  /** The subscriptions of the schema's endpoints, indexed by customer (a map lookup per event) as the intake indexes them. */
  readonly index: EventTypes.SubscriptionIndex;
  /** The event's customer by the rule given (OUTBOX_WEBHOOK_CUSTOMER_FROM's syntax), or null. */
  customerOf(source: CustomerRule.CustomerSource): string | null;
}

/**
 * The routing of the webhook schema `schema` (its name, not escaped): its endpoints loaded by
 * loadSubscribers into a SubscriptionIndex, and the customer rule `customerFrom` parsed, as
 * `outbox-relay webhooks` does both, so that a loop of the bench is owed the same (event,
 * endpoint) pairs as the process.
 */
export async function loadRouting(dist: string, db: pg.ClientBase, schema: string, customerFrom: string): Promise<Routing> {
  const load = <M>(path: string): Promise<M> => import(pathToFileURL(join(dist, path)).href) as Promise<M>;
  const { loadSubscribers } = await load<typeof EndpointStore>('webhooks/endpoint-store.js');
  const { WebhookTables } = await load<typeof Tables>('webhooks/webhook-tables.js');
  const { SubscriptionIndex } = await load<typeof EventTypes>('webhooks/event-types.js');
  const { parseCustomerRule, customerOf } = await load<typeof CustomerRule>('webhooks/customer-rule.js');
  const { subscribers, unassigned } = await loadSubscribers(db, new WebhookTables(schema));
  if (unassigned.length > 0) throw new Error(`${unassigned.length} endpoints of ${schema} belong to no customer (e.g. ${unassigned[0]}): the webhooks process would not start`);
  const rule = parseCustomerRule(customerFrom);
  return { index: new SubscriptionIndex(subscribers), customerOf: (source) => customerOf(rule, source).customerId };
}

/**
 * The client as src/commands/webhooks.ts builds it, with the defaults of
 * OUTBOX_WEBHOOK_CONNECT_TIMEOUT, OUTBOX_WEBHOOK_TIMEOUT and OUTBOX_WEBHOOK_RESPONSE_SNIPPET (the
 * bench's webhooks runs set none), `concurrency` connections per origin.
 */
export async function loadBenchClient(dist: string, concurrency: number): Promise<BenchClient> {
  const load = <M>(path: string): Promise<M> => import(pathToFileURL(join(dist, path)).href) as Promise<M>;
  const { WebhookSender } = await load<typeof Sender>('webhooks/http-sender.js');
  const { webhookHeaders } = await load<typeof Signature>('webhooks/signature.js');
  const { signingSecrets } = await load<typeof EndpointStore>('webhooks/endpoint-store.js');
  const { AddressGuard } = await load<typeof Guard>('webhooks/address-guard.js');
  const version = (JSON.parse(readFileSync(join(dist, '..', 'package.json'), 'utf8')) as { version: string }).version;
  const sender = new WebhookSender({ connectTimeoutMs: 5_000, timeoutMs: 15_000, responseSnippetBytes: 1_024, guard: new AddressGuard(['127.0.0.1']), connectionsPerOrigin: concurrency, userAgent: `outbox-relay/${version}` });
  return {
    sender,
    request(target, eventId, body) {
      const now = new Date();
      return { url: target.url, body, headers: { ...target.headers, ...webhookHeaders({ secrets: signingSecrets(target.secrets, now), webhookId: eventId, timestampSeconds: Math.floor(now.getTime() / 1000), body }) } };
    },
  };
}

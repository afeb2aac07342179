import { COMMANDS } from '../config/commands.js';
import type { DatabaseAccess } from '../pg-connection.js';
import { databaseAccess } from '../pg-connection.js';
import type { Secret } from '../security/secret.js';
import { AddressGuard } from '../webhooks/address-guard.js';
import { customerIdProblem } from '../webhooks/customer-rule.js';
import { DeliveryQueries, type ReplaySelection } from '../webhooks/delivery-queries.js';
import { DeliveryStore } from '../webhooks/delivery-store.js';
import { audienceOf, ENDPOINT_DEFAULTS, EndpointStore, type Endpoint, type EndpointSettings } from '../webhooks/endpoint-store.js';
import { listWithoutCustomer, replayWithoutCustomer } from '../webhooks/without-customer.js';
import { createWebhookTables, requireWebhookTables, webhookPool, WebhookTables } from '../webhooks/webhook-tables.js';
import { command, EXIT } from './command.js';
import type pg from 'pg';

/*
 * The operator's side of webhooks: tables, endpoints, deliveries, attempts, replay. Each
 * command opens a small pool on the webhook schema, does one thing, and prints what it did.
 */

interface StoreAccess {
  readonly databaseUrl: Secret;
  readonly databasePassword: Secret | null;
  readonly webhookSchema: string;
}

async function withStore<T>(config: StoreAccess, work: (pool: pg.Pool, tables: WebhookTables) => Promise<T>, options: { readonly create?: boolean } = {}): Promise<T> {
  const database: DatabaseAccess = databaseAccess(config.databaseUrl, config.databasePassword);
  const pool = webhookPool(database, 'outbox-relay-webhooks-admin', 2);
  const tables = new WebhookTables(config.webhookSchema);
  try {
    if (options.create) await createWebhookTables(pool, tables);
    else await requireWebhookTables(pool, tables);
    return await work(pool, tables);
  } finally {
    await pool.end();
  }
}

function print(json: boolean, value: unknown, text: string): void {
  process.stdout.write(json ? `${JSON.stringify(value, null, 2)}\n` : text);
}

export const webhooksSetupCommand = command(COMMANDS['webhooks setup'], (config) =>
  withStore(
    config,
    async (pool, tables) => {
      process.stdout.write(`webhook tables ready in schema ${tables.schema}: endpoints, events, events_without_customer, deliveries, attempts, all_attempts\n`);
      const endpoints = await new EndpointStore(pool, tables, new AddressGuard([])).list();
      const unassigned = endpoints.filter((e) => e.customerId === null && !e.platformWide);
      if (unassigned.length > 0) {
        // An upgrade from before customers: the webhooks process will not start until each is assigned.
        process.stdout.write(
          `${unassigned.length} endpoint(s) belong to no customer, and the webhooks process refuses to start (WEBHOOK_ENDPOINTS_UNASSIGNED) until each is assigned:\n` +
            unassigned.map((e) => `  outbox-relay webhooks endpoint update --id ${e.id} --customer <customer id>   # or --platform-wide; ${e.url}${e.description ? ` (${e.description})` : ''}\n`).join(''),
        );
      }
      // Added before the id "null" was refused (it is how a JSON null arrives: no event carries it as a customer).
      const stranded = endpoints.filter((e) => e.customerId !== null && customerIdProblem(e.customerId) !== null);
      if (stranded.length > 0) {
        process.stdout.write(
          `${stranded.length} endpoint(s) have a customer id no event can carry, and receive nothing: add an endpoint for the right customer (--secret keeps the receiver's secret) and disable each:\n` +
            stranded.map((e) => `  outbox-relay webhooks endpoint disable --id ${e.id}   # customer "${e.customerId}"; ${e.url}\n`).join(''),
        );
      }
      return EXIT.ok;
    },
    { create: true },
  ),
);

export const endpointAddCommand = command(COMMANDS['webhooks endpoint add'], (config) =>
  withStore(config, async (pool, tables) => {
    const store = new EndpointStore(pool, tables, new AddressGuard(config.webhookAllowAddresses ?? []));
    const settings: EndpointSettings = {
      ...ENDPOINT_DEFAULTS,
      customerId: config.customer ?? null,
      platformWide: config.platformWide,
      url: config.url!,
      eventTypes: config.eventTypes!,
      ordered: config.ordered,
      ...(config.headers !== undefined && { headers: config.headers }),
      ...(config.maxInFlight !== undefined && { maxInFlight: config.maxInFlight }),
      ...(config.rateLimit !== undefined && { rateLimit: config.rateLimit === 0 ? null : config.rateLimit }),
      ...(config.description !== undefined && { description: config.description }),
      ...(config.deliverFrom !== undefined && { deliverFrom: config.deliverFrom }),
    };
    const endpoint = await store.add(settings, { ...(config.id !== undefined && { id: config.id }), ...(config.secret !== undefined && { secret: config.secret }) });
    print(config.json, { ...shown(endpoint), secret: endpoint.secrets[0]!.secret }, `added endpoint ${endpoint.id} of ${audienceOf(endpoint)} -> ${endpoint.url} (${endpoint.eventTypes.join(', ')}, ${eventsFrom(endpoint)})\nsigning secret (give it to the receiver; \`endpoint rotate-secret\` replaces it): ${endpoint.secrets[0]!.secret}\n`);
    return EXIT.ok;
  }),
);

export const endpointListCommand = command(COMMANDS['webhooks endpoint list'], (config) =>
  withStore(config, async (pool, tables) => {
    const endpoints = await new EndpointStore(pool, tables, new AddressGuard([])).list({ ...(config.customer !== undefined && { customerId: config.customer }) });
    const rows = endpoints.map((e) => [e.id, e.platformWide ? 'platform-wide' : (e.customerId ?? 'NONE: assign one'), state(e), e.url, e.eventTypes.join(','), e.deliverFrom?.toISOString() ?? 'all', `${e.maxInFlight}${e.rateLimit ? ` ${e.rateLimit}/s` : ''}${e.ordered ? ' ordered' : ''}`]);
    print(config.json, endpoints.map(shown), endpoints.length === 0 ? (config.customer !== undefined ? `customer ${config.customer} has no endpoints\n` : 'no endpoints; add one with `outbox-relay webhooks endpoint add --url ... --event-types ... --customer ...`\n') : table([['ID', 'CUSTOMER', 'STATE', 'URL', 'EVENT TYPES', 'EVENTS FROM', 'LIMITS'], ...rows]));
    return EXIT.ok;
  }),
);

export const endpointUpdateCommand = command(COMMANDS['webhooks endpoint update'], (config) =>
  withStore(config, async (pool, tables) => {
    const store = new EndpointStore(pool, tables, new AddressGuard(config.webhookAllowAddresses ?? []));
    const endpoint = await store.update(config.id!, {
      ...(config.url !== undefined && { url: config.url }),
      ...(config.eventTypes !== undefined && { eventTypes: config.eventTypes }),
      ...(config.headers !== undefined && { headers: config.headers }),
      ...(config.maxInFlight !== undefined && { maxInFlight: config.maxInFlight }),
      ...(config.rateLimit !== undefined && { rateLimit: config.rateLimit === 0 ? null : config.rateLimit }),
      ...(config.ordered !== undefined && { ordered: config.ordered }),
      ...(config.description !== undefined && { description: config.description }),
      ...(config.deliverFrom !== undefined && { deliverFrom: config.deliverFrom }),
      ...(config.customer !== undefined && { customerId: config.customer }),
      ...(config.platformWide && { platformWide: true }),
    });
    print(config.json, shown(endpoint), `updated endpoint ${endpoint.id} of ${audienceOf(endpoint)} -> ${endpoint.url} (${endpoint.eventTypes.join(', ')}, ${eventsFrom(endpoint)})\n`);
    return EXIT.ok;
  }),
);

export const endpointDisableCommand = command(COMMANDS['webhooks endpoint disable'], (config) =>
  withStore(config, async (pool, tables) => {
    const endpoint = await new EndpointStore(pool, tables, new AddressGuard([])).disable(config.id!, config.reason ?? 'disabled by an operator');
    process.stdout.write(`disabled endpoint ${endpoint.id}: nothing is sent to it; its deliveries are recorded and held until \`webhooks endpoint enable --id ${endpoint.id}\`\n`);
    return EXIT.ok;
  }),
);

export const endpointEnableCommand = command(COMMANDS['webhooks endpoint enable'], (config) =>
  withStore(config, async (pool, tables) => {
    const { endpoint, released } = await new EndpointStore(pool, tables, new AddressGuard([])).enable(config.id!);
    process.stdout.write(`enabled endpoint ${endpoint.id}; ${released} held deliveries are due now\n`);
    return EXIT.ok;
  }),
);

const DEFAULT_KEEP_OLD_MS = 86_400_000;

export const endpointRotateSecretCommand = command(COMMANDS['webhooks endpoint rotate-secret'], (config) =>
  withStore(config, async (pool, tables) => {
    const keepOldMs = config.keepOld ?? DEFAULT_KEEP_OLD_MS;
    const { endpoint, secret } = await new EndpointStore(pool, tables, new AddressGuard([])).rotateSecret(config.id!, keepOldMs, ...(config.secret !== undefined ? [config.secret] : []));
    process.stdout.write(`endpoint ${endpoint.id}: new signing secret ${secret}\nevery request carries a signature by it and by the previous secrets until ${new Date(Date.now() + keepOldMs).toISOString()}\n`);
    return EXIT.ok;
  }),
);

export const deliveriesListCommand = command(COMMANDS['webhooks deliveries list'], (config) =>
  withStore(config, async (pool, tables) => {
    const deliveries = await new DeliveryQueries(pool, tables).list({
      ...(config.customer !== undefined && { customerId: config.customer }),
      ...(config.endpoint !== undefined && { endpointId: config.endpoint }),
      ...(config.eventId !== undefined && { eventId: config.eventId }),
      ...(config.status !== undefined && { status: config.status }),
      ...(config.since !== undefined && { since: config.since }),
      limit: config.limit ?? 50,
    });
    const rows = deliveries.map((d) => [d.id, d.status, d.endpointId, d.eventId, d.eventType, String(d.attempts), d.createdAt.toISOString(), d.status === 'pending' ? `next ${d.nextAttemptAt?.toISOString()}` : (d.finishedAt?.toISOString() ?? ''), d.lastError ?? '']);
    print(config.json, deliveries, deliveries.length === 0 ? 'no deliveries match\n' : table([['ID', 'STATUS', 'ENDPOINT', 'EVENT', 'TYPE', 'ATTEMPTS', 'RECORDED', 'NEXT / FINISHED', 'LAST ERROR'], ...rows]));
    return EXIT.ok;
  }),
);

export const attemptsCommand = command(COMMANDS['webhooks attempts'], (config) =>
  withStore(config, async (pool, tables) => {
    const attempts = await new DeliveryQueries(pool, tables).attempts(config.delivery!);
    const rows = attempts.map((a) => [String(a.attempt), a.startedAt.toISOString(), `${a.latencyMs}ms`, a.outcome, a.statusCode === null ? '' : String(a.statusCode), a.error ?? '', (a.response ?? '').replace(/\s+/g, ' ').slice(0, 80)]);
    print(config.json, attempts, attempts.length === 0 ? `delivery ${config.delivery} has no recorded attempt yet\n` : table([['#', 'STARTED', 'LATENCY', 'OUTCOME', 'STATUS', 'ERROR', 'RESPONSE'], ...rows]));
    return EXIT.ok;
  }),
);

export const replayCommand = command(COMMANDS['webhooks replay'], (config) =>
  withStore(config, async (pool, tables) => {
    if (config.withoutCustomer) {
      const finder = config.customer !== undefined ? { eventId: config.eventId!, customerId: config.customer } : { rule: config.webhookCustomerFrom! };
      const replayed = await replayWithoutCustomer(pool, tables, new DeliveryStore(pool, tables), finder, config.eventId ?? null, new Date());
      process.stdout.write(
        `${replayed.found} events found their customer; ${replayed.deliveries} deliveries to their customers' endpoints are due now\n` +
          (replayed.stillWithoutCount === 0 ? '' : `${replayed.stillWithoutCount} still have no customer:\n${replayed.stillWithout.map((e) => `  ${e.eventId}: ${e.reason}\n`).join('')}`),
      );
      return EXIT.ok;
    }
    const selection: ReplaySelection =
      config.delivery !== undefined
        ? { deliveryId: config.delivery }
        : config.eventId !== undefined
          ? { eventId: config.eventId, ...(config.endpoint !== undefined && { endpointId: config.endpoint }) }
          : config.customer !== undefined
            ? { customerId: config.customer, since: config.since! }
            : { endpointId: config.endpoint!, since: config.since! };
    const replayed = await new DeliveryQueries(pool, tables).replay(selection, new Date());
    process.stdout.write(`${replayed} deliveries are due again (same webhook-id, a fresh retry schedule); pending ones were left on their way\n`);
    return EXIT.ok;
  }),
);

export const withoutCustomerCommand = command(COMMANDS['webhooks without-customer'], (config) =>
  withStore(config, async (pool, tables) => {
    const events = await listWithoutCustomer(pool, tables, config.limit ?? 50);
    const rows = events.map((e) => [e.eventId, e.eventType, e.aggregateId ?? '', e.producedAt.toISOString(), e.reason]);
    print(config.json, events, events.length === 0 ? 'no events without a customer\n' : table([['EVENT', 'TYPE', 'AGGREGATE', 'PRODUCED', 'WHY'], ...rows]));
    return EXIT.ok;
  }),
);

/** An endpoint as listed: secrets shown by their last characters only. */
function shown(endpoint: Endpoint): Omit<Endpoint, 'secrets'> & { readonly secrets: readonly { readonly secret: string; readonly expiresAt: string | null }[] } {
  return { ...endpoint, secrets: endpoint.secrets.map((s) => ({ secret: `whsec_…${s.secret.slice(-4)}`, expiresAt: s.expiresAt })) };
}

function eventsFrom(endpoint: Endpoint): string {
  return endpoint.deliverFrom ? `events produced from ${endpoint.deliverFrom.toISOString()} on` : 'every event the topics hold';
}

function state(endpoint: Endpoint): string {
  if (endpoint.disabledAt) return `disabled ${endpoint.disabledAt.toISOString()}: ${endpoint.disabledReason ?? ''}`;
  if (endpoint.pausedUntil && endpoint.pausedUntil > new Date()) return `paused until ${endpoint.pausedUntil.toISOString()}${endpoint.consecutiveFailures > 0 ? ` (${endpoint.consecutiveFailures} failures in a row)` : ''}`;
  if (endpoint.failingSince) return `failing since ${endpoint.failingSince.toISOString()}`;
  return 'enabled';
}

function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  return rows.map((row) => row.map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column]!))).join('  ').trimEnd()).join('\n') + '\n';
}

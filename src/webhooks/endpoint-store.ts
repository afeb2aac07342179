import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { RelayError } from '../errors.js';
import { inTransaction } from '../pg-transaction.js';
import type { AddressGuard } from './address-guard.js';
import { customerIdProblem } from './customer-rule.js';
import { eventTypeProblem, type Subscriber } from './event-types.js';
import { generateSecret, secretProblem } from './signature.js';
import type { WebhookTables } from './webhook-tables.js';

export interface SigningSecret {
  readonly secret: string;
  /** null: current. A time: retired by a rotation, still signing until then. */
  readonly expiresAt: string | null;
}

/** The endpoints table's `secrets` column as the sender signs with it. */
export function signingSecretsOf(column: unknown): SigningSecret[] {
  return (column as { secret: string; expires_at: string | null }[]).map((s) => ({ secret: s.secret, expiresAt: s.expires_at }));
}

/** What a request to an endpoint needs. */
export interface EndpointAddress {
  readonly url: string;
  readonly secrets: readonly SigningSecret[];
  readonly headers: Readonly<Record<string, string>>;
}

/** An endpoint as the webhooks process loaded it with its subscriptions (loadSubscribers): what a first attempt sent before its delivery is recorded needs. */
export interface LoadedEndpoint extends EndpointAddress {
  readonly maxInFlight: number;
  /** Neither ordered nor rate-limited: its first attempts may go before their deliveries are recorded. */
  readonly sendsFirst: boolean;
}

/** The endpoints as loaded, and the subscriptions' version they were loaded at (a change to any of what they hold moves it: sql/004_webhooks.sql). */
export interface LoadedEndpoints {
  readonly version: string;
  get(endpointId: string): LoadedEndpoint | undefined;
}

/** What the operator sets; everything else is the dispatcher's. */
export interface EndpointSettings {
  readonly url: string;
  readonly eventTypes: readonly string[];
  readonly headers: Readonly<Record<string, string>>;
  readonly maxInFlight: number;
  readonly rateLimit: number | null;
  readonly ordered: boolean;
  readonly description: string | null;
  /** The customer whose events it receives (null: none, see platformWide). Set once: its deliveries are that customer's. */
  readonly customerId: string | null;
  /** Receives every customer's events (an internal consumer). Never with a customerId. */
  readonly platformWide: boolean;
  /**
   * The events it is owed: those produced to Kafka at or after this time; null: every event the
   * topics hold. Not given to `add`: the time it is added.
   */
  readonly deliverFrom?: Date | null;
}

export interface Endpoint extends EndpointSettings {
  readonly deliverFrom: Date | null;
  readonly id: string;
  readonly secrets: readonly SigningSecret[];
  readonly disabledAt: Date | null;
  readonly disabledReason: string | null;
  readonly failingSince: Date | null;
  readonly consecutiveFailures: number;
  readonly pausedUntil: Date | null;
  readonly createdAt: Date;
}

export interface CustomerSummary {
  readonly customerId: string;
  readonly endpointCount: number;
  readonly firstEndpointAt: Date;
}

export const ENDPOINT_DEFAULTS = { headers: {}, maxInFlight: 10, rateLimit: null, ordered: false, description: null } as const satisfies Partial<EndpointSettings>;

const ID = /^[A-Za-z0-9_.-]{1,64}$/;
/** Headers the relay writes itself: an endpoint's own headers may not replace them. */
const RESERVED_HEADERS = new Set(['webhook-id', 'webhook-timestamp', 'webhook-signature', 'content-type', 'content-length', 'host', 'user-agent', 'transfer-encoding', 'connection']);
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** Whose objects a store reads and changes: one customer's (the API's customer tokens), or everyone's (null). */
export type CustomerScope = string | null;

/**
 * Endpoints and subscriptions, as the CLI and the API manage them. A store scoped to a customer
 * has the customer in the WHERE of every statement: another customer's endpoint is not found,
 * exactly as a missing one.
 */
export class EndpointStore {
  constructor(
    private readonly pool: pg.Pool,
    private readonly tables: WebhookTables,
    private readonly guard: AddressGuard,
    private readonly scope: CustomerScope = null,
  ) {}

  /** Checks everything, then adds; returns the endpoint with its signing secret. */
  async add(settings: EndpointSettings, options: { readonly id?: string; readonly secret?: string } = {}): Promise<Endpoint> {
    const id = options.id ?? `ep_${randomBytes(8).toString('hex')}`;
    if (!ID.test(id)) throw invalid(`id "${id}" is not 1 to 64 letters, digits, _ . or -`);
    const secret = options.secret ?? generateSecret();
    const problem = secretProblem(secret);
    if (problem) throw invalid(`--secret ${problem}`);
    if ((settings.customerId === null) === !settings.platformWide) {
      throw invalid(settings.platformWide ? '--customer and --platform-wide exclude each other: an endpoint receives one customer\'s events, or (platform-wide) every customer\'s' : 'whose endpoint is it? Give --customer <id> (the customer whose events it receives, e.g. cus_123), or --platform-wide for an internal consumer of every customer\'s events');
    }
    if (this.scope !== null && (settings.customerId !== this.scope || settings.platformWide)) throw notFound(settings.customerId ?? 'platform-wide');
    await this.checkSettings(settings);
    const { rows } = await this.pool.query(
      `INSERT INTO ${this.tables.endpoints} (id, url, event_types, secrets, headers, max_in_flight, rate_limit, ordered, description, deliver_from, customer_id, platform_wide)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, CASE WHEN $10 THEN date_trunc('milliseconds', now()) ELSE COALESCE($11::timestamptz, '-infinity') END, $12, $13)
       ON CONFLICT (id) DO NOTHING RETURNING *`,
      [id, settings.url, settings.eventTypes, JSON.stringify([{ secret, expires_at: null }]), JSON.stringify(settings.headers), settings.maxInFlight, settings.rateLimit, settings.ordered, settings.description, settings.deliverFrom === undefined, settings.deliverFrom ?? null, settings.customerId, settings.platformWide],
    );
    if (rows.length === 0) throw invalid(`an endpoint with id "${id}" exists already; change it with \`webhooks endpoint update --id ${id}\``);
    return endpointFrom(rows[0]);
  }

  /** Every endpoint, or one customer's, oldest first; a page of them: those after the endpoint `after`, at most `limit`. */
  async list(filter: { readonly customerId?: string; readonly after?: string; readonly limit?: number } = {}): Promise<Endpoint[]> {
    // The position is looked up within the scope: another customer's endpoint is no position, exactly as a missing one.
    const { rows } = await this.pool.query(
      `WITH position AS (SELECT created_at, id FROM ${this.tables.endpoints} WHERE id = $3 AND ${this.scoped(2)})
       SELECT e.*, (SELECT count(*) FROM position)::int AS position_found FROM (SELECT 1) one
       LEFT JOIN LATERAL (
         SELECT * FROM ${this.tables.endpoints} WHERE ($1::text IS NULL OR customer_id = $1) AND ${this.scoped(2)}
           AND ($3::text IS NULL OR (created_at, id) > (SELECT created_at, id FROM position))
         ORDER BY created_at, id LIMIT $4) e ON true`,
      [filter.customerId ?? null, this.scope, filter.after ?? null, filter.limit ?? null],
    );
    if (filter.after !== undefined && rows[0]?.position_found !== 1) {
      throw new RelayError('WEBHOOK_API_INVALID_CURSOR', 'the cursor names no endpoint of this listing: pass the nextCursor of the previous page as given');
    }
    return rows.filter((row) => row.id !== null).map(endpointFrom);
  }

  /** The customers the endpoints name (a customer is known by its endpoints), by id; those after `after`, at most `limit`. */
  async customers(filter: { readonly customerId?: string; readonly after?: string; readonly limit: number }): Promise<CustomerSummary[]> {
    const { rows } = await this.pool.query<{ customer_id: string; endpoints: number; first: Date }>(
      `SELECT customer_id, count(*)::int AS endpoints, min(created_at) AS first FROM ${this.tables.endpoints}
       WHERE customer_id IS NOT NULL AND ($1::text IS NULL OR customer_id = $1) AND ${this.scoped(2)} AND ($3::text IS NULL OR customer_id > $3)
       GROUP BY customer_id ORDER BY customer_id LIMIT $4`,
      [filter.customerId ?? null, this.scope, filter.after ?? null, filter.limit],
    );
    return rows.map((row) => ({ customerId: row.customer_id, endpointCount: row.endpoints, firstEndpointAt: row.first }));
  }

  async get(id: string): Promise<Endpoint> {
    const { rows } = await this.pool.query(`SELECT * FROM ${this.tables.endpoints} WHERE id = $1 AND ${this.scoped(2)}`, [id, this.scope]);
    if (rows.length === 0) throw notFound(id);
    return endpointFrom(rows[0]);
  }

  /** Removes it, and its deliveries and their attempts with it (ON DELETE CASCADE and the store's trigger). */
  async remove(id: string): Promise<void> {
    const { rowCount } = await this.pool.query(`DELETE FROM ${this.tables.endpoints} WHERE id = $1 AND ${this.scoped(2)}`, [id, this.scope]);
    if (!rowCount) throw notFound(id);
  }

  /**
   * Changes what is given, checked as `add` checks it. Whose endpoint it is can be given once,
   * to an endpoint of an earlier setup that belongs to nobody: after that its deliveries are
   * that customer's, and another customer gets an endpoint of its own.
   */
  async update(id: string, change: Partial<EndpointSettings>): Promise<Endpoint> {
    const current = await this.get(id);
    const settings: EndpointSettings = { ...settingsOf(current), ...change };
    const assigned = current.customerId !== null || current.platformWide;
    if (settings.customerId !== null && settings.platformWide) throw invalid("--customer and --platform-wide exclude each other: an endpoint receives one customer's events, or (platform-wide) every customer's");
    if (assigned && (settings.customerId !== current.customerId || settings.platformWide !== current.platformWide)) {
      throw invalid(`endpoint ${id} is assigned already (${audienceOf(current)}), and its deliveries with it: add an endpoint for the other one (\`webhooks endpoint add\`) and disable this one (\`webhooks endpoint disable --id ${id}\`)`);
    }
    await this.checkSettings(settings);
    const { rows } = await this.pool.query(
      `UPDATE ${this.tables.endpoints} SET url = $2, event_types = $3, headers = $4, max_in_flight = $5, rate_limit = $6, ordered = $7, description = $8,
         deliver_from = COALESCE($9::timestamptz, '-infinity'), customer_id = $10, platform_wide = $11, updated_at = now()
       WHERE id = $1 AND ${this.scoped(12)} RETURNING *`,
      [id, settings.url, settings.eventTypes, JSON.stringify(settings.headers), settings.maxInFlight, settings.rateLimit, settings.ordered, settings.description, settings.deliverFrom ?? null, settings.customerId, settings.platformWide, this.scope],
    );
    if (rows.length === 0) throw notFound(id);
    return endpointFrom(rows[0]);
  }

  /** Nothing is sent to it; its deliveries are held (still recorded) until `enable`. */
  async disable(id: string, reason: string): Promise<Endpoint> {
    const { rows } = await this.pool.query(`UPDATE ${this.tables.endpoints} SET disabled_at = COALESCE(disabled_at, now()), disabled_reason = $2, updated_at = now() WHERE id = $1 AND ${this.scoped(3)} RETURNING *`, [id, reason, this.scope]);
    if (rows.length === 0) throw notFound(id);
    return endpointFrom(rows[0]);
  }

  /** Sends again, from a clean slate: circuit closed, failure streak ended, held deliveries due now. */
  async enable(id: string): Promise<{ readonly endpoint: Endpoint; readonly released: number }> {
    return inTransaction(this.pool, async (client) => {
      const { rows } = await client.query(
        `UPDATE ${this.tables.endpoints} SET disabled_at = NULL, disabled_reason = NULL, failing_since = NULL, consecutive_failures = 0, paused_until = NULL, updated_at = now() WHERE id = $1 AND ${this.scoped(2)} RETURNING *`,
        [id, this.scope],
      );
      if (rows.length === 0) throw notFound(id);
      const released = await client.query(`UPDATE ${this.tables.deliveries} SET next_attempt_at = now() WHERE endpoint_id = $1 AND status = 'pending' AND lease_owner IS NULL AND next_attempt_at > now()`, [id]);
      return { endpoint: endpointFrom(rows[0]), released: released.rowCount ?? 0 };
    });
  }

  /**
   * A new secret signs from now on; the current ones keep signing for `keepOldMs` (every
   * secret signs each request, so the receiver can switch at any time within it). Retired
   * secrets past their time are dropped.
   */
  async rotateSecret(id: string, keepOldMs: number, secret: string = generateSecret()): Promise<{ readonly endpoint: Endpoint; readonly secret: string }> {
    const problem = secretProblem(secret);
    if (problem) throw invalid(`--secret ${problem}`);
    const { rows } = await this.pool.query(
      `UPDATE ${this.tables.endpoints} SET secrets = (
         SELECT jsonb_build_array(jsonb_build_object('secret', $2::text, 'expires_at', null)) || COALESCE(jsonb_agg(
           jsonb_build_object('secret', s->>'secret', 'expires_at', COALESCE(s->>'expires_at', to_jsonb(now() + make_interval(secs => $3 / 1000.0))->>0))), '[]'::jsonb)
         FROM jsonb_array_elements(secrets) AS s
         WHERE s->>'expires_at' IS NULL OR (s->>'expires_at')::timestamptz > now()
       ), updated_at = now() WHERE id = $1 AND ${this.scoped(4)} RETURNING *`,
      [id, secret, keepOldMs, this.scope],
    );
    if (rows.length === 0) throw notFound(id);
    return { endpoint: endpointFrom(rows[0]), secret };
  }

  /** The scope's condition, its customer given as parameter $n (null: every endpoint). */
  private scoped(n: number): string {
    return `($${n}::text IS NULL OR customer_id = $${n})`;
  }

  private async checkSettings(settings: EndpointSettings): Promise<void> {
    let url: URL;
    try {
      url = new URL(settings.url);
    } catch {
      throw invalid(`--url "${settings.url}" is not a URL: expected e.g. https://billing.example.com/webhooks`);
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw invalid(`--url is a ${url.protocol} URL: expected http:// or https://`);
    // Credentials in the URL would be shown by every list and log line: the endpoint's headers carry them.
    if (url.username !== '' || url.password !== '') throw invalid('--url has a user or password in it: give credentials as a header instead (--headers \'{"authorization":"Bearer ..."}\')');
    if (settings.eventTypes.length === 0) throw invalid('--event-types is empty: expected event types or patterns, e.g. invoice.paid,subscription.*');
    for (const pattern of settings.eventTypes) {
      const problem = eventTypeProblem(pattern);
      if (problem) throw invalid(`--event-types: ${problem}`);
    }
    for (const [name, value] of Object.entries(settings.headers)) {
      if (!HEADER_NAME.test(name)) throw invalid(`--headers: "${name}" is not an HTTP header name`);
      if (RESERVED_HEADERS.has(name.toLowerCase())) throw invalid(`--headers: "${name}" is set by the relay itself (${[...RESERVED_HEADERS].join(', ')})`);
      if (typeof value !== 'string' || /[\r\n\0]/.test(value)) throw invalid(`--headers: the value of "${name}" must be a string without line breaks`);
    }
    if (settings.customerId !== null) {
      const problem = customerIdProblem(settings.customerId);
      if (problem) throw invalid(`--customer ${problem}`);
    }
    if (!Number.isInteger(settings.maxInFlight) || settings.maxInFlight < 1 || settings.maxInFlight > 1_000) throw invalid(`--max-in-flight ${settings.maxInFlight} is not an integer from 1 to 1000`);
    if (settings.rateLimit !== null && (!Number.isInteger(settings.rateLimit) || settings.rateLimit < 1 || settings.rateLimit > 100_000)) throw invalid(`--rate-limit ${settings.rateLimit} is not an integer from 1 to 100000 (attempts per second)`);
    try {
      await this.guard.check(url);
    } catch (error) {
      const reason = (error as Error).message;
      throw new RelayError((error as { code?: string }).code === 'WEBHOOK_ADDRESS_REFUSED' ? 'WEBHOOK_ADDRESS_REFUSED' : 'WEBHOOK_ENDPOINT_INVALID', `--url ${url.origin}: ${reason}`, { cause: error });
    }
  }
}

/**
 * Every endpoint's subscriptions (disabled ones too: their deliveries are held, not skipped),
 * what a request to each needs, and the version they are at. An endpoint that belongs to nobody
 * (an earlier setup's, not yet assigned) subscribes to nothing: it is named in `unassigned`
 * instead.
 */
export async function loadSubscribers(client: pg.ClientBase, tables: WebhookTables): Promise<{ readonly version: string; readonly subscribers: Subscriber[]; readonly endpoints: LoadedEndpoints; readonly unassigned: string[] }> {
  const { rows } = await client.query<{ id: string; event_types: string[]; deliver_from_ms: number; customer_id: string | null; platform_wide: boolean; url: string; secrets: unknown; headers: Record<string, string>; max_in_flight: number; sends_first: boolean; version: string }>(
    `SELECT e.id, e.event_types, extract(epoch FROM e.deliver_from)::float8 * 1000 AS deliver_from_ms, e.customer_id, e.platform_wide,
            e.url, e.secrets, e.headers, e.max_in_flight, NOT e.ordered AND e.rate_limit IS NULL AS sends_first, v.version::text AS version
     FROM ${tables.subscriptionsVersion} v LEFT JOIN ${tables.endpoints} e ON true`,
  );
  const version = rows[0]?.version ?? '0';
  const endpoints = rows.filter((row) => row.id !== null);
  const subscribed = endpoints.filter((row) => row.customer_id !== null || row.platform_wide);
  const loaded = new Map(subscribed.map((row) => [row.id, { url: row.url, secrets: signingSecretsOf(row.secrets), headers: row.headers, maxInFlight: row.max_in_flight, sendsFirst: row.sends_first }]));
  return {
    version,
    subscribers: subscribed.map((row) => ({ endpointId: row.id, eventTypes: row.event_types, deliverFromMs: row.deliver_from_ms, customerId: row.customer_id })),
    endpoints: { version, get: (endpointId) => loaded.get(endpointId) },
    unassigned: endpoints.filter((row) => row.customer_id === null && !row.platform_wide).map((row) => row.id),
  };
}

/**
 * WEBHOOK_ENDPOINTS_UNASSIGNED, naming them and the command that assigns them, while any
 * endpoint belongs to no customer and is not platform-wide (an earlier setup's): the webhooks
 * process does not start, rather than guess whose events they are owed.
 */
export async function requireAssignedEndpoints(pool: pg.Pool, tables: WebhookTables): Promise<void> {
  const { rows } = await pool.query<{ id: string; description: string | null }>(`SELECT id, description FROM ${tables.endpoints} WHERE customer_id IS NULL AND NOT platform_wide ORDER BY id`);
  if (rows.length === 0) return;
  const shown = rows.slice(0, 20).map((row) => (row.description ? `${row.id} (${row.description})` : row.id));
  throw new RelayError(
    'WEBHOOK_ENDPOINTS_UNASSIGNED',
    `${rows.length} webhook endpoint(s) belong to no customer: ${shown.join(', ')}${rows.length > shown.length ? `, and ${rows.length - shown.length} more (\`webhooks endpoint list\`)` : ''}. ` +
      `Every endpoint receives one customer's events, or every customer's: run \`outbox-relay webhooks endpoint update --id <id> --customer <customer id>\` for each (or --platform-wide for an internal consumer), then start again`,
  );
}

export async function subscriptionsVersion(client: pg.ClientBase, tables: WebhookTables): Promise<string> {
  const { rows } = await client.query<{ version: string }>(`SELECT version::text AS version FROM ${tables.subscriptionsVersion}`);
  return rows[0]?.version ?? '0';
}

/** The secrets that sign at `now`: the current one and those retired less than their grace ago. */
export function signingSecrets(secrets: readonly SigningSecret[], now: Date): string[] {
  return secrets.filter((s) => s.expiresAt === null || new Date(s.expiresAt) > now).map((s) => s.secret);
}

function settingsOf(endpoint: Endpoint): EndpointSettings {
  const { url, eventTypes, headers, maxInFlight, rateLimit, ordered, description, deliverFrom, customerId, platformWide } = endpoint;
  return { url, eventTypes, headers, maxInFlight, rateLimit, ordered, description, deliverFrom, customerId, platformWide };
}

/** Whose endpoint it is, in words. */
export function audienceOf(endpoint: Pick<Endpoint, 'customerId' | 'platformWide'>): string {
  return endpoint.platformWide ? 'platform-wide' : endpoint.customerId !== null ? `customer ${endpoint.customerId}` : 'no customer (assign one)';
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a row of the endpoints table, typed here once
function endpointFrom(row: any): Endpoint {
  return {
    id: row.id,
    url: row.url,
    eventTypes: row.event_types,
    secrets: signingSecretsOf(row.secrets),
    headers: row.headers,
    maxInFlight: row.max_in_flight,
    rateLimit: row.rate_limit,
    ordered: row.ordered,
    description: row.description,
    customerId: row.customer_id,
    platformWide: row.platform_wide,
    // -infinity comes back as a number (node-pg's timestamp parser): every event.
    deliverFrom: row.deliver_from instanceof Date ? row.deliver_from : null,
    disabledAt: row.disabled_at,
    disabledReason: row.disabled_reason,
    failingSince: row.failing_since,
    consecutiveFailures: row.consecutive_failures,
    pausedUntil: row.paused_until,
    createdAt: row.created_at,
  };
}

function invalid(message: string): RelayError {
  return new RelayError('WEBHOOK_ENDPOINT_INVALID', message);
}

function notFound(id: string): RelayError {
  return new RelayError('WEBHOOK_NOT_FOUND', `no webhook endpoint with id "${id}"; \`outbox-relay webhooks endpoint list\` shows them`);
}

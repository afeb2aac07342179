import { readFile } from 'node:fs/promises';
import pg from 'pg';
import { RelayError } from '../errors.js';
import { primaryPool, type DatabaseAccess } from '../pg-connection.js';
import { inTransaction } from '../pg-transaction.js';

const WEBHOOKS_SQL = new URL('../../sql/004_webhooks.sql', import.meta.url);
/** The schema name sql/004_webhooks.sql is written with; `setup` puts OUTBOX_WEBHOOK_SCHEMA in its place. */
const FILE_SCHEMA = 'outbox_webhooks';

/** The webhook tables, quoted, in one schema (OUTBOX_WEBHOOK_SCHEMA). */
export class WebhookTables {
  readonly endpoints: string;
  readonly events: string;
  /** The event types recorded, each with its first event's time. */
  readonly eventTypes: string;
  /** Events whose customer the rule could not find: listed, replayable once it can. */
  readonly eventsWithoutCustomer: string;
  readonly deliveries: string;
  readonly attempts: string;
  /** A view: the rows of attempts and the first attempts kept in their deliveries' rows. */
  readonly allAttempts: string;
  /** The webhooks processes alive, by their heartbeats: what each endpoint's limit is shared over. */
  readonly processes: string;
  readonly subscriptionsVersion: string;
  /** The answers of the API's creates, by their Idempotency-Key's digest. */
  readonly apiIdempotency: string;
  /** Partial indexes of the endpoints not in good health (see troubledEndpoint), and of the disabled ones. */
  readonly troubledEndpointsIndex: string;
  readonly disabledEndpointsIndex: string;

  /** The advisory lock's name that recordings take shared and removing endpoints exclusively (sql/004_webhooks.sql, lock_out_recordings). */
  readonly endpointsRemovedLock: string;

  constructor(readonly schema: string) {
    this.endpointsRemovedLock = `${schema}.endpoints removed`;
    const table = (name: string) => `${pg.escapeIdentifier(schema)}.${name}`;
    this.endpoints = table('endpoints');
    this.events = table('events');
    this.eventTypes = table('event_types');
    this.eventsWithoutCustomer = table('events_without_customer');
    this.deliveries = table('deliveries');
    this.attempts = table('attempts');
    this.allAttempts = table('all_attempts');
    this.processes = table('processes');
    this.subscriptionsVersion = table('subscriptions_version');
    this.apiIdempotency = table('api_idempotency');
    this.troubledEndpointsIndex = table('endpoints_troubled_idx');
    this.disabledEndpointsIndex = table('endpoints_disabled_idx');
  }
}

/**
 * `endpoint` (an alias of the endpoints table) has something a success clears: a failure streak,
 * a circuit count, a pause. endpoints_troubled_idx's predicate (sql/004_webhooks.sql): a query
 * that says it exactly so can read that index, which holds few endpoints, instead of every one.
 */
export function troubledEndpoint(endpoint: string): string {
  return `(${endpoint}.consecutive_failures <> 0 OR ${endpoint}.failing_since IS NOT NULL OR ${endpoint}.paused_until IS NOT NULL)`;
}

/**
 * A pool for the webhook tables, its sessions on the primary among DATABASE_URL's hosts
 * (primaryPool: after a promotion, new sessions find the new primary).
 * Its sessions are kept while idle (node-postgres closes them after 10 s by default): the first
 * events after a quiet spell would otherwise wait for new sessions, each a backend started, its
 * caches filled and the hot path's statements prepared again; that put the first second of a
 * burst after 15 s quiet at p99 176 ms to the first attempt, against 52 ms with them kept
 * (bench/webhooks.ts, "after a quiet spell"). At most `max` sessions are held.
 */
export function webhookPool(database: DatabaseAccess, applicationName: string, max: number, extra: Pick<pg.PoolConfig, 'statement_timeout'> = {}): pg.Pool {
  const pool = primaryPool(database, applicationName, { ...extra, max, idleTimeoutMillis: 0 });
  // A broken idle client (a Postgres restart) is dropped by the pool; the next query reconnects.
  pool.on('error', () => undefined);
  // A client checked out between two statements hears the restart as an 'error' event, which
  // unheard would end the process: its next statement fails instead, and the transaction with it.
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}

/** Creates the schema and tables, idempotently (CREATE ... IF NOT EXISTS throughout). */
export async function createWebhookTables(pool: pg.Pool, tables: WebhookTables): Promise<void> {
  const sql = (await readFile(WEBHOOKS_SQL, 'utf8')).replaceAll(`${FILE_SCHEMA}.`, `${pg.escapeIdentifier(tables.schema)}.`).replace(`CREATE SCHEMA IF NOT EXISTS ${FILE_SCHEMA};`, `CREATE SCHEMA IF NOT EXISTS ${pg.escapeIdentifier(tables.schema)};`);
  await inTransaction(pool, async (client) => {
    // Two setups at once would race on CREATE OR REPLACE FUNCTION and the trigger: one at a time.
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`outbox-relay webhooks setup ${tables.schema}`]);
    await client.query(sql);
  });
}

/**
 * WEBHOOK_SCHEMA_MISSING, naming the fix, unless every webhook table exists (and the view,
 * tables and indexes of this version's setup: the endpoints' partial indexes come with the
 * trigger that versions their settings, which first attempts rely on).
 */
export async function requireWebhookTables(pool: pg.Pool, tables: WebhookTables): Promise<void> {
  const names = [tables.endpoints, tables.events, tables.eventTypes, tables.eventsWithoutCustomer, tables.deliveries, tables.attempts, tables.allAttempts, tables.processes, tables.subscriptionsVersion, tables.apiIdempotency, tables.troubledEndpointsIndex, tables.disabledEndpointsIndex];
  const { rows } = await pool.query<{ name: string; found: string | null }>('SELECT name, to_regclass(name)::text AS found FROM unnest($1::text[]) AS name', [names]);
  const missing = rows.filter((row) => row.found === null).map((row) => row.name);
  if (missing.length > 0) {
    throw new RelayError('WEBHOOK_SCHEMA_MISSING', `the webhook tables or indexes ${missing.join(', ')} do not exist (never made, or an earlier version's setup made the others): run \`outbox-relay webhooks setup\` (OUTBOX_WEBHOOK_SCHEMA=${tables.schema})`);
  }
}

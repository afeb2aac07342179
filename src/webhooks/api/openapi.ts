import pg from 'pg';
import pino from 'pino';
import { Secret } from '../../security/secret.js';
import { AddressGuard } from '../address-guard.js';
import { WebhookTables } from '../webhook-tables.js';
import { apiServices } from './app.js';
import { createApiMetrics } from './metrics.js';
import { buildApiServer } from './server.js';
import { TokenAuthority } from './tokens.js';

/**
 * The OpenAPI document as `webhooks api` serves it at /openapi.json, made without a store or a
 * listener (the pool is never used: node-postgres connects at a first query), for
 * `npm run docs` to write docs/openapi.json and its test to compare.
 */
export async function openApiDocument(): Promise<unknown> {
  const pool = new pg.Pool();
  const unused = Secret.fromValue('(none)', 'x'.repeat(32));
  const app = await buildApiServer({
    services: apiServices({ pool, tables: new WebhookTables('outbox_webhooks'), guard: new AddressGuard([]), tokens: new TokenAuthority(unused, unused), eventSchemas: new Map(), publicUrl: null }),
    metrics: createApiMetrics(),
    logger: pino({ level: 'silent' }),
    portalFiles: new Map(),
    rateLimitPerMinute: 1,
    ready: async () => false,
  });
  await app.ready();
  const document = app.swagger();
  await app.close();
  await pool.end();
  return document;
}

/** The document as committed: JSON, two-space indented, a newline at the end. */
export function openApiText(document: unknown): string {
  return `${JSON.stringify(document, null, 2)}\n`;
}

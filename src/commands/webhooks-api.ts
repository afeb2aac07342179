import { COMMANDS } from '../config/commands.js';
import { databaseAccess } from '../pg-connection.js';
import { errorMessage } from '../errors.js';
import { createLogger } from '../observe/logger.js';
import { loadSchemaSet } from '../encode/avro/schema-set.js';
import { AddressGuard } from '../webhooks/address-guard.js';
import { apiServices } from '../webhooks/api/app.js';
import { createApiMetrics } from '../webhooks/api/metrics.js';
import { loadPortalFiles } from '../webhooks/api/portal-files.js';
import { buildApiServer } from '../webhooks/api/server.js';
import { TokenAuthority } from '../webhooks/api/tokens.js';
import { requireWebhookTables, webhookPool, WebhookTables } from '../webhooks/webhook-tables.js';
import { command, EXIT, exitDeadline } from './command.js';

/** Requests answered at once, each holding a session for a statement or two. */
const POOL_SIZE = 10;
/** No listing or change of the API runs longer: a slow one is a 503, not a pile-up of sessions. */
const STATEMENT_TIMEOUT_MS = 5_000;
/** Days-old Idempotency-Keys are deleted this often. */
const PRUNE_KEYS_EVERY_MS = 3_600_000;

/**
 * `outbox-relay webhooks api`: its own process, apart from the delivery process (it scales and
 * restarts apart, is the only webhooks part reachable from outside, and its deploys never
 * rebalance the consumer group). Until SIGTERM.
 */
export const webhooksApiCommand = command(COMMANDS['webhooks api'], async (config) => {
  const logger = createLogger(config.logLevel, 'outbox-relay-webhooks-api');
  const tables = new WebhookTables(config.webhookSchema);
  const pool = webhookPool(databaseAccess(config.databaseUrl, config.databasePassword), 'outbox-relay-webhooks-api', POOL_SIZE, { statement_timeout: STATEMENT_TIMEOUT_MS });
  await requireWebhookTables(pool, tables);
  const schemas = await loadSchemaSet(config.schemasDir).catch(() => null);
  const eventSchemas = new Map([...(schemas?.byEventType.values() ?? [])].map((schema) => [schema.eventType, JSON.parse(schema.definition) as unknown]));
  const services = apiServices({
    pool,
    tables,
    guard: new AddressGuard(config.webhookAllowAddresses ?? []),
    tokens: new TokenAuthority(config.webhookApiToken, config.webhookApiSigningKey),
    eventSchemas,
    publicUrl: config.webhookApiPublicUrl,
  });
  const portalFiles = await loadPortalFiles();
  const app = await buildApiServer({
    services,
    metrics: createApiMetrics(),
    logger,
    portalFiles,
    rateLimitPerMinute: config.webhookApiRateLimit,
    ready: () => pool.query('SELECT 1').then(() => true, () => false),
  });
  const address = await app.listen({ host: config.webhookApiHost, port: config.webhookApiPort });
  const pruning = setInterval(() => void services.idempotency.prune().catch((error: unknown) => logger.warn({ err: errorMessage(error) }, 'webhooks api: pruning old Idempotency-Keys failed')), PRUNE_KEYS_EVERY_MS).unref();
  logger.info({ address, schema: tables.schema, eventSchemas: eventSchemas.size, portalFiles: [...portalFiles.keys()] }, 'webhooks api: listening');

  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  exitDeadline(logger, signal, config.shutdownTimeout);
  logger.info({ signal }, 'webhooks api: stopping: requests in flight are answered, new ones refused');
  clearInterval(pruning);
  await app.close();
  await pool.end();
  logger.info('webhooks api: stopped');
  return EXIT.ok;
});

import { randomBytes } from 'node:crypto';
import { Agent } from 'node:https';
import { createRequire } from 'node:module';
import { hostname } from 'node:os';
import { avroRegistry } from '../client/consumer.js';
import { COMMANDS } from '../config/commands.js';
import { compileWebhooks } from '../config/compile.js';
import type { RegistryAccess } from '../encode/create-encoder.js';
import { errorMessage } from '../errors.js';
import { openGroupConsumers } from '../kafka/open.js';
import { startHttpServer } from '../observe/http-server.js';
import { createLogger } from '../observe/logger.js';
import { warnOnMissingRuntimeFlag } from '../observe/runtime-flags.js';
import { readPem } from '../security/pem.js';
import { AddressGuard } from '../webhooks/address-guard.js';
import { DeliveryQueries } from '../webhooks/delivery-queries.js';
import { DeliveryStore } from '../webhooks/delivery-store.js';
import { Dispatcher, leaseFor } from '../webhooks/dispatcher.js';
import { EndpointShares } from '../webhooks/endpoint-shares.js';
import { startHousekeeping } from '../webhooks/housekeeping.js';
import { ProcessHeartbeat } from '../webhooks/process-heartbeat.js';
import { WebhookSender } from '../webhooks/http-sender.js';
import { ThreadedSender } from '../webhooks/threaded-sender.js';
import { LOOP_STALLS_ENV, stallLoopAtRandom } from '../webhooks/loop-stalls.js';
import { WebhookIntake } from '../webhooks/intake.js';
import { createWebhookMetrics } from '../webhooks/metrics.js';
import { firstAttemptAt } from '../webhooks/retry-policy.js';
import { requireWebhookTables, webhookPool, WebhookTables } from '../webhooks/webhook-tables.js';
import { requireAssignedEndpoints } from '../webhooks/endpoint-store.js';
import { describeCustomerRule } from '../webhooks/customer-rule.js';
import { command, EXIT, exitDeadline } from './command.js';

const VERSION = (createRequire(import.meta.url)('../../package.json') as { version: string }).version;
/** The dispatcher loop, the completions, the consumer's partitions, the gauges. */
const POOL_SIZE = 10;
/** A dispatcher loop that has not turned for this long is stuck: /healthz fails. */
const STUCK_MS = 120_000;

/** `outbox-relay webhooks`: the consumer, the dispatcher and housekeeping, until SIGTERM. */
export const webhooksCommand = command(COMMANDS.webhooks, async (config) => {
  const options = compileWebhooks(config);
  const logger = createLogger(options.logLevel, 'outbox-relay-webhooks');
  warnOnMissingRuntimeFlag(logger);
  // A test hook (loop-stalls.ts): the event loop held at random, as on a loaded node.
  const stopStalls = stallLoopAtRandom(process.env[LOOP_STALLS_ENV]);
  if (process.env[LOOP_STALLS_ENV]) logger.warn({ [LOOP_STALLS_ENV]: process.env[LOOP_STALLS_ENV] }, 'webhooks: a test hook holds this process\'s event loop at random; never set it in production');
  const metrics = createWebhookMetrics();
  const tables = new WebhookTables(options.schema);
  const pool = webhookPool(options.database, 'outbox-relay-webhooks', POOL_SIZE);
  await requireWebhookTables(pool, tables);
  await requireAssignedEndpoints(pool, tables);
  const owner = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  const clock = () => new Date();
  const senderOptions = { ...options.sender, connectionsPerOrigin: options.concurrency, userAgent: `outbox-relay/${VERSION}` };
  const sender =
    options.senderThreads > 0
      ? // Each thread's pool is as large as the process's concurrency: the threads share the requests, not a pool.
        new ThreadedSender(options.senderThreads, { sender: senderOptions, allowAddresses: options.sender.allowAddresses, policy: options.policy })
      : new WebhookSender({ ...senderOptions, guard: new AddressGuard(options.sender.allowAddresses) });
  const store = new DeliveryStore(pool, tables);
  const shares = new EndpointShares(owner);
  const heartbeat = new ProcessHeartbeat(pool, tables, owner, shares, logger);
  // A member before it takes any slot: alone, it has its endpoints' whole limits at once; beside
  // others, once they agree (a second or two), or once a killed predecessor's row is stale.
  await heartbeat.beat();
  const dispatcher = new Dispatcher({
    store,
    sender,
    policy: options.policy,
    rules: options.rules,
    concurrency: options.concurrency,
    leaseMs: leaseFor(options.sender.timeoutMs),
    pollMs: options.pollMs,
    owner,
    slots: shares,
    clock,
    logger,
    metrics,
  });
  const kafka = openGroupConsumers(options.kafka.client, { ...options.kafka, logger });
  let joined = false;
  const intake = new WebhookIntake({
    openConsumer: kafka.open,
    openTopicLister: kafka.topics,
    groupId: options.groupId,
    events: {
      joined: () => (joined = true),
      failed: (error) => {
        joined = false;
        logger.error({ err: errorMessage(error) }, 'webhooks: the consumer failed; it reads again from the last offset recorded');
      },
    },
    topics: options.topics,
    pool,
    tables,
    store,
    registry: options.registry && registryFor(options.registry),
    customerRule: options.customerRule,
    firstAttemptAt: () => firstAttemptAt(options.policy, clock()),
    logger,
    metrics,
    onRecorded: () => dispatcher.wake(),
    // Sent at once only when the schedule says the first attempt is immediate.
    owner: options.policy.scheduleMs[0] === 0 ? dispatcher : null,
  });
  const housekeeping = new AbortController();
  const housekeepingDone = Promise.all([
    startHousekeeping({ queries: new DeliveryQueries(pool, tables), metrics, logger, clock, circuitFailures: options.rules.circuitFailures, retentionMs: options.retentionMs }, housekeeping.signal),
    heartbeat.run(housekeeping.signal),
  ]);
  const server =
    options.http &&
    (await startHttpServer(options.http.host, options.http.port, {
      registry: metrics.registry,
      readiness: () => (joined ? [true, 'consuming'] : [false, intake.hasTopics ? 'joining the consumer group' : 'no topic matches OUTBOX_WEBHOOK_TOPICS yet']),
      liveness: () => (Date.now() - dispatcher.lastTurn < STUCK_MS ? [true, 'dispatching'] : [false, `the dispatcher has not turned for ${Math.round((Date.now() - dispatcher.lastTurn) / 1000)}s`]),
    }));
  // Listened for before the consumer starts: a SIGTERM while it joins its group still stops it in bounded time.
  const stopSignal = new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  dispatcher.start();
  await intake.start();
  logger.info({ owner, topics: options.topics.map(String), group: options.groupId, kafkaClient: options.kafka.client, schema: options.schema, concurrency: options.concurrency, customerFrom: describeCustomerRule(options.customerRule) }, 'webhooks: consuming and dispatching');

  const signal = await stopSignal;
  stopStalls();
  exitDeadline(logger, signal, options.shutdownTimeoutMs);
  logger.info({ signal }, 'webhooks: stopping: no new deliveries claimed, attempts in flight finish');
  // The consumer first: what it recorded is committed with its offsets, nothing half-read.
  await intake.stop().catch((error: unknown) => logger.warn({ err: errorMessage(error) }, 'webhooks: leaving the consumer group failed'));
  const { unfinished } = await dispatcher.stop(options.shutdownTimeoutMs);
  if (unfinished > 0) logger.warn({ unfinished }, 'webhooks: attempts still running at the shutdown timeout; their leases run out and they are sent again');
  housekeeping.abort();
  await housekeepingDone;
  await heartbeat.leave().catch((error: unknown) => logger.warn({ err: errorMessage(error) }, 'webhooks: deleting the process heartbeat failed; the others count this process out once it is stale'));
  server?.close();
  await sender.close();
  await pool.end();
  logger.info('webhooks: stopped');
  return EXIT.ok;
});

function registryFor(access: RegistryAccess): ReturnType<typeof avroRegistry> {
  return avroRegistry(access.url.reveal(), {
    ...(access.auth ? { auth: { username: access.auth.username, password: access.auth.password.reveal() } } : {}),
    ...(access.caFile ? { agent: new Agent({ ca: readPem('SCHEMA_REGISTRY_CA_FILE', access.caFile), keepAlive: true }) } : {}),
  });
}

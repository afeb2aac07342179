import { COMMANDS } from '../config/commands.js';
import { compilePrune } from '../config/compile.js';
import { errorMessage, RelayError } from '../errors.js';
import { startHttpServer } from '../observe/http-server.js';
import { createLogger } from '../observe/logger.js';
import { createPruneMetrics, pruneAll } from '../prune/pruner.js';
import { connectPostgres, QUERY_TIMEOUT_MS } from '../pg-connection.js';
import { findTables } from '../setup/outbox-tables.js';
import { sleep } from '../time.js';
import { command, EXIT, exitDeadline } from './command.js';

/** The first retry after a failed pass; each further failure doubles it, up to the interval (or RETRY_MAX_MS). */
const RETRY_MIN_MS = 1_000;
const RETRY_MAX_MS = 30_000;

export const pruneCommand = command(COMMANDS.prune, async (config) => {
  const options = compilePrune(config);
  const logger = createLogger(options.logLevel, 'outbox-relay-prune');
  const metrics = createPruneMetrics();
  // Each pass finds a pattern's tables again: a tenant added since is pruned too.
  const tables = async () => {
    const client = await connectPostgres(options.pruner.database, 'outbox-relay-prune');
    try {
      return await findTables(client, options.tables);
    } finally {
      await client.end();
    }
  };
  const pass = () => pruneAll(tables, { ...options.pruner, logger, metrics });
  if (options.everyMs === 0) {
    const result = await pass();
    logger.info(result, 'prune: pass done');
    process.stdout.write(`deleted ${result.deleted} rows\n`);
    return EXIT.ok;
  }
  // The sidecar: a pass every interval, metrics on the HTTP port, SIGTERM ends it between passes.
  const server = options.http && (await startHttpServer(options.http.host, options.http.port, { registry: metrics.registry, readiness: () => [true, 'pruning'], liveness: () => [true, 'pruning'] }));
  const stop = new AbortController();
  const onSignal = (signal: NodeJS.Signals) => {
    // A pass in progress finishes (each query is bounded); the process ends in bounded time regardless.
    exitDeadline(logger, signal, QUERY_TIMEOUT_MS);
    stop.abort();
  };
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  logger.info({ every: options.everyMs, retention: options.pruner.retentionMs }, 'prune: loop started');
  let retryMs = RETRY_MIN_MS;
  while (!stop.signal.aborted) {
    let waitMs = options.everyMs;
    try {
      logger.info(await pass(), 'prune: pass done');
      retryMs = RETRY_MIN_MS;
    } catch (error) {
      // A failover (the primary gone, the standby not promoted yet) fails passes for a while:
      // each pass connects anew, to whichever host of DATABASE_URL is the primary then, sooner
      // than the interval at first and backing off to it.
      waitMs = Math.min(retryMs, options.everyMs);
      retryMs = Math.min(retryMs * 2, RETRY_MAX_MS);
      logger.error({ code: error instanceof RelayError ? error.code : undefined, err: errorMessage(error), retryInMs: waitMs }, 'prune: pass failed; trying again');
    }
    await sleep(waitMs, stop.signal);
  }
  server?.close();
  return EXIT.ok;
});

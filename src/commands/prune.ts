import { loadConfig } from '../config/load.js';
import type { OptionKey } from '../config/options.js';
import { errorMessage } from '../errors.js';
import { startHttpServer } from '../observe/http-server.js';
import { createLogger } from '../observe/logger.js';
import { createPruneMetrics, Pruner } from '../prune/pruner.js';
import { QUERY_TIMEOUT_MS } from '../pg-connection.js';
import { sleep } from '../time.js';
import { EXIT, exitDeadline, type Command } from './command.js';

const OPTIONS: readonly OptionKey[] = ['databaseUrl', 'table', 'slot', 'columnCreatedAt', 'pruneRetention', 'pruneEvery', 'pruneBatchSize', 'httpHost', 'httpPort', 'logLevel'];

export const pruneCommand: Command = {
  summary: 'Delete outbox rows older than the retention that the relay has confirmed; one pass, or a loop with --every.',
  options: OPTIONS,
  // Its own port: a pruner beside a relay on one host must not collide with the relay's 9464.
  defaults: { httpPort: '9465' },
  action: async (flags) => {
    const config = loadConfig({ env: process.env, flags, defaults: pruneCommand.defaults }, OPTIONS);
    const logger = createLogger(config.logLevel, 'outbox-relay-prune');
    const metrics = createPruneMetrics();
    const pruner = new Pruner({
      databaseUrl: config.databaseUrl,
      table: config.table,
      createdAtColumn: config.columnCreatedAt,
      slot: config.slot,
      retentionMs: config.pruneRetention,
      batchSize: config.pruneBatchSize,
      logger,
      metrics,
    });
    if (config.pruneEvery === 0) {
      const result = await pruner.pass();
      logger.info(result, 'prune: pass done');
      process.stdout.write(`deleted ${result.deleted} rows\n`);
      return EXIT.ok;
    }
    // The sidecar: a pass every interval, metrics on the HTTP port, SIGTERM ends it between passes.
    const server = config.httpPort === 0 ? null : await startHttpServer(config.httpHost, config.httpPort, { registry: metrics.registry, readiness: () => [true, 'pruning'], liveness: () => [true, 'pruning'] });
    const stop = new AbortController();
    const onSignal = (signal: NodeJS.Signals) => {
      // A pass in progress finishes (each query is bounded); the process ends in bounded time regardless.
      exitDeadline(logger, signal, QUERY_TIMEOUT_MS);
      stop.abort();
    };
    process.once('SIGTERM', onSignal);
    process.once('SIGINT', onSignal);
    logger.info({ every: config.pruneEvery, retention: config.pruneRetention }, 'prune: loop started');
    while (!stop.signal.aborted) {
      try {
        logger.info(await pruner.pass(), 'prune: pass done');
      } catch (error) {
        logger.error({ err: errorMessage(error) }, 'prune: pass failed; trying again next interval');
      }
      await sleep(config.pruneEvery, stop.signal);
    }
    server?.close();
    return EXIT.ok;
  },
};

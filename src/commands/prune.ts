import { loadConfig } from '../config/load.js';
import type { OptionKey } from '../config/options.js';
import { errorMessage } from '../errors.js';
import { startHttpServer } from '../observe/http-server.js';
import { createLogger } from '../observe/logger.js';
import { createPruneMetrics, Pruner } from '../prune/pruner.js';
import { EXIT, type Command } from './command.js';

const OPTIONS: readonly OptionKey[] = ['databaseUrl', 'table', 'slot', 'columnCreatedAt', 'pruneRetention', 'pruneEvery', 'pruneBatchSize', 'httpHost', 'httpPort', 'logLevel'];

export const pruneCommand: Command = {
  summary: 'Delete outbox rows older than the retention that the relay has confirmed; one pass, or a loop with --every.',
  options: OPTIONS,
  action: async (flags) => {
    const config = loadConfig({ env: process.env, flags }, OPTIONS);
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
    const server = config.httpPort === 0 ? null : await startHttpServer(config.httpHost, config.httpPort, { registry: metrics.registry, readiness: () => [true, 'pruning'] });
    const stop = new AbortController();
    process.once('SIGTERM', () => stop.abort());
    process.once('SIGINT', () => stop.abort());
    logger.info({ every: config.pruneEvery, retention: config.pruneRetention }, 'prune: loop started');
    while (!stop.signal.aborted) {
      try {
        logger.info(await pruner.pass(), 'prune: pass done');
      } catch (error) {
        logger.error({ err: errorMessage(error) }, 'prune: pass failed; trying again next interval');
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, config.pruneEvery);
        stop.signal.addEventListener('abort', () => {
          clearTimeout(timer);
          resolve();
        }, { once: true });
      });
    }
    server?.close();
    return EXIT.ok;
  },
};

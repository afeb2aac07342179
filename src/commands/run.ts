import { loadConfig, redactedConfig } from '../config/load.js';
import { OPTIONS, type OptionKey } from '../config/options.js';
import { createEncoder } from '../encode/create-encoder.js';
import { errorCode, errorMessage } from '../errors.js';
import { startHttpServer } from '../observe/http-server.js';
import { createLogger } from '../observe/logger.js';
import { createRelayMetrics } from '../observe/metrics.js';
import { SlotMonitor } from '../observe/slot-monitor.js';
import { Relay } from '../relay.js';
import { setup, verify } from '../setup/setup.js';
import { finishesWithin } from '../time.js';
import { EXIT, exitDeadline, type Command } from './command.js';

const PRUNE_ONLY: readonly OptionKey[] = ['pruneRetention', 'pruneEvery', 'pruneBatchSize'];

export const runCommand: Command = {
  summary: 'Stream outbox inserts from the WAL to Kafka until SIGTERM.',
  options: (Object.keys(OPTIONS) as OptionKey[]).filter((key) => !PRUNE_ONLY.includes(key)),
  action: async (flags) => {
    const config = loadConfig({ env: process.env, flags }, runCommand.options);
    const logger = createLogger(config.logLevel);
    logger.info({ config: redactedConfig(config) }, 'starting');
    const target = { databaseUrl: config.databaseUrl, table: config.table, publication: config.publication, slot: config.slot, payloadColumn: config.columnPayload, format: config.format };
    // What setup did (with OUTBOX_SETUP) and found: the payload column's type, settings overridden.
    for (const line of config.setup ? await setup(target) : await verify(target)) logger.info(line);

    const stop = new AbortController();
    const metrics = createRelayMetrics();
    const encoder = await createEncoder(config, { logger, metricsRegistry: metrics.registry, signal: stop.signal });
    const relay = new Relay({ config, logger, metrics, encoder });
    const monitor = new SlotMonitor({ databaseUrl: config.databaseUrl, slot: config.slot, intervalMs: config.slotPollInterval, metrics, logger });
    monitor.start();
    const server =
      config.httpPort === 0
        ? null
        : await startHttpServer(config.httpHost, config.httpPort, {
            registry: metrics.registry,
            readiness: () => [relay.state === 'active' || relay.state === 'standby', relay.state],
            liveness: () => relay.liveness(),
          });
    const onSignal = (signal: NodeJS.Signals) => {
      if (stop.signal.aborted) {
        logger.warn({ signal }, 'second signal: exiting without draining');
        process.exit(EXIT.failed);
      }
      logger.info({ signal }, 'stopping: draining in-flight events');
      exitDeadline(logger, signal, config.shutdownTimeout);
      stop.abort();
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    try {
      const drained = await relay.run(stop.signal);
      logger.info({ drained }, 'stopped');
      return drained ? EXIT.ok : EXIT.drainTimedOut;
    } catch (error) {
      logger.fatal({ code: errorCode(error), err: errorMessage(error) }, 'relay stopped on an error it cannot recover from');
      return EXIT.failed;
    } finally {
      server?.close();
      await finishesWithin(monitor.stop(), 3_000);
    }
  },
};

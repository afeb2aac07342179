import { COMMANDS } from '../config/commands.js';
import { compileRun } from '../config/compile.js';
import { redactedConfig } from '../config/load.js';
import { createEncoders } from '../encode/create-encoder.js';
import { errorCode, errorMessage } from '../errors.js';
import { startHttpServer } from '../observe/http-server.js';
import { createLogger } from '../observe/logger.js';
import { createRelayMetrics } from '../observe/metrics.js';
import { warnOnMissingRuntimeFlag } from '../observe/runtime-flags.js';
import { SlotMonitor } from '../observe/slot-monitor.js';
import { Relay } from '../relay.js';
import { setup, verify } from '../setup/setup.js';
import { finishesWithin } from '../time.js';
import { command, EXIT, exitDeadline } from './command.js';

export const runCommand = command(COMMANDS.run, async (config) => {
  const options = compileRun(config);
  const logger = createLogger(options.logLevel);
  logger.info({ config: redactedConfig(config) }, 'starting');
  warnOnMissingRuntimeFlag(logger);
  // What setup did (with OUTBOX_SETUP) and found: the payload column's type, settings overridden.
  const report = options.setup.create ? await setup(options.setup.target) : await verify(options.setup.target);
  for (const line of report.lines) logger.info(line);

  const stop = new AbortController();
  const metrics = createRelayMetrics();
  // A tenant's table the relay cannot stream: set aside, named; every other outbox streams on.
  for (const [table, reason] of report.quarantined) {
    logger.error({ table, reason }, 'outbox table quarantined: its rows go to the dead-letter topic (OUTBOX_TABLE_QUARANTINED) until it is fixed; every other outbox streams on');
    metrics.quarantinedTables.set({ table }, 1);
  }
  const encoders = await createEncoders(options.encoder, { logger, metricsRegistry: metrics.registry, signal: stop.signal });
  const relay = new Relay({ options: options.relay, logger, metrics, encoders, quarantined: report.quarantined });
  const monitor = new SlotMonitor({ ...options.slotMonitor, metrics, logger });
  monitor.start();
  const server =
    options.http &&
    (await startHttpServer(options.http.host, options.http.port, {
      registry: metrics.registry,
      readiness: () => [relay.state === 'active' || relay.state === 'standby', relay.state],
      liveness: () => relay.liveness(),
    }));
  const onSignal = (signal: NodeJS.Signals) => {
    if (stop.signal.aborted) {
      logger.warn({ signal }, 'second signal: exiting without draining');
      process.exit(EXIT.failed);
    }
    logger.info({ signal }, 'stopping: draining in-flight events');
    exitDeadline(logger, signal, options.relay.shutdownTimeoutMs);
    stop.abort();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    const drained = await relay.run(stop.signal);
    logger.info({ drained }, 'stopped');
    return drained ? EXIT.ok : EXIT.drainTimedOut;
  } catch (error) {
    // A bug (INTERNAL) comes with where it happened: the stack of what nobody classified.
    const cause = error instanceof Error && errorCode(error) === 'INTERNAL' && error.cause instanceof Error ? { stack: error.cause.stack } : {};
    logger.fatal({ code: errorCode(error), err: errorMessage(error), ...cause }, 'relay stopped on an error it cannot recover from');
    return EXIT.failed;
  } finally {
    server?.close();
    await finishesWithin(monitor.stop(), 3_000);
  }
});

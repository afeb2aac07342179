import { COMMANDS } from '../config/commands.js';
import { compileReplay } from '../config/compile.js';
import { createEncoders } from '../encode/create-encoder.js';
import { createLogger } from '../observe/logger.js';
import { createRelayMetrics } from '../observe/metrics.js';
import { replay } from '../ops/replay.js';
import { command, EXIT } from './command.js';

export const replayCommand = command(COMMANDS.replay, async (config) => {
  const options = compileReplay(config);
  const logger = createLogger(options.logLevel, 'outbox-relay-replay');
  const stop = new AbortController();
  const encoders = await createEncoders(options.encoder, { logger, metricsRegistry: createRelayMetrics().registry, signal: stop.signal });
  const { published } = await replay(options, encoders, logger);
  process.stdout.write(`replayed ${published} events\n`);
  return EXIT.ok;
});

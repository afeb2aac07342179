import { COMMANDS } from '../config/commands.js';
import { compileCutover } from '../config/compile.js';
import { createEncoders } from '../encode/create-encoder.js';
import { createLogger } from '../observe/logger.js';
import { createRelayMetrics } from '../observe/metrics.js';
import { cutover, type CutoverReport } from '../ops/cutover.js';
import { command, EXIT } from './command.js';

export const cutoverCommand = command(COMMANDS.cutover, async (config) => {
  const options = compileCutover(config);
  const logger = createLogger(options.logLevel, 'outbox-relay-cutover');
  // A dry run publishes nothing: no schemas or registry needed for it.
  const encoders = options.dryRun ? null : await createEncoders(options.encoder, { logger, metricsRegistry: createRelayMetrics().registry });
  const report = await cutover(options.cutover, { encoders, logger, dryRun: options.dryRun });
  process.stdout.write(describe(report, options.dryRun, options.cutover.pending));
  return EXIT.ok;
});

function describe(report: CutoverReport, dryRun: boolean, pending: string): string {
  const { matching, others, from, to } = report.pending;
  const range = matching > 0 ? ` (created ${from} to ${to})` : '';
  const lines = [
    ...report.setup,
    ...(report.restarted ? ['an earlier cutover did not finish: its slot is dropped and made again with a new snapshot'] : []),
    `${dryRun ? 'would publish' : 'published'}: ${dryRun ? matching : report.published} rows matching ${pending}${range}, in ${report.order} order; ${others} rows do not match (the poller sent them) and are left alone`,
    ...report.indexWarnings.map((warning) => `warning: ${warning}`),
    dryRun
      ? 'nothing changed; run without --dry-run to create the slot and publish them (the poller may keep running: what both send arrives twice, consumers drop it by event_id)'
      : `slot at ${report.newSlotAt}: start \`outbox-relay run\` (it streams what committed after that point), then stop the poller; the relay never writes the poller's status columns`,
  ];
  return `${lines.join('\n')}\n`;
}

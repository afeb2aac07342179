import { COMMANDS } from '../config/commands.js';
import { compileRecover } from '../config/compile.js';
import { createEncoders } from '../encode/create-encoder.js';
import { createLogger } from '../observe/logger.js';
import { createRelayMetrics } from '../observe/metrics.js';
import { recover, type RecoverReport } from '../ops/recover.js';
import { command, EXIT } from './command.js';

export const recoverCommand = command(COMMANDS.recover, async (config) => {
  const options = compileRecover(config);
  const logger = createLogger(options.logLevel, 'outbox-relay-recover');
  // A dry run publishes nothing: no schemas or registry needed for it.
  const encoders = options.dryRun ? null : await createEncoders(options.encoder, { logger, metricsRegistry: createRelayMetrics().registry });
  const report = await recover(options.recover, { encoders, logger, dryRun: options.dryRun });
  process.stdout.write(describe(report, options.dryRun));
  return EXIT.ok;
});

function describe(report: RecoverReport, dryRun: boolean): string {
  const { rows, from, to } = report.republish;
  const range = rows > 0 ? ` (created ${from} to ${to})` : '';
  const proof = report.cause === 'lost'
    ? `${report.provablyDelivered} retained rows are proved delivered by the lost slot's position and the pruner's marks`
    : 'the slot is gone with its position: no retained row can be proved delivered';
  const lines = [
    `slot ${report.cause}; ${proof}`,
    `${dryRun ? 'would publish again' : 'published again'}: ${rows} rows${range}, in ${report.order} order (consumers drop what they already have by event_id)`,
    ...report.unrecoverable.map((outbox) => `message outbox ${outbox} has no rows to publish again: what it emitted after the slot's last confirmed position is not recovered`),
    dryRun ? 'nothing changed; run without --dry-run to re-create the slot and publish them' : `new slot at ${report.newSlotAt}: start \`outbox-relay run\`, it streams what committed after that point`,
  ];
  return `${lines.join('\n')}\n`;
}

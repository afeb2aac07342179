import { COMMANDS } from '../config/commands.js';
import { compileHandback } from '../config/compile.js';
import { createLogger } from '../observe/logger.js';
import { handback } from '../ops/handback.js';
import { command, EXIT } from './command.js';

export const handbackCommand = command(COMMANDS.handback, async (config) => {
  const options = compileHandback(config);
  const logger = createLogger(options.logLevel, 'outbox-relay-handback');
  const report = await handback(options.handback, { logger, dryRun: options.dryRun });
  const lines = [
    `slot ${options.handback.slot} confirmed up to ${report.confirmedAt ?? 'nothing'}; ${report.unconfirmed} events after it were not confirmed`,
    `${options.dryRun ? 'would mark sent' : 'marked sent'}: ${report.marked} pending rows the relay confirmed; left pending: ${report.leftPending} rows the relay had not confirmed (the poller sends them)`,
    options.dryRun ? 'nothing changed; run without --dry-run to mark them and drop the slot' : `slot ${options.handback.slot} dropped: start the poller`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  return EXIT.ok;
});

import { COMMANDS } from '../config/commands.js';
import { schemasCheck } from '../encode/schemas-check.js';
import { command, EXIT } from './command.js';

export const schemasCheckCommand = command(COMMANDS['schemas check'], async (config) => {
  const report = await schemasCheck(config.schemasDir, config.keySchema);
  for (const line of report.lines) process.stdout.write(`${line}\n`);
  return report.ok ? EXIT.ok : EXIT.failed;
});

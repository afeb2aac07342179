import { COMMANDS } from '../config/commands.js';
import { compileStatus } from '../config/compile.js';
import { formatStatus, readStatus } from '../ops/status.js';
import { command, EXIT } from './command.js';

export const statusCommand = command(COMMANDS.status, async (config) => {
  const report = await readStatus(compileStatus(config));
  process.stdout.write(config.json ? `${JSON.stringify(report, null, 2)}\n` : formatStatus(report));
  return EXIT.ok;
});

import { loadConfig } from '../config/load.js';
import { schemasCheck } from '../encode/schemas-check.js';
import { EXIT, type Command } from './command.js';

export const schemasCheckCommand: Command = {
  summary: 'Parse and compile every Avro schema; list problems with file and path (exit 1 if any).',
  options: ['schemasDir', 'keySchema'],
  action: async (flags) => {
    const config = loadConfig({ env: process.env, flags }, schemasCheckCommand.options);
    const report = await schemasCheck(config.schemasDir, config.keySchema);
    for (const line of report.lines) process.stdout.write(`${line}\n`);
    return report.ok ? EXIT.ok : EXIT.failed;
  },
};

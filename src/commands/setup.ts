import { COMMANDS } from '../config/commands.js';
import { setupTarget } from '../config/compile.js';
import { createRoles, printRoles, setup } from '../setup/setup.js';
import { command, EXIT } from './command.js';

export const setupCommand = command(COMMANDS.setup, async (config) => {
  const target = setupTarget(config);
  if (config.printRoles) {
    process.stdout.write(await printRoles(target));
    return EXIT.ok;
  }
  const report = await setup(target);
  for (const action of report.lines) process.stdout.write(`${action}\n`);
  // Set aside, not refused: every other tenant streams; the runbook says how to let it back in.
  for (const [table, reason] of report.quarantined) process.stdout.write(`quarantined ${table}: ${reason}; its rows will be dead letters (OUTBOX_TABLE_QUARANTINED) until it is fixed\n`);
  if (config.createRoles) for (const action of await createRoles(target)) process.stdout.write(`${action}\n`);
  return EXIT.ok;
});

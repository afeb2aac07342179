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
  for (const action of await setup(target)) process.stdout.write(`${action}\n`);
  if (config.createRoles) for (const action of await createRoles(target)) process.stdout.write(`${action}\n`);
  return EXIT.ok;
});

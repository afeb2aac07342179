import { COMMANDS } from '../config/commands.js';
import { setupTarget } from '../config/compile.js';
import { setup } from '../setup/setup.js';
import { command, EXIT } from './command.js';

export const setupCommand = command(COMMANDS.setup, async (config) => {
  for (const action of await setup(setupTarget(config))) process.stdout.write(`${action}\n`);
  return EXIT.ok;
});

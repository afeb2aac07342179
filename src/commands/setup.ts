import { loadConfig } from '../config/load.js';
import { setup } from '../setup/setup.js';
import { DATABASE_OPTIONS, EXIT, type Command } from './command.js';

export const setupCommand: Command = {
  summary: 'Create the outbox table, publication and slot if missing (idempotent); print what it did.',
  options: [...DATABASE_OPTIONS, 'columnPayload'],
  action: async (flags) => {
    const config = loadConfig({ env: process.env, flags }, setupCommand.options);
    const actions = await setup({ databaseUrl: config.databaseUrl, table: config.table, publication: config.publication, slot: config.slot, payloadColumn: config.columnPayload });
    for (const action of actions) process.stdout.write(`${action}\n`);
    return EXIT.ok;
  },
};

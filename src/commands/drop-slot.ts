import { COMMANDS } from '../config/commands.js';
import { dropSlot } from '../ops/drop-slot.js';
import { databaseAccess } from '../pg-connection.js';
import { command, EXIT } from './command.js';

export const dropSlotCommand = command(COMMANDS['drop-slot'], async (config) => {
  const dropped = await dropSlot(databaseAccess(config.databaseUrl, config.databasePassword), config.slot);
  process.stdout.write(
    `dropped slot ${config.slot}; it had confirmed up to ${dropped.confirmedFlushLsn ?? '-'} (${dropped.lagBytes ?? 0} bytes of WAL behind). ` +
      `Run \`outbox-relay setup\` to create it again, and \`outbox-relay replay --since <time>\` for events committed since then.\n`,
  );
  return EXIT.ok;
});

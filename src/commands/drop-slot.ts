import { COMMANDS } from '../config/commands.js';
import { dropSlot } from '../ops/drop-slot.js';
import { slotServer } from '../config/compile.js';
import { command, EXIT } from './command.js';

export const dropSlotCommand = command(COMMANDS['drop-slot'], async (config) => {
  const dropped = await dropSlot(slotServer(config).database, config.slot);
  process.stdout.write(
    `dropped slot ${config.slot}; it had confirmed up to ${dropped.confirmedFlushLsn ?? '-'} (${dropped.lagBytes ?? 0} bytes of WAL behind). ` +
      `\`outbox-relay recover\` creates it again and publishes the retained rows it cannot prove delivered (\`--dry-run\` first says how many).\n`,
  );
  return EXIT.ok;
});

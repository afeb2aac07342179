import { loadConfig } from '../config/load.js';
import { RelayError } from '../errors.js';
import { dropSlot } from '../ops/drop-slot.js';
import { DATABASE_OPTIONS, EXIT, type Command } from './command.js';

export const dropSlotCommand: Command = {
  summary: 'Drop the replication slot (releases the WAL it holds; events after its position are then never streamed).',
  options: DATABASE_OPTIONS,
  args: { yes: 'confirm: you accept that unconfirmed events must be replayed with `outbox-relay replay`' },
  switches: ['yes'],
  action: async (flags) => {
    const config = loadConfig({ env: process.env, flags }, DATABASE_OPTIONS);
    if (!('yes' in flags)) {
      throw new RelayError('CONFIG_INVALID', `drop-slot needs --yes: dropping "${config.slot}" releases its WAL, and events committed after its confirmed position will never be streamed (replay them with \`outbox-relay replay --since ...\`)`);
    }
    const dropped = await dropSlot(config.databaseUrl, config.slot);
    process.stdout.write(
      `dropped slot ${config.slot}; it had confirmed up to ${dropped.confirmedFlushLsn ?? '-'} (${dropped.lagBytes ?? 0} bytes of WAL behind). ` +
        `Run \`outbox-relay setup\` to create it again, and \`outbox-relay replay --since <time>\` for events committed since then.\n`,
    );
    return EXIT.ok;
  },
};

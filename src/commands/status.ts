import { loadConfig } from '../config/load.js';
import type { OptionKey } from '../config/options.js';
import { formatStatus, readStatus } from '../ops/status.js';
import { DATABASE_OPTIONS, EXIT, type Command } from './command.js';

const OPTIONS: readonly OptionKey[] = [...DATABASE_OPTIONS, 'columnCreatedAt', 'deadLetterTopic'];

export const statusCommand: Command = {
  summary: 'Slot, active reader, lag, wal_status, outbox size and dead letters (KAFKA_BROKERS optional).',
  options: [...OPTIONS, 'kafkaBrokers'],
  args: { json: 'print JSON instead of a table' },
  switches: ['json'],
  action: async (flags) => {
    const config = loadConfig({ env: process.env, flags }, OPTIONS);
    // Kafka is optional here: status must work when the broker is the thing that is down.
    const brokers = flags['kafka-brokers'] ?? process.env.KAFKA_BROKERS;
    const report = await readStatus({
      databaseUrl: config.databaseUrl,
      slot: config.slot,
      publication: config.publication,
      table: config.table,
      createdAtColumn: config.columnCreatedAt,
      kafkaBrokers: brokers ? brokers.split(',').map((broker) => broker.trim()) : null,
      deadLetterTopic: config.deadLetterTopic,
    });
    process.stdout.write('json' in flags ? `${JSON.stringify(report, null, 2)}\n` : formatStatus(report));
    return EXIT.ok;
  },
};

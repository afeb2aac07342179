import { loadConfig } from '../config/load.js';
import { createEncoder } from '../encode/create-encoder.js';
import { RelayError } from '../errors.js';
import { createLogger } from '../observe/logger.js';
import { createRelayMetrics } from '../observe/metrics.js';
import { replay, type ReplayFilter } from '../ops/replay.js';
import { EXIT, type Command } from './command.js';
import { runCommand } from './run.js';

export const replayCommand: Command = {
  summary: 'Publish retained outbox rows again (by time range, event type or event id), with their original event_id.',
  options: runCommand.options,
  args: {
    since: 'created_at at or after this ISO time',
    until: 'created_at before this ISO time',
    'event-type': 'comma-separated event types',
    'event-id': 'comma-separated event ids',
  },
  action: async (flags) => {
    const config = loadConfig({ env: process.env, flags }, replayCommand.options);
    const logger = createLogger(config.logLevel, 'outbox-relay-replay');
    const filter: ReplayFilter = {
      since: time(flags, 'since'),
      until: time(flags, 'until'),
      eventTypes: list(flags['event-type']),
      eventIds: list(flags['event-id']),
    };
    const stop = new AbortController();
    const encoder = await createEncoder(config, { logger, metricsRegistry: createRelayMetrics().registry, signal: stop.signal });
    const { published } = await replay(config, filter, encoder, logger);
    process.stdout.write(`replayed ${published} events\n`);
    return EXIT.ok;
  },
};

function time(flags: Readonly<Record<string, string>>, name: string): Date | undefined {
  const raw = flags[name];
  if (raw === undefined) return undefined;
  const date = new Date(raw);
  if (Number.isNaN(date.getTime())) throw new RelayError('CONFIG_INVALID', `--${name}=${JSON.stringify(raw)} is not a time; expected ISO 8601, e.g. 2026-11-29T10:00:00Z`);
  return date;
}

function list(raw: string | undefined): string[] | undefined {
  return raw === undefined ? undefined : raw.split(',').map((item) => item.trim()).filter(Boolean);
}

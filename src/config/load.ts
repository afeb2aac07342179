import { RelayError } from '../errors.js';
import { flagName, OPTIONS, type OptionKey, type RelayConfig } from './options.js';
import * as p from './parsers.js';

export interface ConfigSources {
  readonly env: Readonly<Record<string, string | undefined>>;
  /** A command's own defaults where they differ from the options' (prune serves on 9465, not 9464). */
  readonly defaults?: Readonly<Partial<Record<OptionKey, string>>>;
  /** Flag values by flag name without dashes, e.g. { 'topic-template': 'x' }. */
  readonly flags?: Readonly<Record<string, string>>;
}

/**
 * Builds the one frozen config object. Flags win over environment, environment over defaults.
 * Every problem is collected, so an operator sees all typos at once, each with the variable's
 * name and what was expected.
 */
export function loadConfig(sources: ConfigSources, only?: readonly OptionKey[]): RelayConfig {
  const values: Record<string, unknown> = {};
  const problems: string[] = [];
  const keys = only ?? (Object.keys(OPTIONS) as OptionKey[]);
  for (const key of keys) {
    const spec = OPTIONS[key];
    const flag = flagName(key);
    const given = sources.flags?.[flag.slice(2)];
    // A boolean flag given bare (`--setup`) means true; an empty variable means nothing.
    const fromFlag = given === '' && spec.parser === p.boolean ? 'true' : given;
    const raw = fromFlag ?? sources.env[spec.env] ?? sources.defaults?.[key] ?? spec.default;
    const origin = fromFlag !== undefined ? flag : spec.env;
    if (raw === undefined) {
      problems.push(`${spec.env} (or ${flag}) is required: ${spec.description} Expected ${spec.parser.expected}.`);
      continue;
    }
    try {
      values[key] = spec.parser.parse(raw);
    } catch (error) {
      const shown = 'secret' in spec && spec.secret ? '(redacted)' : JSON.stringify(raw);
      problems.push(`${origin}=${shown} ${(error as Error).message}; expected ${spec.parser.expected}.`);
    }
  }
  if (problems.length > 0) {
    throw new RelayError('CONFIG_INVALID', `invalid configuration:\n  - ${problems.join('\n  - ')}`, { details: { problems } });
  }
  const config = values as RelayConfig;
  if (keys.includes('reconnectMin') && keys.includes('reconnectMax') && config.reconnectMin > config.reconnectMax) {
    throw new RelayError('CONFIG_INVALID', `invalid configuration: OUTBOX_RECONNECT_MIN (${config.reconnectMin}ms) exceeds OUTBOX_RECONNECT_MAX (${config.reconnectMax}ms)`);
  }
  if (keys.includes('batchMaxEvents') && keys.includes('maxBufferedEvents') && config.batchMaxEvents > config.maxBufferedEvents) {
    throw new RelayError('CONFIG_INVALID', `invalid configuration: OUTBOX_BATCH_MAX_EVENTS (${config.batchMaxEvents}) exceeds OUTBOX_MAX_BUFFERED_EVENTS (${config.maxBufferedEvents})`);
  }
  return Object.freeze(config);
}

/** The config as it may be logged: secrets replaced, connection-string passwords removed. */
export function redactedConfig(config: Partial<RelayConfig>): Record<string, unknown> {
  const shown: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(config)) {
    const spec = OPTIONS[key as OptionKey];
    shown[key] = 'secret' in spec && spec.secret ? redactUrl(String(value)) : value;
  }
  return shown;
}

function redactUrl(value: string): string {
  try {
    const url = new URL(value);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return '***';
  }
}

import { errorMessage, RelayError } from '../errors.js';
import { redactConnectionString } from '../security/redact.js';
import { Secret } from '../security/secret.js';
import { argFlag, type Args, type CommandSpec, type Loaded } from './commands.js';
import { CHECKS, flagName, OPTIONS, type OptionKey, type OptionSpec, type RelayConfig } from './options.js';
import * as p from './parsers.js';

export interface ConfigSources {
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Flag values by flag name without dashes, e.g. { 'topic-template': 'x' }. */
  readonly flags?: Readonly<Record<string, string>>;
}

/**
 * Loads what one command reads into one frozen object: flags win over environment, environment
 * over the command's defaults, those over the declared ones. Every problem is collected, the
 * cross-field checks' with the others, so an operator sees all typos at once, each with the
 * variable's (or flag's) name and what was expected.
 */
export function load<K extends OptionKey, O extends K, A extends Args>(command: CommandSpec<K, O, A>, sources: ConfigSources): Loaded<K, O, A> {
  const values: Record<string, unknown> = {};
  /** How the operator set each value, for messages: its flag if given, else its variable. */
  const names: Record<string, string> = {};
  /** Values no check may use: invalid, or optional and left unset. */
  const unusable = new Set<string>();
  const problems: string[] = [];
  for (const key of command.options) {
    const spec: OptionSpec<unknown> = OPTIONS[key];
    const flag = flagName(key);
    const given = sources.flags?.[flag.slice(2)];
    // A boolean flag given bare (`--setup`) means true; an empty variable means nothing.
    const fromFlag = given === '' && spec.parser === p.boolean ? 'true' : given;
    // A secret may come from a file instead (<env>_FILE), never from both.
    const fileVariable = spec.file ? `${spec.env}_FILE` : null;
    const file = fileVariable ? sources.env[fileVariable] : undefined;
    if (spec.file && fileVariable && file !== undefined && file !== '') {
      names[key] = fileVariable;
      if (fromFlag !== undefined || sources.env[spec.env] !== undefined) {
        problems.push(`${fileVariable} and ${fromFlag !== undefined ? flag : spec.env} are both set; give the secret one way`);
        unusable.add(key);
        continue;
      }
      try {
        values[key] = spec.file(file);
      } catch (error) {
        problems.push(`${errorMessage(error)}; expected ${spec.parser.expected}.`);
        unusable.add(key);
      }
      continue;
    }
    const raw = fromFlag ?? sources.env[spec.env] ?? command.defaults?.[key] ?? spec.default;
    names[key] = fromFlag !== undefined ? flag : spec.env;
    const optional = command.optional?.some((each) => each === key) ?? false;
    if (raw === undefined && !optional) {
      const alternatives = fileVariable ? `${flag}, or ${fileVariable} naming a file` : flag;
      problems.push(`${spec.env} (or ${alternatives}) is required: ${spec.description} Expected ${spec.parser.expected}.`);
      unusable.add(key);
      continue;
    }
    const parser = optional ? p.optional(spec.parser) : spec.parser;
    try {
      values[key] = raw === undefined ? null : parser.parse(raw);
      if (values[key] === null && optional) unusable.add(key);
    } catch (error) {
      const shown = spec.secret ? '(redacted)' : JSON.stringify(raw);
      problems.push(`${names[key]}=${shown} ${(error as Error).message}; expected ${parser.expected}.`);
      unusable.add(key);
    }
  }
  for (const [name, arg] of Object.entries(command.args ?? {})) {
    const flag = argFlag(name);
    const given = sources.flags?.[flag.slice(2)];
    names[name] = flag;
    if ('switch' in arg) {
      values[name] = given !== undefined;
      continue;
    }
    try {
      values[name] = given === undefined ? undefined : arg.parser.parse(given);
    } catch (error) {
      problems.push(`${flag}=${JSON.stringify(given)} ${(error as Error).message}; expected ${arg.parser.expected}.`);
      unusable.add(name);
    }
  }
  const name = (key: string) => names[key]!;
  const applies = (uses: readonly string[]) => uses.every((key) => key in names) && !uses.some((key) => unusable.has(key));
  for (const check of CHECKS) {
    const problem = applies(check.uses) ? check.problem(values as RelayConfig, name) : null;
    if (problem) problems.push(problem);
  }
  for (const check of command.checks ?? []) {
    const problem = applies(check.uses) ? check.problem(values as Loaded<K, O, A>, name) : null;
    if (problem) problems.push(problem);
  }
  if (problems.length > 0) {
    throw new RelayError('CONFIG_INVALID', `invalid configuration:\n  - ${problems.join('\n  - ')}`, { details: { problems } });
  }
  return Object.freeze(values) as Loaded<K, O, A>;
}

/**
 * How the operator set an option, as messages name it: its flag, `<env>_FILE` or its variable;
 * null when none of them is set (or each is empty).
 */
export function settingName(key: OptionKey, sources: ConfigSources): string | null {
  const spec: OptionSpec<unknown> = OPTIONS[key];
  const flag = flagName(key);
  if ((sources.flags?.[flag.slice(2)] ?? '') !== '') return flag;
  if (spec.file && (sources.env[`${spec.env}_FILE`] ?? '') !== '') return `${spec.env}_FILE`;
  return (sources.env[spec.env] ?? '') !== '' ? spec.env : null;
}

/**
 * The config as it may be logged: a secret URL (DATABASE_URL, SCHEMA_REGISTRY_URL) with its
 * password and every secret parameter masked, so the operator still sees where it points; any
 * other secret as "(redacted)"; where a secret came from a file, the file.
 */
export function redactedConfig(config: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const shown: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(config)) {
    if (!(value instanceof Secret)) {
      shown[key] = value;
      continue;
    }
    const isUrl = /^[a-z][a-z0-9+.-]*:\/\//i.test(value.reveal());
    shown[key] = isUrl ? `${redactConnectionString(value.reveal())}${value.file ? ` (from ${value.file})` : ''}` : value.toJSON();
  }
  return shown;
}

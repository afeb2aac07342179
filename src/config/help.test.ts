import { describe, expect, it } from 'vitest';
import { argFlag, COMMANDS, type CommandHelp, type CommandName } from './commands.js';
import { commandHelp, usage } from './help.js';
import { flagName, OPTIONS, type OptionKey } from './options.js';

const names = Object.keys(COMMANDS) as CommandName[];
const allOptions = Object.keys(OPTIONS) as OptionKey[];

/** The flags `--help` lists as options, with what it says of each: required, optional or its default. */
function listedOptions(help: string): Map<string, string> {
  return new Map([...help.matchAll(/^ {2}(--[a-z-]+) {2}\[[A-Z_]+\] \((required|optional|default: [^)]*)\)$/gm)].map(([, flag, shown]) => [flag!, shown!]));
}

/** The top-level help's "needs" line under a command. */
function needsInUsage(name: CommandName): string | undefined {
  const lines = usage().split('\n');
  // A long name stands alone on its line, its summary on the next.
  const at = lines.findIndex((line) => line.startsWith(`  ${name.padEnd(14)} `) || line === `  ${name}`);
  const next = lines[at + (lines[at] === `  ${name}` ? 2 : 1)] ?? '';
  return /^ {17}\S/.test(next) ? next.trim() : undefined;
}

describe('command help', () => {
  it('lists exactly the options each command reads, and its own arguments', () => {
    for (const name of names) {
      const spec: CommandHelp = COMMANDS[name];
      const help = commandHelp(name);
      expect([...listedOptions(help).keys()].sort(), name).toEqual(spec.options.map(flagName).sort());
      for (const arg of Object.keys(spec.args ?? {})) expect(help, name).toMatch(new RegExp(`^ {2}${argFlag(arg)}$`, 'm'));
    }
  });

  it('keeps run-only and prune-only options out of replay, and relay options out of prune', () => {
    const replay = listedOptions(commandHelp('replay'));
    for (const flag of ['--slot', '--publication', '--http-port', '--http-host', '--stall-timeout', '--shutdown-timeout', '--standby-poll', '--setup', '--slot-poll-interval', '--on-unexpected-change', '--retention', '--every']) {
      expect(replay.has(flag), flag).toBe(false);
    }
    for (const flag of ['--kafka-brokers', '--topic-template', '--format', '--column-payload']) expect(replay.has(flag), flag).toBe(true);
    const prune = listedOptions(commandHelp('prune'));
    for (const flag of ['--kafka-brokers', '--topic-template', '--format', '--linger']) expect(prune.has(flag), flag).toBe(false);
    expect(prune.get('--http-port')).toBe('default: 9465');
    expect(listedOptions(commandHelp('run')).get('--http-port')).toBe('default: 9464');
  });

  it('agrees with the top-level help on what each command needs', () => {
    for (const name of names) {
      const help = commandHelp(name);
      const required = [...listedOptions(help)].filter(([, shown]) => shown === 'required').map(([flag]) => OPTIONS[allOptions.find((key) => flagName(key) === flag)!].env);
      const optional = [...listedOptions(help)].filter(([, shown]) => shown === 'optional').map(([flag]) => OPTIONS[allOptions.find((key) => flagName(key) === flag)!].env);
      const needed = [...(required.length > 0 ? [`needs ${required.join(', ')}`] : []), ...optional.map((env) => `${env} optional`)].join('; ') || undefined;
      expect(needsInUsage(name), name).toBe(needed);
      if (needed) expect(help.split('\n')[1], name).toBe(needed);
    }
    expect(needsInUsage('status')).toBe('needs DATABASE_URL; KAFKA_BROKERS optional');
    expect(listedOptions(commandHelp('status')).get('--kafka-brokers')).toBe('optional');
    expect(needsInUsage('run')).toBe('needs DATABASE_URL, KAFKA_BROKERS');
    expect(needsInUsage('schemas check')).toBeUndefined();
  });

  it('lists options by group, in the declared order', () => {
    const help = commandHelp('status');
    expect(help.indexOf('Postgres (flag')).toBeLessThan(help.indexOf('--database-url'));
    expect(help.indexOf('--database-url')).toBeLessThan(help.indexOf('Kafka (flag'));
    expect(help.indexOf('Kafka (flag')).toBeLessThan(help.indexOf('--kafka-brokers'));
  });
});

describe('declarations', () => {
  it('give every flag of a command one meaning', () => {
    for (const name of names) {
      const spec: CommandHelp = COMMANDS[name];
      const flags = [...spec.options.map(flagName), ...Object.keys(spec.args ?? {}).map(argFlag)];
      expect(new Set(flags).size, name).toBe(flags.length);
    }
    expect(new Set(allOptions.map(flagName)).size).toBe(allOptions.length);
    expect(new Set(allOptions.map((key) => OPTIONS[key].env)).size).toBe(allOptions.length);
  });

  it('have every option read by some command, and every command default or optional be one of its options', () => {
    for (const key of allOptions) expect(names.some((name) => (COMMANDS[name] as CommandHelp).options.includes(key)), key).toBe(true);
    for (const name of names) {
      const spec: CommandHelp = COMMANDS[name];
      for (const key of [...Object.keys(spec.defaults ?? {}), ...(spec.optional ?? [])]) expect(spec.options, name).toContain(key);
    }
  });
});

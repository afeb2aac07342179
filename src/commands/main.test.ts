import { describe, expect, it, vi } from 'vitest';
import { main, tablesNamedBy } from './main.js';

/** Runs the CLI in-process on cases that end before any connection: exit code and output. */
async function cli(argv: string[], env: Record<string, string> = {}) {
  const stdout = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
  const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
  try {
    const code = await main(argv, env);
    return { code, stdout: stdout.mock.calls.map(([text]) => String(text)).join(''), stderr: stderr.mock.calls.map(([text]) => String(text)).join('') };
  } finally {
    vi.restoreAllMocks();
  }
}

describe('outbox-relay', () => {
  it('status goes through the same loader: its problems, KAFKA_BROKERS included, are reported with exit 2', async () => {
    const result = await cli(['status'], { DATABASE_URL: 'mysql://db/billing', KAFKA_BROKERS: ',', OUTBOX_SLOT: 'bad-slot' });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^invalid configuration:\n/);
    expect(result.stderr).toMatch(/DATABASE_URL=\(redacted\) is a mysql: URL/);
    expect(result.stderr).toMatch(/KAFKA_BROKERS="," is empty/);
    expect(result.stderr).toMatch(/OUTBOX_SLOT="bad-slot" is not a plain SQL identifier/);
  });

  it('reports a cross-field problem of a command with a bad option, before touching anything', async () => {
    const result = await cli(['replay', '--format', 'avro'], { DATABASE_URL: 'postgres://db/billing', KAFKA_BROKERS: 'k:9092', OUTBOX_LINGER: 'soon' });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/OUTBOX_LINGER="soon" is not a duration/);
    expect(result.stderr).toMatch(/SCHEMA_REGISTRY_URL is required with --format=avro/);
    expect(result.stderr).toMatch(/replay needs at least one of --since/);
  });

  it('refuses a mistyped flag, and only warns about an option the command does not read', async () => {
    const typo = await cli(['drop-slot', '--yse'], { DATABASE_URL: 'postgres://db/billing' });
    expect(typo.code).toBe(2);
    expect(typo.stderr).toMatch(/unknown option --yse for `drop-slot`/);
    const unread = await cli(['drop-slot', '--table', 'billing.outbox'], { DATABASE_URL: 'postgres://db/billing' });
    expect(unread.code).toBe(2);
    expect(unread.stderr).toMatch(/--table is not read by `drop-slot`; ignored/);
    expect(unread.stderr).toMatch(/drop-slot needs --yes/);
    const stray = await cli(['status', '--json', 'extra'], {});
    expect(stray.code).toBe(2);
    expect(stray.stderr).toMatch(/--json takes no value \(got "extra"\)/);
  });

  it('refuses a broker without a port as configuration, naming KAFKA_BROKERS and the form it takes', async () => {
    const result = await cli(['status'], { DATABASE_URL: 'postgres://db/billing', KAFKA_BROKERS: '127.0.0.1' });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/KAFKA_BROKERS="127\.0\.0\.1" has "127\.0\.0\.1", which is not host:port \(no port\); expected comma-separated host:port pairs, e\.g\. kafka-1:9092,kafka-2:9092/);
  });

  it("prints a failure with the relay's code, the driver's own kept in the message", async () => {
    // Nothing listens on port 1: the connection is refused at once, no server needed.
    const result = await cli(['status'], { DATABASE_URL: 'postgres://relay@127.0.0.1:1/billing' });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^outbox-relay status failed \[SOURCE_DISCONNECTED\]: cannot reach Postgres \(ECONNREFUSED: connect ECONNREFUSED 127\.0\.0\.1:1\)/);
  });

  it('says what a command read its tables from as the operator set it: OUTBOX_SOURCES (or its file, or flag) when given, else OUTBOX_TABLE', () => {
    const sources = '[{"table":"billing.outbox"}]';
    const outbox = (tables: string) => ({ tables, of: 'outbox' });
    expect(tablesNamedBy('status', { env: { OUTBOX_SOURCES: sources } })).toEqual(outbox('OUTBOX_SOURCES'));
    expect(tablesNamedBy('prune', { env: { OUTBOX_SOURCES_FILE: '/etc/relay/sources.json' } })).toEqual(outbox('OUTBOX_SOURCES_FILE'));
    expect(tablesNamedBy('setup', { env: {}, flags: { sources } })).toEqual(outbox('--sources'));
    expect(tablesNamedBy('status', { env: { OUTBOX_SOURCES: '' } })).toEqual(outbox('OUTBOX_TABLE'));
    expect(tablesNamedBy('replay', { env: {}, flags: { table: 'billing.outbox' } })).toEqual(outbox('--table'));
    expect(tablesNamedBy('webhooks setup', { env: {} })).toEqual({ tables: 'OUTBOX_WEBHOOK_SCHEMA', of: 'webhooks' });
  });

  it('prints the help of a command, and of the family of two-word commands', async () => {
    const replay = await cli(['replay', '--help']);
    expect(replay.code).toBe(0);
    expect(replay.stdout).toMatch(/^outbox-relay replay: /);
    expect(replay.stdout).not.toMatch(/--http-port/);
    const schemas = await cli(['schemas', '--help']);
    expect(schemas.code).toBe(0);
    expect(schemas.stdout).toMatch(/schemas check +Parse and compile/);
    const top = await cli([]);
    expect(top.code).toBe(2);
    expect(top.stdout).toMatch(/^usage: outbox-relay <command>/);
  });
});

import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestOutbox } from '../harness/outbox.js';
import { useTestWebhooks } from '../harness/webhooks.js';

const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
/** Enough for well over a pipe's 64 KiB in either format (about 1.7 MB of JSON, 0.9 MB of text). */
const DELIVERIES = 5000;

interface Piped {
  /** What the reader passed on. */
  readonly stdout: string;
  readonly stderr: string;
  /** The CLI's own exit status, not the reader's. */
  readonly cliExit: number;
  /** From the start of the shell to the CLI's exit, which a reader still running does not delay. */
  readonly cliMs: number;
}

/**
 * `outbox-relay <args> | <reader>` run by a shell, as a user runs it: the CLI's stdout is a real
 * pipe, and the CLI's status and exit time are reported on stderr the moment it ends.
 */
function piped(args: readonly string[], reader: string, env: Record<string, string>): Promise<Piped> {
  const started = Date.now();
  const child = spawn('bash', ['-c', `{ "$0" "$@"; echo "cli exited $?" >&2; } | ${reader}`, process.execPath, CLI, ...args], {
    env: { PATH: process.env.PATH ?? '', ...env },
    // Not a socket (what Node's own pipes are): bash would take itself for a remote shell and read ~/.bashrc.
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let cliMs = -1;
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
    if (cliMs < 0 && /cli exited \d+/.test(stderr)) cliMs = Date.now() - started;
  });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', () => {
      const exit = /cli exited (\d+)/.exec(stderr);
      if (!exit) reject(new Error(`the CLI's status never came: ${stderr}`));
      else resolve({ stdout, stderr, cliExit: Number(exit[1]), cliMs });
    });
  });
}

function received(result: Piped): string {
  return `${Buffer.byteLength(result.stdout)} bytes arrived, the CLI exited ${result.cliExit}; stderr: ${result.stderr}`;
}

function parsed(json: string): unknown {
  try {
    return JSON.parse(json);
  } catch (error) {
    return `not JSON: ${(error as Error).message}`;
  }
}

/**
 * A listing larger than a pipe holds, printed to a reader that starts late (`| jq`), arrives
 * whole; output whose reader went away before taking it all is not an exit 0.
 */
describe('CLI output through a pipe', () => {
  const outbox = new TestOutbox();
  afterAll(() => outbox.destroy());
  const webhooks = useTestWebhooks(outbox);

  beforeAll(async () => {
    await webhooks.query(`INSERT INTO wh.endpoints (id, url, event_types, secrets) VALUES ('ep_pipe', 'http://127.0.0.1:1/x', ARRAY['invoice.*'], '[{"secret":"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw","expires_at":null}]')`);
    await webhooks.query(`INSERT INTO wh.events (event_id, event_type, aggregate_id, body, produced_at) SELECT 'evt_pipe_' || i, 'invoice.paid', 'inv_' || i, '{}', now() FROM generate_series(1, $1::int) i`, [DELIVERIES]);
    await webhooks.query(
      `INSERT INTO wh.deliveries (event_id, endpoint_id, status, attempts, failures, next_attempt_at, finished_at, last_error)
       SELECT 'evt_pipe_' || i, 'ep_pipe', 'failed', 8, 8, now(), now(), 'HTTP 503 from the endpoint' FROM generate_series(1, $1::int) i`,
      [DELIVERIES],
    );
  });

  it('prints every delivery, as JSON and as a table, to a reader that starts a second late, and exits 0', async () => {
    const json = await piped(['webhooks', 'deliveries', 'list', '--json', '--limit', String(DELIVERIES)], '(sleep 1; cat)', webhooks.env());
    const deliveries = parsed(json.stdout);
    expect(Array.isArray(deliveries) && deliveries.length, received(json)).toBe(DELIVERIES);
    expect(json.cliExit, received(json)).toBe(0);

    const text = await piped(['webhooks', 'deliveries', 'list', '--limit', String(DELIVERIES)], '(sleep 1; cat)', webhooks.env());
    // A header line, then one line per delivery.
    const lines = text.stdout.split('\n');
    expect(text.stdout.endsWith('\n') && lines.length - 2, received(text)).toBe(DELIVERIES);
    expect(lines.slice(1, -1).every((line) => line.includes('ep_pipe')), received(text)).toBe(true);
    expect(text.cliExit, received(text)).toBe(0);
  });

  it('exits 1, not 0, when its reader goes away before taking all of the output', async () => {
    const result = await piped(['webhooks', 'deliveries', 'list', '--json', '--limit', String(DELIVERIES)], '(sleep 1; exit 0)', webhooks.env());
    expect(result.cliExit, received(result)).toBe(1);
    // No stack trace of an unheard EPIPE.
    expect(result.stderr, received(result)).not.toMatch(/EPIPE|Error:/);
  });

  it('exits 1, not 0, when its reader is gone before its first write', async () => {
    // `true` exits at once: the CLI's first write meets a pipe nobody reads, and fails there and then.
    const result = await piped(['webhooks', 'deliveries', 'list', '--json', '--limit', String(DELIVERIES)], 'true', webhooks.env());
    expect(result.cliExit, received(result)).toBe(1);
    expect(result.stderr, received(result)).not.toMatch(/EPIPE|Error:/);
  });
});

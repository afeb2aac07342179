import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

// OUTBOX_TEST_CLI: a build of one's own (a dist made beside dist/), which others' builds of the shared checkout do not replace mid-run.
const CLI = process.env.OUTBOX_TEST_CLI ?? fileURLToPath(new URL('../../dist/cli.js', import.meta.url));

export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `outbox-relay <args>` to completion, as an operator would. */
export function cli(args: readonly string[], env: Record<string, string>, timeoutMs = 120_000): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, timeout: timeoutMs }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

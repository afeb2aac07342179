#!/usr/bin/env -S node --max-semi-space-size=16
// The flag: see src/observe/runtime-flags.ts (`run` warns when started without it).
import { EXIT } from './commands/command.js';
import { main } from './commands/main.js';
import { dropKafkajsTimerWarning } from './observe/process-warnings.js';

/**
 * True once everything written to `stream` has left the process (into the pipe, which outlives
 * it); false when the reader closed its end first (EPIPE: `| head`). Waited for as long as the
 * reader takes, as any command blocked on a write waits: a pager (`| less`) reads only as the
 * operator scrolls, and a bound would cut what it had not shown yet.
 */
function flushed(stream: NodeJS.WriteStream): Promise<boolean> {
  // A write that met a reader already gone failed there and then, leaving nothing queued.
  if (stream.errored) return Promise.resolve(false);
  if (stream.writableLength === 0) return Promise.resolve(true);
  return new Promise((resolve) => {
    // Writes complete in order: this one's callback runs once every write before it has.
    stream.write('', (error) => resolve(!error));
  });
}

// A reader gone is read from the stream (`flushed`); unheard, the 'error' would end the process
// with an uncaught exception's stack instead.
for (const stream of [process.stdout, process.stderr]) stream.on('error', () => undefined);

dropKafkajsTimerWarning();

const code = await main(process.argv.slice(2), process.env);
// Writes to a pipe are asynchronous: exiting at once dropped what the pipe had no room for yet
// (64 KiB), with exit 0. Logs need no wait, being written synchronously.
const delivered = await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
// The command decided the outcome, unless its reader went away before all of its output. Exiting rather than
// returning: a socket still open to a silent peer (or a driver's timer) must not keep the
// process, and its exit code, waiting.
process.exit(code === EXIT.ok && delivered.includes(false) ? EXIT.failed : code);

#!/usr/bin/env -S node --max-semi-space-size=16
// The flag: see src/observe/runtime-flags.ts (`run` warns when started without it).
// First: the relay's kafkajs replacements go in before anything loads kafkajs (see the module).
import './sink/kafkajs-patches.js';
import { EXIT } from './commands/command.js';
import { main } from './commands/main.js';
import { dropKafkajsTimerWarning } from './observe/process-warnings.js';

/**
 * How long the process waits for a reader to take the rest of its output. A pipe's reader takes
 * it in milliseconds once it reads, even one that starts late (`| jq`); one that never reads (a
 * stopped pager, a hung consumer) must not hold the process, and its exit code, for ever.
 */
const OUTPUT_BOUND_MS = 5_000;

/**
 * True once everything written to `stream` has left the process (into the pipe, which outlives
 * it): false when the reader closed its end (EPIPE: `| head`) or did not make room for it all
 * within the bound.
 */
function flushed(stream: NodeJS.WriteStream, name: string): Promise<boolean> {
  if (stream.writableLength === 0) return Promise.resolve(true);
  return new Promise((resolve) => {
    const bound = setTimeout(() => {
      process.stderr.write(`outbox-relay: output cut off: ${name}'s reader did not take it all within ${OUTPUT_BOUND_MS / 1000} s\n`);
      resolve(false);
    }, OUTPUT_BOUND_MS);
    // A reader gone is reported to the callback below; unheard, the 'error' would end the
    // process with an uncaught exception's stack instead.
    stream.once('error', () => undefined);
    // Writes complete in order: this one's callback runs once every write before it has.
    stream.write('', (error) => {
      clearTimeout(bound);
      resolve(!error);
    });
  });
}

dropKafkajsTimerWarning();

const code = await main(process.argv.slice(2), process.env);
// Writes to a pipe are asynchronous: exiting at once drops what the pipe had no room for yet
// (issue 46). Logs need no wait, being written synchronously.
const delivered = await Promise.all([flushed(process.stdout, 'stdout'), flushed(process.stderr, 'stderr')]);
// The command decided the outcome, unless part of its output never arrived. Exiting rather than
// returning: a socket still open to a silent peer (or a driver's timer) must not keep the
// process, and its exit code, waiting.
process.exit(code === EXIT.ok && delivered.includes(false) ? EXIT.failed : code);

// docs/errors.md: every error code, from where the codes are declared (src/errors.ts, src/client/errors.ts).
import { CLIENT_ERROR_CODES, type ClientErrorCode } from '../../src/client/errors.js';
import { EXIT, exitCodeOf } from '../../src/commands/command.js';
import { ERROR_CODES, type CodeSpec, type ErrorCode } from '../../src/errors.js';
import { HEADER } from '../../src/transform/headers.js';
import { code, table } from './markdown.js';

export const ERRORS_INTRO = `# Errors

What each error code means and what to do about it.`;

const RELAY_CODES = Object.keys(ERROR_CODES) as ErrorCode[];
const CLIENT_CODES = Object.keys(CLIENT_ERROR_CODES) as ClientErrorCode[];

const anchor = (name: string) => `[${code(name)}](#${name.toLowerCase()})`;

/** What a code does to the relay and to a command's exit, as retry logic and the CLI decide (errors.ts, commands/command.ts). */
function outcome(name: ErrorCode): { retriable: string; deadLetter: string; exit: string } {
  const spec: CodeSpec = ERROR_CODES[name];
  return {
    retriable: spec.retriable ? 'yes: `run` reconnects' : 'no',
    deadLetter: spec.poison ? 'yes: the stream goes on' : 'no',
    exit: spec.logOnly ? 'none: logged and counted' : spec.poison ? `none (${EXIT.failed} with OUTBOX_ON_POISON=fail)` : String(exitCodeOf(name)),
  };
}

function relaySection(name: ErrorCode): string {
  const { retriable, deadLetter, exit } = outcome(name);
  const spec: CodeSpec = ERROR_CODES[name];
  return [`### ${name}`, `Retriable: ${retriable}. Dead letter: ${deadLetter}. Exit code: ${exit}.`, spec.meaning, `**What to do:** ${spec.action}`].join('\n\n');
}

function clientSection(name: ClientErrorCode): string {
  const spec = CLIENT_ERROR_CODES[name];
  return [`### ${name}`, `Retriable: ${spec.retriable ? 'yes' : 'no'}.`, spec.meaning, `**What to do:** ${spec.action}`].join('\n\n');
}

/** The generated part of docs/errors.md. */
export function errorsReference(): string {
  const summary = table(['Code', 'Retriable', 'Dead letter', 'Exit code'], RELAY_CODES.map((name) => {
    const { retriable, deadLetter, exit } = outcome(name);
    return [anchor(name), retriable, deadLetter, exit];
  }));
  return [
    '_Generated from `src/errors.ts` and `src/client/errors.ts` by `npm run docs`: edit those, not this part of the page._',
    '## Relay and CLI',
    `Every failure of the relay and its commands carries one of these codes: the log's \`code\` field, the CLI's last line (\`outbox-relay <command> failed [CODE]: ...\`), the \`reason\` label of the reconnect and dead-letter counters, and a dead-letter record's \`${HEADER.deadLetterCode}\` header. ` +
      'A driver\'s own code (ECONNREFUSED) or Postgres\'s SQLSTATE (3D000) is kept in the message, after the relay\'s code; an error the relay does not classify is `INTERNAL`, a bug to report.',
    `Retriable: \`run\` reconnects and resumes from the confirmed position; another command exits ${EXIT.failed}. Dead letter: the problem is one event's; it goes to the dead-letter topic, with the code in its headers, and the stream goes on. ` +
      `Exit codes: ${EXIT.ok} done, ${EXIT.failed} failed, ${EXIT.usage} bad usage or configuration, ${EXIT.drainTimedOut} stopped before draining (a stop signal, then the shutdown timeout).`,
    summary,
    ...RELAY_CODES.map(relaySection),
    '## Client kit',
    "Raised by `outbox-relay/client` (the writer, the idempotent consumer) inside the application's process, as `OutboxClientError` with the same `code`, `retriable`, `details` and `cause`; they never reach the relay's metrics or dead letters.",
    table(['Code', 'Retriable'], CLIENT_CODES.map((name) => [anchor(name), CLIENT_ERROR_CODES[name].retriable ? 'yes' : 'no'])),
    ...CLIENT_CODES.map(clientSection),
  ].join('\n\n');
}

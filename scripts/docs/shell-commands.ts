// The `outbox-relay ...` commands a page shows in its ```sh blocks, checked against the CLI's
// declared commands (no process is started).
import { COMMANDS } from '../../src/config/commands.js';

export interface ShownCommand {
  readonly line: number;
  /** What follows `outbox-relay` (or `dist/cli.js`), up to the end of the shell command. */
  readonly args: readonly string[];
}

/** Lines of ```sh, ```bash, ```shell and ```console blocks, a `\`-continued line joined with the next. */
function shellLines(markdown: string): { readonly text: string; readonly line: number }[] {
  const lines: { text: string; line: number }[] = [];
  let inShell = false;
  let fenced = false;
  let pending: { text: string; line: number } | null = null;
  markdown.split('\n').forEach((text, index) => {
    const fence = /^ {0,3}(?:```|~~~)\s*(\w*)/.exec(text);
    if (fence) {
      inShell = !fenced && ['sh', 'bash', 'shell', 'console', 'zsh'].includes(fence[1]!);
      fenced = !fenced;
      return;
    }
    if (!inShell) return;
    const joined: { text: string; line: number } = pending ? { text: `${pending.text} ${text.trim()}`, line: pending.line } : { text, line: index + 1 };
    if (/\\\s*$/.test(joined.text)) pending = { text: joined.text.replace(/\\\s*$/, ''), line: joined.line };
    else {
      pending = null;
      lines.push(joined);
    }
  });
  return lines;
}

/**
 * Every `outbox-relay <args>` where `outbox-relay` is what a shell command runs: first word of a
 * command (after `$ `, variable assignments, `npx`, `exec`), or the script of `node ... dist/cli.js`.
 */
export function commandsShown(markdown: string): ShownCommand[] {
  const shown: ShownCommand[] = [];
  for (const { text, line } of shellLines(markdown)) {
    const script = text.replace(/^\s*\$\s+/, '').replace(/\s#.*$/, '');
    for (const part of script.split(/&&|\|\||[;|]|\$\(|`/)) {
      const words = part.trim().split(/\s+/).filter(Boolean);
      let at = 0;
      while (at < words.length && (/^[A-Za-z_][A-Za-z0-9_]*=/.test(words[at]!) || ['npx', 'exec', 'time', 'sudo'].includes(words[at]!))) at += 1;
      const cli = words.findIndex((word, i) => i >= at && /(^|\/)dist\/cli\.js$/.test(word));
      const start = words[at] === 'outbox-relay' || /(^|\/)\.bin\/outbox-relay$/.test(words[at] ?? '') ? at + 1 : cli >= 0 ? cli + 1 : -1;
      if (start >= 0) shown.push({ line, args: words.slice(start) });
    }
  }
  return shown;
}

const COMMAND_NAMES = Object.keys(COMMANDS);

/** Why `outbox-relay <args>` is no command of the CLI, or null when it is one. */
export function unknownCommand(args: readonly string[]): string | null {
  const first = args[0];
  if (first === undefined || first.startsWith('--')) return ['--help', '--version'].includes(first ?? '') ? null : `no command (expected one of ${COMMAND_NAMES.join(', ')}, or --help, --version)`;
  // As the CLI reads them (commands/main.ts): the longest run of words naming a command or a family of them.
  const isCommandOrFamily = (name: string) => COMMAND_NAMES.some((each) => each === name || each.startsWith(`${name} `));
  let length = 1;
  while (length < args.length && !args[length]!.startsWith('--') && isCommandOrFamily(args.slice(0, length + 1).join(' '))) length += 1;
  const name = args.slice(0, length).join(' ');
  const next = args[length];
  if (COMMAND_NAMES.includes(name)) return next === undefined || next.startsWith('--') ? null : `"${name}" takes no argument "${next}"`;
  if (!isCommandOrFamily(name)) return `"${name}" is not a command`;
  return next === '--help' ? null : `"${name}" is a family of commands, not one (${COMMAND_NAMES.filter((each) => each.startsWith(`${name} `)).join(', ')})`;
}

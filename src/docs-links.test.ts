import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { anchorReader, anchorsOf, brokenLinks, documentationFiles, linkProblem, slug } from '../scripts/docs/links.js';
import { commandsShown, unknownCommand } from '../scripts/docs/shell-commands.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const GETTING_STARTED = 'docs/getting-started.md';

describe('links in README.md and docs/', () => {
  it('point at files that exist, and at headings those files have', () => {
    expect(brokenLinks(ROOT, documentationFiles(ROOT)), 'broken links').toEqual([]);
  });

  it('that the code names to operators (in messages, --help, metrics help) exist, with the heading named', () => {
    const sources = readdirSync(join(ROOT, 'src'), { recursive: true, encoding: 'utf8' }).filter((file) => file.endsWith('.ts') && !file.endsWith('.test.ts'));
    const anchors = anchorReader();
    const broken = sources.flatMap((file) =>
      [...readFileSync(join(ROOT, 'src', file), 'utf8').matchAll(/\bdocs\/[\w/-]+\.md(?:#[\w-]+)?/g)].flatMap(([target]) => {
        const problem = linkProblem(ROOT, ROOT, target, anchors);
        return problem ? [`src/${file}: ${target}: ${problem}`] : [];
      }),
    );
    expect(broken).toEqual([]);
  });

  it('are listed, each with where and why, when broken', () => {
    const root = mkdtempSync(join(tmpdir(), 'docs-links-'));
    mkdirSync(join(root, 'docs/runbooks'), { recursive: true });
    writeFileSync(join(root, 'docs/runbooks/OutboxRelaySlotLost.md'), '# OutboxRelaySlotLost\n\n## What to do\n');
    writeFileSync(join(root, 'README.md'), [
      '# Outbox relay', '', '[ok](docs/runbooks/OutboxRelaySlotLost.md#what-to-do) [folder](docs) [web](https://example.com/x.md#nope) [top](#outbox-relay)',
      '[gone](docs/nothing.md) [no heading](docs/runbooks/OutboxRelaySlotLost.md#what-not-to-do) [nor here](#nowhere)',
      '`[code](docs/nothing.md)`', '```sh', '[fenced](docs/nothing.md)', '```', '[ref]: docs/runbooks/Missing.md',
    ].join('\n'));
    expect(brokenLinks(root, documentationFiles(root))).toEqual([
      'README.md:4: docs/nothing.md: docs/nothing.md does not exist',
      'README.md:4: docs/runbooks/OutboxRelaySlotLost.md#what-not-to-do: docs/runbooks/OutboxRelaySlotLost.md has no heading with anchor #what-not-to-do',
      'README.md:4: #nowhere: README.md has no heading with anchor #nowhere',
      'README.md:9: docs/runbooks/Missing.md: docs/runbooks/Missing.md does not exist',
    ]);
  });

  it("make anchors as GitHub does: lower case, punctuation dropped but - and _, a repeat numbered", () => {
    expect(slug('Alert: OutboxRelaySlotLost')).toBe('alert-outboxrelayslotlost');
    expect(slug('`SOURCE_SLOT_LOST`: what to do (v2)')).toBe('source_slot_lost-what-to-do-v2');
    expect(slug('[Kafka](kafka.md) clients & compression')).toBe('kafka-clients--compression');
    expect([...anchorsOf('# Setup\n\n## Setup\n\n```sh\n# Setup\n```\n\nSetup\n-----\n')]).toEqual(['setup', 'setup-1', 'setup-2']);
  });
});

describe(`the commands ${GETTING_STARTED} shows`, () => {
  it('are commands of the CLI (config/commands.ts), --help or --version', () => {
    expect(existsSync(new URL(`../${GETTING_STARTED}`, import.meta.url)), `${GETTING_STARTED} does not exist`).toBe(true);
    const shown = commandsShown(readFileSync(new URL(`../${GETTING_STARTED}`, import.meta.url), 'utf8'));
    expect(shown.length, `${GETTING_STARTED} shows no outbox-relay command in a sh block`).toBeGreaterThan(0);
    const unknown = shown.flatMap(({ line, args }) => {
      const problem = unknownCommand(args);
      return problem ? [`${GETTING_STARTED}:${line}: outbox-relay ${args.join(' ')}: ${problem}`] : [];
    });
    expect(unknown).toEqual([]);
  });

  it('are found where a shell runs them, and judged as the CLI reads them', () => {
    const page = [
      '```sh',
      '$ npx outbox-relay setup --create-roles',
      'DATABASE_URL=postgres://db/app outbox-relay webhooks endpoint add \\',
      "  --url https://example.com --event-types 'invoice.*'",
      'docker compose exec relay node dist/cli.js status | jq .slot   # the slot',
      'cd outbox-relay && outbox-relay schemas --help && outbox-relay --version',
      'outbox-relay replays --since 2026-01-01 ; outbox-relay webhooks endpoint',
      '```',
      'outbox-relay nothing-outside-a-sh-block',
    ].join('\n');
    const shown = commandsShown(page);
    expect(shown.map(({ line, args }) => [line, args.join(' ')])).toEqual([
      [2, 'setup --create-roles'],
      [3, "webhooks endpoint add --url https://example.com --event-types 'invoice.*'"],
      [5, 'status'],
      [6, 'schemas --help'],
      [6, '--version'],
      [7, 'replays --since 2026-01-01'],
      [7, 'webhooks endpoint'],
    ]);
    expect(shown.map(({ args }) => unknownCommand(args))).toEqual([null, null, null, null, null, '"replays" is not a command', expect.stringMatching(/^"webhooks endpoint" is a family of commands/)]);
  });
});

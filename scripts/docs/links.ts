// Relative links of the Markdown pages, checked as GitHub resolves them: the file exists, and an
// #anchor names a heading of the page it points into. Absolute URLs are not fetched.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';

/** Lines outside fenced code blocks, with their numbers (code is not prose: its brackets are no links). */
function proseLines(markdown: string): { readonly text: string; readonly line: number }[] {
  const lines: { text: string; line: number }[] = [];
  let fence: string | null = null;
  markdown.split('\n').forEach((text, index) => {
    const marker = /^ {0,3}(`{3,}|~{3,})/.exec(text)?.[1];
    if (marker && (fence === null || (marker[0] === fence[0] && marker.length >= fence.length))) {
      fence = fence === null ? marker : null;
      return;
    }
    if (fence === null) lines.push({ text, line: index + 1 });
  });
  return lines;
}

const withoutCodeSpans = (text: string) => text.replace(/(`+)[^`]*?\1/g, (span) => ' '.repeat(span.length));

/** GitHub's anchor of a heading: its text as rendered, lower case, punctuation but - and _ dropped, spaces as -. */
export function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .replace(/[`*]/g, '');
  return text.trim().toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
}

/** Every anchor a page has: its headings' (a repeated one gets -1, -2, ...), and explicit id= or name= ones. */
export function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  const add = (base: string) => {
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  };
  const lines = proseLines(markdown);
  lines.forEach(({ text }, i) => {
    const atx = /^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(text);
    if (atx) add(slug(atx[1]!));
    // Setext: a paragraph line underlined with = or -.
    const next = lines[i + 1];
    if (!atx && next && next.line === lines[i]!.line + 1 && /^ {0,3}(=+|-+)\s*$/.test(next.text) && /^\s{0,3}[^\s>|#*+-]/.test(text) && !/^\s*\d+[.)]\s/.test(text)) add(slug(text));
    for (const [, id] of text.matchAll(/<a\s[^>]*(?:name|id)="([^"]+)"/g)) anchors.add(id!);
  });
  return anchors;
}

export interface Link {
  readonly target: string;
  readonly line: number;
}

/** Inline links and images, reference definitions, and HTML href/src attributes. */
export function linksOf(markdown: string): Link[] {
  const links: Link[] = [];
  for (const { text, line } of proseLines(markdown)) {
    const prose = withoutCodeSpans(text);
    for (const [, target] of prose.matchAll(/!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)/g)) links.push({ target: target!, line });
    const definition = /^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/.exec(prose);
    if (definition) links.push({ target: definition[1]!, line });
    for (const [, target] of prose.matchAll(/\s(?:href|src)="([^"]*)"/g)) links.push({ target: target!, line });
  }
  return links;
}

const isAbsolute = (target: string) => /^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//');

/** Why a relative link from the folder `from` is broken, or null: the file exists and, for a page, has the #anchor. */
export function linkProblem(root: string, from: string, target: string, anchors: (page: string) => Set<string>): string | null {
  const [rawPath, anchor] = target.split('#', 2) as [string, string | undefined];
  if (rawPath === '') return 'an anchor without its page';
  let into = rawPath.startsWith('/') ? join(root, decodeURIComponent(rawPath)) : join(from, decodeURIComponent(rawPath));
  if (!existsSync(into)) return `${relative(root, into)} does not exist`;
  // A folder: GitHub shows its README.
  if (statSync(into).isDirectory()) into = join(into, 'README.md');
  if (anchor === undefined || !into.endsWith('.md')) return null;
  if (!existsSync(into)) return `${relative(root, into)} does not exist`;
  return anchors(into).has(decodeURIComponent(anchor).toLowerCase()) ? null : `${relative(root, into)} has no heading with anchor #${anchor}`;
}

/** The anchors of each page, read once. */
export function anchorReader(): (page: string) => Set<string> {
  const cache = new Map<string, Set<string>>();
  return (page) => {
    if (!cache.has(page)) cache.set(page, anchorsOf(readFileSync(page, 'utf8')));
    return cache.get(page)!;
  };
}

/** Every broken relative link of `files` (paths from `root`), as `file:line: target: why`. */
export function brokenLinks(root: string, files: readonly string[]): string[] {
  const anchors = anchorReader();
  return files.flatMap((file) => {
    const path = join(root, file);
    return linksOf(readFileSync(path, 'utf8')).flatMap(({ target, line }) => {
      if (target === '' || isAbsolute(target)) return [];
      // An in-page anchor is checked against the page itself.
      const problem = target.startsWith('#') ? linkProblem(root, dirname(path), `${basename(path)}${target}`, anchors) : linkProblem(root, dirname(path), target, anchors);
      return problem ? [`${file}:${line}: ${target}: ${problem}`] : [];
    });
  });
}

/** README.md and every page under docs/, from `root`. */
export function documentationFiles(root: string): string[] {
  const pages = (dir: string): string[] =>
    existsSync(join(root, dir))
      ? readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) => (entry.isDirectory() ? pages(join(dir, entry.name)) : entry.name.endsWith('.md') ? [join(dir, entry.name)] : []))
      : [];
  return ['README.md', ...pages('docs')].sort();
}

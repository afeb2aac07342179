// Small pieces of Markdown the doc generators share: a table, a cell, a generated block.

/**
 * A cell's text as GitHub renders it literally: `|` would end the cell, `<topic>` would be taken
 * for an HTML tag and dropped (inside a code span it is shown as it is, and stays).
 */
export function cell(text: string): string {
  return text
    .split(/(`[^`]*`)/)
    .map((part) => (part.startsWith('`') ? part : part.replace(/</g, '&lt;')))
    .join('')
    .replace(/\|/g, '\\|');
}

export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const line = (cells: readonly string[]) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

export const code = (text: string): string => `\`${text}\``;

const markers = (name: string) => [`<!-- ${name}:start -->`, `<!-- ${name}:end -->`] as const;

/** The generated block of a page (between its markers), or null when the page has none. */
export function generatedBlock(page: string, name: string): string | null {
  const [start, end] = markers(name);
  const from = page.indexOf(`${start}\n`);
  const to = page.indexOf(`\n${end}`);
  return from === -1 || to < from ? null : page.slice(from + start.length + 1, to);
}

/**
 * The page with `block` between its markers: what is around them (a hand-written intro) stays;
 * a page without them gets `intro` and the block.
 */
export function withBlock(page: string | null, name: string, block: string, intro: string): string {
  const [start, end] = markers(name);
  const current = page === null ? null : generatedBlock(page, name);
  if (page === null || current === null) return `${intro.trimEnd()}\n\n${start}\n${block}\n${end}\n`;
  const from = page.indexOf(`${start}\n`) + start.length + 1;
  return page.slice(0, from) + block + page.slice(from + current.length);
}

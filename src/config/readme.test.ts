import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { optionsTable } from '../../scripts/options-table.js';

describe('README', () => {
  it('documents every option with its current default', () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const documented = /<!-- options:start -->\n([\s\S]*?)\n<!-- options:end -->/.exec(readme)?.[1];
    expect(documented, 'regenerate with: npx tsx scripts/options-table.ts').toBe(optionsTable());
  });
});

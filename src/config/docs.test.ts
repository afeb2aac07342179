import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { generatedBlock } from '../../scripts/docs/markdown.js';
import { PAGES } from '../../scripts/docs/pages.js';
import { CLIENT_ERROR_CODES } from '../client/errors.js';
import { ERROR_CODES } from '../errors.js';
import { OPTIONS, type OptionKey } from './options.js';

const page = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

describe('generated pages', () => {
  for (const { path, marker, render } of PAGES) {
    it(`${path} is current`, () => {
      const block = generatedBlock(page(path), marker);
      expect(block, `${path} has no <!-- ${marker}:start --> ... <!-- ${marker}:end --> block: npm run docs`).not.toBeNull();
      expect(block, `${path} is stale: npm run docs`).toBe(render());
    });
  }

  it('docs/errors.md has a section for every code of the relay and of the client kit', () => {
    const headings = new Set(page('docs/errors.md').split('\n').filter((line) => line.startsWith('### ')).map((line) => line.slice(4)));
    const missing = [...Object.keys(ERROR_CODES), ...Object.keys(CLIENT_ERROR_CODES)].filter((code) => !headings.has(code));
    expect(missing, 'codes without a section in docs/errors.md: npm run docs').toEqual([]);
  });
});

describe('option importance', () => {
  const keys = Object.keys(OPTIONS) as OptionKey[];

  it('calls required exactly the options without a default', () => {
    expect(keys.filter((key) => OPTIONS[key].importance === 'required')).toEqual(keys.filter((key) => OPTIONS[key].default === undefined));
  });

  it('keeps the common tier to what a first deployment sets', () => {
    const common = keys.filter((key) => OPTIONS[key].importance === 'common');
    expect(common.length).toBeGreaterThanOrEqual(10);
    expect(common.length).toBeLessThanOrEqual(15);
  });

  it('gives each summary one short line', () => {
    for (const key of keys.filter((each) => OPTIONS[each].summary !== undefined)) expect(OPTIONS[key].summary, key).toMatch(/^[^\n]{10,100}\.$/);
  });
});

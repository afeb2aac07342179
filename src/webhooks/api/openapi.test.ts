import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { openApiDocument, openApiText } from './openapi.js';

describe('the OpenAPI document', () => {
  it('docs/openapi.json is the document webhooks api serves (npm run docs writes it again)', async () => {
    const committed = await readFile(new URL('../../../docs/openapi.json', import.meta.url), 'utf8');
    expect(openApiText(await openApiDocument())).toBe(committed);
  });
});

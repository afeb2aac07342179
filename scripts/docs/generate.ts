// Writes every generated page (`npm run docs`); `--check` only says which are stale (exit 1).
// Usage: npx tsx scripts/docs/generate.ts [--check]
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openApiDocument, openApiText } from '../../src/webhooks/api/openapi.js';
import { withBlock } from './markdown.js';
import { PAGES } from './pages.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const check = process.argv.includes('--check');
let stale = 0;
for (const page of PAGES) {
  const file = join(ROOT, page.path);
  const current = existsSync(file) ? readFileSync(file, 'utf8') : null;
  const wanted = withBlock(current, page.marker, page.render(), page.intro);
  if (wanted === current) continue;
  stale += 1;
  if (check) {
    console.log(`${page.path}: stale (npm run docs)`);
    continue;
  }
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, wanted);
  console.log(`${page.path}: written`);
}
// The webhooks API's OpenAPI document, as `webhooks api` serves it at /openapi.json.
const openApiFile = join(ROOT, 'docs/openapi.json');
const openApi = openApiText(await openApiDocument());
if (!existsSync(openApiFile) || readFileSync(openApiFile, 'utf8') !== openApi) {
  stale += 1;
  if (check) console.log('docs/openapi.json: stale (npm run docs)');
  else {
    writeFileSync(openApiFile, openApi);
    console.log('docs/openapi.json: written');
  }
}
if (check && stale > 0) process.exit(1);

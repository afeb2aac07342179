import { readdir, readFile } from 'node:fs/promises';
import { extname } from 'node:path';

/** The package's portal/ folder (beside dist/ and src/). */
export const PORTAL_DIR = new URL('../../../portal/', import.meta.url);

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json; charset=utf-8',
  '.woff2': 'font/woff2',
};

export interface PortalFile {
  readonly body: Buffer;
  readonly contentType: string;
}

/**
 * The portal's files, read once at start: what is served is exactly what the folder held (an
 * allowlist by name, no path is ever joined from a request), with a type known by extension.
 */
export async function loadPortalFiles(dir: URL = PORTAL_DIR): Promise<ReadonlyMap<string, PortalFile>> {
  const files = new Map<string, PortalFile>();
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    const contentType = TYPES[extname(entry.name)];
    if (!entry.isFile() || contentType === undefined) continue;
    files.set(entry.name, { body: await readFile(new URL(entry.name, dir)), contentType });
  }
  return files;
}

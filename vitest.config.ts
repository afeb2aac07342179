import { readFileSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

/**
 * What makes an integration file run alone, after the others: it stops, kills or freezes a
 * shared service (harness/control.js), changes the shared Postgres's settings
 * (`useSmallWalKeepSize`: a small max_slot_wal_keep_size would invalidate another file's slot),
 * or says so in its first line, `// vitest: runs alone (<why>)`: a time it asserts, a fixed-port
 * stack another file starts too, or anything else of the shared services a neighbour would
 * disturb or be disturbed by (docs/testing.md lists what each file says).
 */
const RUNS_ALONE = [/harness\/control\.js['"]/, /\buseSmallWalKeepSize\b/, /^\/\/ vitest: runs alone \(/];

function integrationFiles(dir = fileURLToPath(new URL('./test', import.meta.url))): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return integrationFiles(path);
    return entry.name.endsWith('.test.ts') ? [path] : [];
  });
}

const root = fileURLToPath(new URL('.', import.meta.url));
const runsAlone = integrationFiles()
  .filter((file) => RUNS_ALONE.some((marker) => marker.test(readFileSync(file, 'utf8'))))
  .map((file) => relative(root, file));

const integration = {
  environment: 'node' as const,
  globalSetup: ['test/harness/global-setup.ts'],
  setupFiles: ['test/harness/quiet-warnings.ts'],
  testTimeout: 180_000,
  hookTimeout: 240_000,
};

// Unit tests beside the code (fakes only at ports); integration and fault tests under test/
// against real Postgres, Kafka and a schema registry, in two groups. First the files that share
// the services and only add their own tables, topics, slots and processes, two at a time (most
// of a file's time is waiting on a broker, a timeout or a child process, which the other file
// fills: 30 minutes instead of 39 on the 2-core machine); then, one at a time, the files that
// would disturb a neighbour.
// `--project 'integration*'` runs both groups.
export default defineConfig({
  test: {
    projects: [
      {
        test: { name: 'unit', include: ['src/**/*.test.ts'], environment: 'node' },
      },
      {
        test: {
          ...integration,
          name: 'integration',
          include: ['test/**/*.test.ts'],
          exclude: runsAlone,
          maxWorkers: 2,
          sequence: { groupOrder: 1 },
        },
      },
      {
        test: {
          ...integration,
          name: 'integration-alone',
          include: runsAlone,
          fileParallelism: false,
          maxWorkers: 1,
          sequence: { groupOrder: 2 },
        },
      },
    ],
  },
});

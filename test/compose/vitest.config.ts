import { defineConfig } from 'vitest/config';

/**
 * The compose stage (scripts/test-compose.sh), apart from the integration projects: its files are
 * named *.compose.ts, which vitest.config.ts does not take (*.test.ts), and need a Docker engine
 * and the stand-in images, which the stage provides. One file, its steps in order on one stack.
 */
export default defineConfig({
  test: {
    name: 'compose',
    root: new URL('../..', import.meta.url).pathname,
    include: ['test/compose/**/*.compose.ts'],
    environment: 'node',
    fileParallelism: false,
    testTimeout: 600_000,
    hookTimeout: 300_000,
  },
});

import { defineConfig } from 'vitest/config';

// Two projects: fast unit tests beside the code (fakes only at ports), and integration and
// fault tests under test/ against real Postgres, Kafka and a schema registry. Integration
// files run one at a time: they share the services and some of them stop or kill them.
export default defineConfig({
  test: {
    projects: [
      {
        test: { name: 'unit', include: ['src/**/*.test.ts'], environment: 'node' },
      },
      {
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          environment: 'node',
          globalSetup: ['test/harness/global-setup.ts'],
          setupFiles: ['test/harness/quiet-warnings.ts'],
          fileParallelism: false,
          testTimeout: 180_000,
          hookTimeout: 240_000,
        },
      },
    ],
  },
});

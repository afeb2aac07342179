// Type-aware lint on top of `tsc --noEmit`: catches floating promises, which in a relay
// mean an acknowledgement or an error nobody waits for.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * no-restricted-imports for packages and their files. A package is a path, not a pattern: a
 * gitignore-style pattern without a slash matches a folder of that name anywhere in a relative
 * import (src/kafka/kafkajs/).
 */
function restrictedImports(packages, message) {
  return { paths: packages.map((name) => ({ name, message })), patterns: [{ group: packages.map((name) => `${name}/*`), message }] };
}

export default tseslint.config(
  { ignores: ['dist/**', 'dist-*/**', 'node_modules/**', '.stack/**', 'bench/results/**', 'eslint.config.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // Kafka is reached through the Kafka wing, src/kafka: its ports, or kafkajs through
    // src/kafka/kafkajs/kafkajs.ts, which installs the relay's fork of kafkajs before loading it.
    files: ['src/**/*.ts'],
    ignores: ['src/kafka/**'],
    rules: { 'no-restricted-imports': ['error', restrictedImports(['kafkajs', '@confluentinc/kafka-javascript', '@platformatic/kafka'], 'Use the Kafka wing (src/kafka): its ports, or src/kafka/kafkajs/kafkajs.ts for kafkajs.')] },
  },
  {
    // Inside the wing too: a module that loaded kafkajs itself could load it before the fork is
    // installed. Tests of the kafkajs folder read kafkajs's own modules to compare with the fork.
    files: ['src/kafka/**/*.ts'],
    ignores: ['src/kafka/kafkajs/kafkajs.ts', 'src/kafka/kafkajs/**/*.test.ts'],
    rules: { 'no-restricted-imports': ['error', restrictedImports(['kafkajs', '@platformatic/kafka'], 'Only src/kafka/kafkajs/kafkajs.ts loads kafkajs (it installs the fork first): import from it; @platformatic/kafka only src/kafka/platformatic/, reached through its lazy.ts.')] },
  },
  {
    // @platformatic/kafka needs Node 22.22: only its folder imports it, and open.ts reaches that
    // folder through platformatic/lazy.ts's dynamic imports (nothing else loads it).
    files: ['src/kafka/platformatic/**/*.ts'],
    ignores: ['src/**/*.test.ts'],
    rules: { 'no-restricted-imports': ['error', restrictedImports(['kafkajs', '@confluentinc/kafka-javascript'], 'src/kafka/platformatic/ is the @platformatic/kafka client: no other Kafka library here.')] },
  },
  // What no-restricted-imports cannot see: require() of kafkajs or of the binding (through
  // createRequire), which only their own client folder may do. Tests may read kafkajs's own
  // modules to compare with the relay's.
  ...[
    { files: ['src/**/*.ts'], ignores: ['src/kafka/kafkajs/**', 'src/kafka/librdkafka/**', 'src/**/*.test.ts'], packages: 'kafkajs|@confluentinc\\/kafka-javascript' },
    { files: ['src/kafka/kafkajs/**/*.ts'], ignores: ['src/**/*.test.ts'], packages: '@confluentinc\\/kafka-javascript' },
    { files: ['src/kafka/librdkafka/**/*.ts'], ignores: ['src/**/*.test.ts'], packages: 'kafkajs' },
  ].map(({ files, ignores, packages }) => ({
    files,
    ignores,
    rules: {
      'no-restricted-syntax': ['error', { selector: `CallExpression[arguments.0.value=/^(${packages})(\\/|$)/]`, message: 'Only its client folder in src/kafka loads a Kafka client (kafkajs/kafkajs.ts installs the fork first; librdkafka/binding.ts says how to build the binding): use the wing.' }],
    },
  })),
  {
    // The portal's page script: plain JavaScript run by the browser, outside the TypeScript project.
    files: ['portal/**/*.js'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      sourceType: 'module',
      globals: Object.fromEntries(
        ['window', 'document', 'location', 'history', 'navigator', 'sessionStorage', 'fetch', 'URL', 'URLSearchParams', 'crypto', 'CSS', 'confirm', 'setTimeout', 'HTMLElement'].map((name) => [name, 'readonly']),
      ),
    },
  },
);

// Type-aware lint on top of `tsc --noEmit`: catches floating promises, which in a relay
// mean an acknowledgement or an error nobody waits for.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.stack/**', 'bench/results/**', 'eslint.config.js'] },
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

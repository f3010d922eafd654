import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['**/dist/', '**/node_modules/', 'coverage/', 'bench/results/', 'test/generated-client/openapi.d.ts', '.stryker-tmp/', 'reports/'] },
  js.configs.recommended,
  ...tseslint.configs.strict,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      'no-console': 'error',
    },
  },
  {
    // Functions short enough to read at once.
    files: ['shared/src/**/*.ts', '*-service/src/**/*.ts', 'gateway/src/**/*.ts'],
    rules: { 'max-lines-per-function': ['error', { max: 60, skipBlankLines: false, skipComments: false }] },
  },
  {
    files: ['**/test/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts', 'scripts/**', 'tools/**'],
    languageOptions: { globals: { ...globals.jest } },
    rules: { 'no-console': 'off', '@typescript-eslint/no-non-null-assertion': 'off' },
  },
);

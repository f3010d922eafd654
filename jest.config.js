/** Tests are TypeScript ES modules compiled by SWC; the workspaces are imported from their builds. */
export default {
  testEnvironment: 'node',
  testMatch: ['<rootDir>/**/test/**/*.test.ts'],
  // The chaos run has its own command (npm run chaos): it takes half a minute of the machine.
  testPathIgnorePatterns: ['/node_modules/', '/dist/', '<rootDir>/test/chaos/'],
  extensionsToTreatAsEsm: ['.ts'],
  transform: {
    '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2024', parser: { syntax: 'typescript' } }, module: { type: 'es6' } }],
  },
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  testTimeout: 30_000,
};

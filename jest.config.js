/** Tests are TypeScript ES modules compiled by SWC; the workspaces are imported from their builds. */
export const projectSettings = {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  transform: {
    '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2024', parser: { syntax: 'typescript' } }, module: { type: 'es6' } }],
  },
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  testTimeout: 30_000,
};

/** The suites about the gateway's use of Redis, which run against a Redis Cluster as well as a single Redis. */
const CLUSTER_SUITES = ['cache', 'memory-tier', 'rate-limits', 'redis-health'].map((name) => `<rootDir>/test/e2e/${name}.test.ts`);

export default {
  testTimeout: projectSettings.testTimeout,
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  projects: [
    {
      ...projectSettings,
      displayName: 'single Redis',
      testMatch: ['<rootDir>/**/test/**/*.test.ts'],
      // The chaos run has its own command (npm run chaos): it takes half a minute of the machine.
      testPathIgnorePatterns: ['/node_modules/', '/dist/', '<rootDir>/test/chaos/', '<rootDir>/.stryker-tmp/'],
      // A mutation run's sandboxes (npm run mutation) hold copies of the workspaces.
      modulePathIgnorePatterns: ['<rootDir>/.stryker-tmp/'],
    },
    {
      ...projectSettings,
      displayName: 'Redis Cluster',
      testMatch: CLUSTER_SUITES,
      // The gateways these suites start use the test cluster (test/support/redis-cluster.ts).
      setupFiles: ['<rootDir>/test/support/on-cluster.ts'],
    },
  ],
};

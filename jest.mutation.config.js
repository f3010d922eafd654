import { projectSettings } from './jest.config.js';

/**
 * The unit tests Stryker runs against each mutant (`npm run mutation`): the in-process tests of the
 * gateway and of shared, without the global setup, so no MySQL, Redis or Redis Cluster is started.
 * Left out, as they need those servers: the memory tier's (Redis), migrations' and the MySQL
 * client's (MySQL).
 */
const NEEDS_SERVERS = ['gateway/test/memory-tier.test.ts', 'shared/test/migrate.test.ts', 'shared/test/mysql.test.ts'];

export default {
  ...projectSettings,
  displayName: 'unit',
  rootDir: '.',
  testMatch: ['<rootDir>/gateway/test/*.test.ts', '<rootDir>/shared/test/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/', ...NEEDS_SERVERS.map((file) => `<rootDir>/${file}`)],
  moduleNameMapper: {
    // shared's own sources, not its build: the mutants live in the sources, and a test importing
    // the build would never meet them.
    '^@app/shared/(.*)$': '<rootDir>/shared/src/$1',
    ...projectSettings.moduleNameMapper,
  },
};

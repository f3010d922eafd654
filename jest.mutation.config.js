import { projectSettings } from './jest.config.js';

/**
 * The unit tests Stryker runs against each mutant (`npm run mutation`): the in-process tests of the
 * gateway and of shared, without the global setup. The few that need a server (the memory tier's
 * Redis, migrations' and the MySQL client's MySQL) use the local ones, as `npm test` does when no
 * container engine runs; each keeps to keys and schemas of its own, so two test runners can share
 * them.
 */
process.env.TEST_REDIS_URL ??= 'redis://127.0.0.1:6379';
process.env.TEST_MYSQL_URL ??= 'mysql://root@127.0.0.1:3306';

export default {
  ...projectSettings,
  displayName: 'unit',
  rootDir: '.',
  testMatch: ['<rootDir>/gateway/test/**/*.test.ts', '<rootDir>/shared/test/*.test.ts'],
  moduleNameMapper: {
    // shared's own sources, not its build: the mutants live in the sources, and a test importing
    // the build would never meet them.
    '^@app/shared/(.*)$': '<rootDir>/shared/src/$1',
    ...projectSettings.moduleNameMapper,
  },
};

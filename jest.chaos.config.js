import { projectSettings } from './jest.config.js';

/** `npm run chaos`: only the chaos run (test/chaos), with the same setup as every other test. */
export default {
  ...projectSettings,
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  // As in jest.config.js: timers a cluster client leaves would keep jest from exiting.
  forceExit: true,
  testMatch: ['<rootDir>/test/chaos/**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
};

import { projectSettings } from './jest.config.js';

/** `npm run chaos`: only the chaos run (test/chaos), with the same setup as every other test. */
export default {
  ...projectSettings,
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  testMatch: ['<rootDir>/test/chaos/**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
};

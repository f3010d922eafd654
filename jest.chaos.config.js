import base from './jest.config.js';

/** `npm run chaos`: only the chaos run (test/chaos), with the same setup as every other test. */
export default {
  ...base,
  testMatch: ['<rootDir>/test/chaos/**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
};

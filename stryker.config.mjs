/**
 * Mutation testing of the gateway's and shared's pure logic against their unit tests
 * (`npm run mutation`, docs/testing.md). The unit tests run with jest.mutation.config.js, which
 * starts no MySQL or Redis.
 * @type {import('@stryker-mutator/api/core').PartialStrykerOptions}
 */
export default {
  mutate: [
    'gateway/src/auth/stages.ts',
    'gateway/src/cache/read-stage.ts',
    'gateway/src/cors/stages.ts',
    'gateway/src/load-shedding/overload-stage.ts',
    'gateway/src/own-endpoints/stage.ts',
    'gateway/src/proxy/stage.ts',
    'gateway/src/rate-limits/stage.ts',
    'gateway/src/routing/canonical-stage.ts',
    'gateway/src/routing/not-found-stage.ts',
    'gateway/src/routing/service-routes.ts',
    'gateway/src/respond.ts',
    'gateway/src/cache/keys.ts',
    'gateway/src/cache/entry.ts',
    'gateway/src/cache/compression.ts',
    'gateway/src/cache/fills.ts',
    'gateway/src/cache/memory-tier.ts',
    'gateway/src/cache/memory-tier/*.ts',
    'gateway/src/load-shedding/concurrency-limit.ts',
    'gateway/src/rate-limits/budgets.ts',
    'gateway/src/auth/tokens.ts',
    'shared/src/platform/http/method-kind.ts',
    'gateway/src/pipeline.ts',
    'shared/src/resource/*.ts',
    'shared/src/platform/request-target.ts',
  ],
  testRunner: 'jest',
  jest: { configFile: 'jest.mutation.config.js' },
  // Jest runs the tests as ES modules, as in `npm test`.
  testRunnerNodeArgs: ['--experimental-vm-modules', '--no-warnings=ExperimentalWarning'],
  coverageAnalysis: 'perTest',
  checkers: ['typescript'],
  // The unit tests' program, with shared's sources in place of its build (as in the jest config).
  tsconfigFile: 'tsconfig.mutation.json',
  // The sandbox holds what the unit tests need: no end-to-end suites a full jest run could find in it.
  ignorePatterns: ['/test', '/bench', '/docs', '/k8s', '/compose'],
  incremental: true,
  incrementalFile: 'reports/stryker-incremental.json',
  concurrency: 2,
  reporters: ['clear-text', 'progress', 'html'],
  htmlReporter: { fileName: 'reports/mutation/mutation.html' },
  thresholds: { high: 80, low: 60, break: null },
};

import { count, flag } from '@app/shared/platform/config';

/** The settings of the rate limits: each caller's budgets per minute, and the points a replica leases at once. */
export const rateLimitsConfig = {
  RATE_LIMIT_ENABLED: flag(true),
  RATE_LIMIT_READS_PER_MINUTE: count(6_000, 1, 1_000_000_000),
  RATE_LIMIT_WRITES_PER_MINUTE: count(3_000, 1, 1_000_000_000),
  RATE_LIMIT_LEASE_POINTS: count(1_000, 1, 1_000_000),
};

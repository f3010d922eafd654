import { commonConfig, count, flag, milliseconds, port, seconds, url } from '@app/shared/config';
import { z } from 'zod';

/** The environment the gateway reads (validated at start-up). */
export const configSchema = z.object({
  PORT: port(8080),
  USERS_SERVICE_URL: url(['http:', 'https:'], 'http://127.0.0.1:3001'),
  PRODUCTS_SERVICE_URL: url(['http:', 'https:'], 'http://127.0.0.1:3002'),
  REDIS_URL: url(['redis:', 'rediss:'], 'redis://127.0.0.1:6379'),
  REDIS_COMMAND_TIMEOUT_MS: milliseconds(1_000),
  UPSTREAM_TIMEOUT_MS: milliseconds(10_000),
  REQUEST_BODY_TIMEOUT_MS: milliseconds(30_000),
  // The services' default DATABASE_POOL_SIZE + DATABASE_QUEUE_LIMIT (see concurrency-limit.ts).
  UPSTREAM_CONCURRENCY_LIMIT: count(210, 2, 100_000),
  UPSTREAM_WRITE_SHARE_PERCENT: count(25, 1, 90),
  // The services' WRITE_DEADLINE_MS (5000 by default) plus a second for a COMMIT under way.
  SERVICE_WRITE_DEADLINE_MS: milliseconds(6_000),
  CACHE_ENABLED: flag(true),
  CACHE_TTL_SECONDS: seconds(60, 1),
  CACHE_STALE_SECONDS: seconds(300, 0),
  ...commonConfig,
});

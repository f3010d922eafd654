import { rateLimitsDescription } from './description.js';
import { defineFeature } from '../feature.js';
import { RateLimits } from './budgets.js';
import { rateLimitsConfig } from './config.js';
import { rateLimitHeaders, rateLimitStage } from './stage.js';

/** Each caller's budgets of reads and writes (RATE_LIMIT_*), counted in Redis: the `count` phase. */
export const rateLimits = defineFeature({
  name: 'rate limits',
  config: rateLimitsConfig,
  description: rateLimitsDescription,
  exposedHeaders: ['Retry-After', 'RateLimit', 'RateLimit-Policy'],
  create({ config, logger, writer, parts, redis }) {
    const settings = { readsPerMinute: config.RATE_LIMIT_READS_PER_MINUTE, writesPerMinute: config.RATE_LIMIT_WRITES_PER_MINUTE, leasePoints: config.RATE_LIMIT_LEASE_POINTS };
    const limits =
      parts.limits !== undefined ? (parts.limits ?? undefined) : config.RATE_LIMIT_ENABLED ? new RateLimits(redis(), { ...settings, keyPrefix: 'rl' }, logger) : undefined;
    if (!limits) return { name: 'rate limits', details: { rateLimits: 'disabled' } };
    return {
      name: 'rate limits',
      stages: { count: rateLimitStage({ limits, trustedProxyHops: config.TRUSTED_PROXY_HOPS, writer }) },
      responseHeaders: rateLimitHeaders,
      details: { rateLimits: settings },
    };
  },
});

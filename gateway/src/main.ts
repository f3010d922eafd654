import { ConfigError, loadConfig } from '@app/shared/platform/config';
import { Lifecycle } from '@app/shared/platform/http/lifecycle';
import { createLogger } from '@app/shared/platform/logger';
import { serve } from '@app/shared/platform/server';
import { configureServerSpans } from '@app/shared/telemetry/spans';
import { createApp } from './app.js';
import { createMemoryTier } from './cache/memory-tier.js';
import { TokenVerifier } from './auth/tokens.js';
import { ResponseCache } from './cache/response-cache.js';
import { authConfigProblems, configSchema, upstreamSettings } from './config.js';
import { RateLimits } from './rate-limit.js';
import { createCacheClient, redisTarget } from './redis.js';

const config = loadConfig(configSchema);
const { upstreams, problems: upstreamProblems } = upstreamSettings(config);
const configProblems = [...authConfigProblems(config), ...upstreamProblems];
if (configProblems.length > 0) {
  process.stderr.write(`${new ConfigError(configProblems).message}\n`);
  process.exit(1);
}
const logger = createLogger('gateway', config.LOG_LEVEL);
process.on('unhandledRejection', (reason) => logger.error({ err: reason }, 'unhandled rejection'));
const lifecycle = new Lifecycle();
// One Redis client for the cache and the rate limits' counters. Its own timeout is a hard stop for
// every command; the cache judges lateness itself, after the event loop has caught up (RedisHealth),
// so the client's stop lies beyond that: a busy gateway must not cut replies that came in time.
const redis =
  config.CACHE_ENABLED || config.RATE_LIMIT_ENABLED ? createCacheClient(redisTarget(config), logger, { commandTimeoutMs: 2 * config.REDIS_COMMAND_TIMEOUT_MS, keyPrefix: config.REDIS_KEY_PREFIX }) : undefined;
const memory =
  redis && config.CACHE_ENABLED && config.CACHE_MEMORY_MB > 0
    ? createMemoryTier(redisTarget(config), config.CACHE_MEMORY_MB * 1024 * 1024, logger, { commandTimeoutMs: 2 * config.REDIS_COMMAND_TIMEOUT_MS, keyPrefix: config.REDIS_KEY_PREFIX })
    : undefined;
const cache =
  redis && config.CACHE_ENABLED
    ? new ResponseCache(
        redis,
        { ttlSeconds: config.CACHE_TTL_SECONDS, staleSeconds: config.CACHE_STALE_SECONDS, breaker: { timeoutMs: config.REDIS_COMMAND_TIMEOUT_MS } },
        logger,
        memory,
      )
    : undefined;
// authConfigProblems made sure one of the two is set while AUTH_ENABLED.
const keySource = config.AUTH_PUBLIC_KEY ? { publicKey: config.AUTH_PUBLIC_KEY } : { jwksUrl: config.AUTH_JWKS_URL ?? '' };
const tokens = config.AUTH_ENABLED
  ? new TokenVerifier(keySource, {
      issuer: config.AUTH_ISSUER,
      audience: config.AUTH_AUDIENCE,
      algorithms: config.AUTH_ALGORITHMS,
      clockToleranceSeconds: config.AUTH_CLOCK_TOLERANCE_SECONDS,
    })
  : undefined;
const limits = config.RATE_LIMIT_ENABLED
  ? new RateLimits(
      redis,
      { readsPerMinute: config.RATE_LIMIT_READS_PER_MINUTE, writesPerMinute: config.RATE_LIMIT_WRITES_PER_MINUTE, keyPrefix: 'rl', leasePoints: config.RATE_LIMIT_LEASE_POINTS },
      logger,
    )
  : undefined;
const guard = {
  tokens,
  limits,
  corsOrigins: config.CORS_ORIGINS,
  trustedProxyHops: config.TRUSTED_PROXY_HOPS,
  traceSubject: config.TRACE_RECORD_SUBJECT,
};
// The gateway is where clients come in: their trace context is linked, not continued, unless trusted.
configureServerSpans({ continueClientTrace: config.TRACE_TRUST_CLIENT_CONTEXT });
await serve({
  name: 'gateway',
  handler: createApp({
    upstreams,
    upstreamTimeoutMs: config.UPSTREAM_TIMEOUT_MS,
    requestBodyTimeoutMs: config.REQUEST_BODY_TIMEOUT_MS,
    serviceWriteDeadlineMs: config.SERVICE_WRITE_DEADLINE_MS,
    logger,
    lifecycle,
    cache,
    concurrency: { limit: config.UPSTREAM_CONCURRENCY_LIMIT, writeShare: config.UPSTREAM_WRITE_SHARE_PERCENT / 100 },
    guard,
  }),
  port: config.PORT,
  lifecycle,
  logger,
  shutdownTimeoutMs: config.SHUTDOWN_TIMEOUT_MS,
  listenSockets: config.LISTEN_SOCKETS,
  requestHeadTimeoutMs: config.REQUEST_HEAD_TIMEOUT_MS,
  release: async () => {
    redis?.disconnect();
    await memory?.close();
  },
  details: {
    upstreams: upstreams.map(({ name, url, cachedReads }) => ({ name, url, cachedReads })),
    cache: cache ? { ...cache.settings, memoryBytes: memory?.maxBytes ?? 0 } : 'disabled',
    auth: tokens ? { keys: config.AUTH_PUBLIC_KEY ? 'AUTH_PUBLIC_KEY' : config.AUTH_JWKS_URL, issuer: config.AUTH_ISSUER, audience: config.AUTH_AUDIENCE, publicReads: config.AUTH_PUBLIC_READS } : 'disabled',
    rateLimits: limits
      ? { readsPerMinute: config.RATE_LIMIT_READS_PER_MINUTE, writesPerMinute: config.RATE_LIMIT_WRITES_PER_MINUTE, leasePoints: config.RATE_LIMIT_LEASE_POINTS }
      : 'disabled',
    corsOrigins: config.CORS_ORIGINS,
  },
});

import { loadConfig } from '@app/shared/config';
import { Lifecycle } from '@app/shared/http';
import { createLogger } from '@app/shared/logger';
import { createCacheClient } from '@app/shared/redis';
import { serve } from '@app/shared/server';
import { createApp, upstreamsFrom } from './app.js';
import { ResponseCache } from './cache/response-cache.js';
import { configSchema } from './config.js';

const config = loadConfig(configSchema);
const logger = createLogger('gateway', config.LOG_LEVEL);
process.on('unhandledRejection', (reason) => logger.error({ err: reason }, 'unhandled rejection'));
const lifecycle = new Lifecycle();
const upstreams = upstreamsFrom(config);
const redis = config.CACHE_ENABLED ? createCacheClient(config.REDIS_URL, logger) : undefined;
const cache =
  redis &&
  new ResponseCache(
    redis,
    { ttlSeconds: config.CACHE_TTL_SECONDS, staleSeconds: config.CACHE_STALE_SECONDS, breaker: { timeoutMs: config.REDIS_COMMAND_TIMEOUT_MS } },
    logger,
  );
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
  }),
  port: config.PORT,
  lifecycle,
  logger,
  shutdownTimeoutMs: config.SHUTDOWN_TIMEOUT_MS,
  release: async () => redis?.disconnect(),
  details: { upstreams: upstreams.map(({ name, url }) => ({ name, url })), cache: cache ? cache.settings : 'disabled' },
});

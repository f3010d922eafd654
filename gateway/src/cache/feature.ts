import { cacheDescription } from './description.js';
import { defineFeature } from '../feature.js';
import { addressCallerOf } from '../rate-limits/caller.js';
import { redisTarget } from '../redis/client.js';
import { redisClientOptions } from '../redis/config.js';
import { cacheConfig } from './config.js';
import { Fills } from './fills.js';
import { createMemoryTier } from './memory-tier.js';
import { cacheOutcomeCounter, observeCache } from './metrics.js';
import { cacheOutcomeHeader } from './outcome-header.js';
import { CacheRead } from './read-stage.js';
import { ResponseCache } from './response-cache.js';
import { writeRenewal } from './write-renewal.js';

/**
 * The response cache (CACHE_ENABLED): reads through it in the `lookup` phase, its memory tier in
 * front of Redis, and what a proxied write renews before its client hears back. Made after the
 * proxy, whose hops fill it.
 */
export const cache = defineFeature({
  name: 'cache',
  config: cacheConfig,
  description: cacheDescription,
  exposedHeaders: ['X-Cache', 'Age'],
  create({ config, logger, metrics, writer, parts, redis, shared, upstreams }) {
    // Said and counted with the cache off too: every read is then a BYPASS.
    const responseHeaders = cacheOutcomeHeader(cacheOutcomeCounter(metrics));
    if (!config.CACHE_ENABLED) return { name: 'cache', responseHeaders, details: { cache: 'disabled' } };
    const { hops } = shared;
    if (!hops) throw new Error('The cache fills through the proxy: list the proxy before it (features.ts)');
    const client = redis();
    const madeMemory = parts.memory === undefined && config.CACHE_MEMORY_MB > 0 ? createMemoryTier(redisTarget(config), config.CACHE_MEMORY_MB * 1024 * 1024, logger, redisClientOptions(config)) : undefined;
    const memory = parts.memory ?? madeMemory;
    const settings = {
      ttlSeconds: config.CACHE_TTL_SECONDS,
      staleSeconds: config.CACHE_STALE_SECONDS,
      longestLifetimeSeconds: Math.max(...upstreams.map(({ cache }) => (cache?.ttlSeconds ?? config.CACHE_TTL_SECONDS) + (cache?.staleSeconds ?? config.CACHE_STALE_SECONDS))),
      maxEntryBytes: config.CACHE_MAX_ENTRY_BYTES,
      callerBytes: config.CACHE_CALLER_BYTES,
      now: parts.now,
      breaker: { timeoutMs: config.REDIS_COMMAND_TIMEOUT_MS },
    };
    const responses = new ResponseCache(client, settings, logger, memory);
    observeCache(metrics, responses);
    shared.cache = responses;
    shared.onWriteSettled = writeRenewal(responses, config.SERVICE_WRITE_DEADLINE_MS);
    const read = new CacheRead({ cache: responses, fills: new Fills(), hops, writer, addressCaller: addressCallerOf(config.TRUSTED_PROXY_HOPS), pressure: shared.pressure });
    return {
      name: 'cache',
      stages: { lookup: read },
      responseHeaders,
      details: { cache: { ...responses.settings, memoryBytes: memory?.maxBytes ?? 0 } },
      release: async () => {
        responses.close();
        await madeMemory?.close();
      },
    };
  },
});

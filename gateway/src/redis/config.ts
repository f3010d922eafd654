import { list, milliseconds, url } from '@app/shared/platform/config';
import { z } from 'zod';
import { parseClusterNode } from './client.js';

/** Where the Redis of the cache, the rate limits and the revocations is, and how it is used. */
export const redisConfig = {
  REDIS_URL: url(['redis:', 'rediss:'], 'redis://127.0.0.1:6379'),
  /**
   * Seed nodes of a Redis Cluster (`host:port,host:port,…`, or redis:// / rediss:// URLs with the
   * credentials): when set, the gateway uses this cluster instead of REDIS_URL.
   */
  REDIS_CLUSTER_NODES: list('', z.string().refine((item) => parseClusterNode(item) !== undefined), 'must be a comma-separated list of host:port, or redis:// or rediss:// URLs with a port'),
  /**
   * Put in front of every key the gateway keeps in Redis (cache entries, generations, holds, rate
   * limit counters), so that several deployments (or test runs) can share one Redis without reading
   * each other's entries. No braces: they would change the Redis Cluster hash tag of the keys.
   */
  REDIS_KEY_PREFIX: z.string().regex(/^[\w.:-]{0,64}$/, 'at most 64 letters, digits, _ . : or -').default(''),
  REDIS_COMMAND_TIMEOUT_MS: milliseconds(1_000),
};

/**
 * The options of the gateway's Redis clients. A client's own timeout is a hard stop for every
 * command; the cache judges lateness itself, after the event loop has caught up (RedisHealth), so
 * the client's stop lies beyond that: a busy gateway must not cut replies that came in time.
 */
export const redisClientOptions = (config: { REDIS_COMMAND_TIMEOUT_MS: number; REDIS_KEY_PREFIX: string }) => ({
  commandTimeoutMs: 2 * config.REDIS_COMMAND_TIMEOUT_MS,
  keyPrefix: config.REDIS_KEY_PREFIX,
});

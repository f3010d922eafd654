import { RateLimiterRedis } from 'rate-limiter-flexible';
import type { CacheClient } from '../redis/client.js';

/**
 * The bytes of cache entries each caller may store, per entry lifetime (CACHE_TTL_SECONDS +
 * CACHE_STALE_SECONDS), counted in Redis with rate-limiter-flexible as the rate limits are, so
 * every replica shares one count. Past it, the caller's misses are answered but not stored: however
 * many distinct query strings (cursors, say) it sends, an entry lives at most one window from when
 * its space was paid for (a refill keeps its key's expiry: ResponseCache.store), so what it holds in
 * Redis at any moment is at most twice its budget (this window's and the last one's).
 */
export class SpaceBudget {
  readonly #counter: RateLimiterRedis;

  constructor(redis: CacheClient, bytesPerCaller: number, lifetimeSeconds: number) {
    this.#counter = new RateLimiterRedis({ storeClient: redis, points: bytesPerCaller, duration: lifetimeSeconds, keyPrefix: 'cs', rejectIfRedisNotReady: true });
  }

  /**
   * Takes `bytes` from `caller`'s budget. False when they are not left, or cannot be counted now
   * (Redis away or full): then nothing is stored, as nothing could be counted.
   */
  async take(caller: string, bytes: number): Promise<boolean> {
    try {
      await this.#counter.consume(caller, bytes);
      return true;
    } catch {
      return false;
    }
  }
}

import { randomBytes } from 'node:crypto';
import type { Logger } from '@app/shared/logger';
import type { Redis } from '@app/shared/redis';
import { decode, encode, type CachedResponse } from './entry.js';
import { defaultBreakerSettings, RedisHealth, type RedisBreakerSettings } from './redis-health.js';
import type { ReadScope } from './scope.js';

/** Generations outlive every entry by far; they only need to expire eventually. */
const GENERATION_TTL_SECONDS = 86_400;

export interface CacheSettings {
  ttlSeconds: number;
  staleSeconds: number;
  /** The clock (ms), for tests of expiry. */
  now?: () => number;
  /** When Redis counts as down (see RedisHealth). */
  breaker?: Partial<RedisBreakerSettings>;
}

/** What Redis holds for a read: the current generation, and the entry if it belongs to it. */
export interface Lookup {
  generation: string | null;
  entry?: CachedResponse;
}

const newGeneration = () => randomBytes(8).toString('base64url');

/**
 * The gateway's view of Redis. Every failure is a miss, never an error; whether Redis is down at
 * all is RedisHealth's judgement, not one command's. A write that cannot renew its generations is
 * remembered, and until that renewal is made this gateway neither reads nor fills the scopes it
 * covers (and only those): stale entries never come back with Redis.
 */
export class ResponseCache {
  readonly #owed = new Set<string>();
  #settling: Promise<void> | undefined;
  readonly #health: RedisHealth;
  readonly now: () => number;

  constructor(
    redis: Redis,
    readonly settings: CacheSettings,
    private readonly logger: Logger,
  ) {
    this.now = settings.now ?? Date.now;
    this.#health = new RedisHealth(redis, logger, { ...defaultBreakerSettings, ...settings.breaker });
    redis.on('ready', () => void this.#settle());
  }

  /** Whether a read or fill of `scope` may use Redis: Redis is up and no invalidation of it is owed. */
  #usable(scope: ReadScope): boolean {
    return this.#health.up && !this.#owed.has(scope.generationKey);
  }

  /** One round trip; undefined when the cache cannot be used for this scope now. */
  async lookup(scope: ReadScope): Promise<Lookup | undefined> {
    if (!this.#usable(scope)) return undefined;
    try {
      const [generation, stored] = await this.#health.run((redis) => redis.mgetBuffer(scope.generationKey, scope.entryKey));
      const current = generation?.toString() ?? null;
      const entry = stored ? decode(stored) : undefined;
      return { generation: current, ...(entry && entry.generation === current ? { entry } : {}) };
    } catch {
      return undefined;
    }
  }

  ageSeconds(entry: CachedResponse): number {
    return Math.max(0, Math.floor((this.now() - entry.storedAt) / 1000));
  }

  isFresh(entry: CachedResponse): boolean {
    return this.now() - entry.storedAt < this.settings.ttlSeconds * 1000;
  }

  /** Expired, but recent enough to serve when the service fails. */
  isServableStale(entry: CachedResponse): boolean {
    return this.now() - entry.storedAt < (this.settings.ttlSeconds + this.settings.staleSeconds) * 1000;
  }

  /**
   * The generation a fetch is stored under, taken BEFORE the fetch: a write that lands while the
   * fetch is under way renews the generation, so what the fetch brings back is never served.
   * When there is none yet, one is created (or the one a concurrent request just created is used).
   */
  async generationFor(scope: ReadScope, lookup: Lookup): Promise<string | undefined> {
    if (lookup.generation !== null) return lookup.generation;
    try {
      const created = newGeneration();
      const existing = (await this.#health.run((redis) => redis.call('SET', scope.generationKey, created, 'EX', GENERATION_TTL_SECONDS, 'NX', 'GET'))) as string | null;
      return existing ?? created;
    } catch {
      return undefined;
    }
  }

  async store(scope: ReadScope, entry: CachedResponse): Promise<void> {
    if (!this.#usable(scope)) return;
    const lifetime = this.settings.ttlSeconds + this.settings.staleSeconds;
    await this.#health.run((redis) => redis.set(scope.entryKey, encode(entry), 'EX', lifetime)).catch(() => undefined);
  }

  /**
   * Renews the generations a write affects: O(1) per key, whatever the number of entries. A renewal
   * that fails is owed: retried until Redis takes it, and meanwhile only its scope is bypassed.
   */
  async invalidate(generationKeys: string[]): Promise<void> {
    const failed = await this.#renew(generationKeys);
    if (failed.length === 0) return;
    for (const key of failed) this.#owed.add(key);
    this.logger.warn({ keys: failed, owed: this.#owed.size }, 'could not invalidate: bypassing the cache for these scopes until Redis takes the invalidation');
    void this.#settle();
  }

  async #renew(keys: string[]): Promise<string[]> {
    const results = await Promise.allSettled(keys.map((key) => this.#health.run((redis) => redis.set(key, newGeneration(), 'EX', GENERATION_TTL_SECONDS))));
    return keys.filter((_key, i) => results[i]?.status === 'rejected');
  }

  /** Pays the owed invalidations as soon as Redis takes them; retries while it does not. */
  #settle(): Promise<void> {
    this.#settling ??= (async () => {
      while (this.#owed.size > 0) {
        if (this.#health.up) {
          const owed = [...this.#owed];
          const failed = new Set(await this.#renew(owed));
          for (const key of owed) if (!failed.has(key)) this.#owed.delete(key);
          if (this.#owed.size === 0) this.logger.info('owed cache invalidations made: every scope is cached again');
        }
        if (this.#owed.size > 0) await new Promise((resolve) => setTimeout(resolve, 200).unref());
      }
    })().finally(() => (this.#settling = undefined));
    return this.#settling;
  }
}

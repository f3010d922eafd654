import { randomBytes } from 'node:crypto';
import type { Logger } from '@app/shared/logger';
import type { Redis } from '@app/shared/redis';
import { decode, encode, type CachedResponse } from './entry.js';
import type { MemoryTier } from './memory-tier.js';
import type { ReadScope } from './scope.js';

/** Generations outlive every entry by far; they only need to expire eventually. */
const GENERATION_TTL_SECONDS = 86_400;

export interface CacheSettings {
  ttlSeconds: number;
  staleSeconds: number;
  /** The clock (ms), for tests of expiry. */
  now?: () => number;
}

/** What Redis holds for a read: the current generation, and the entry if it belongs to it. */
export interface Lookup {
  generation: string | null;
  entry?: CachedResponse;
}

const newGeneration = () => randomBytes(8).toString('base64url');

/**
 * The gateway's view of Redis. Every failure is a miss, never an error. A write that cannot renew
 * its generations (Redis unreachable) is remembered, and until every owed renewal is made this
 * gateway neither reads nor fills the cache: stale entries never come back with Redis.
 */
export class ResponseCache {
  readonly #owed = new Set<string>();
  #settling: Promise<void> | undefined;
  readonly now: () => number;

  constructor(
    private readonly redis: Redis,
    readonly settings: CacheSettings,
    private readonly logger: Logger,
    /** Hot entries in this gateway's memory (memory-tier.ts); undefined when CACHE_MEMORY_MB=0. */
    readonly memory?: MemoryTier,
  ) {
    this.now = settings.now ?? Date.now;
    redis.on('ready', () => void this.#settle());
  }

  /** Redis is connected and no invalidation is owed. */
  get usable(): boolean {
    return this.redis.status === 'ready' && this.#owed.size === 0;
  }

  /** A fresh entry held in this gateway's memory: no round trip. */
  held(scope: ReadScope): CachedResponse | undefined {
    const entry = this.memory?.held(scope);
    return entry && this.usable && this.isFresh(entry) ? entry : undefined;
  }

  /** One round trip; undefined when the cache cannot be used now. A current entry is also kept in memory. */
  async lookup(scope: ReadScope): Promise<Lookup | undefined> {
    if (!this.usable) return undefined;
    try {
      const [generation, stored] = await this.redis.mgetBuffer(scope.generationKey, scope.entryKey);
      const current = generation?.toString() ?? null;
      const entry = stored ? decode(stored) : undefined;
      if (!entry || entry.generation !== current) return { generation: current };
      if (this.isFresh(entry)) this.memory?.learn(scope, entry);
      return { generation: current, entry };
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
      const existing = (await this.redis.call('SET', scope.generationKey, created, 'EX', GENERATION_TTL_SECONDS, 'NX', 'GET')) as string | null;
      return existing ?? created;
    } catch {
      return undefined;
    }
  }

  async store(scope: ReadScope, entry: CachedResponse): Promise<void> {
    if (!this.usable) return;
    const lifetime = this.settings.ttlSeconds + this.settings.staleSeconds;
    const stored = await this.redis.set(scope.entryKey, encode(entry), 'EX', lifetime).catch(() => undefined);
    if (stored) this.memory?.learn(scope, entry);
  }

  /** Renews the generations a write affects: O(1) per key, whatever the number of entries. */
  async invalidate(generationKeys: string[]): Promise<void> {
    // Forgotten here too (not only when Redis's invalidation arrives), after the renewal: a read of
    // the old generation that raced the renewal must not serve this writer's client afterwards.
    this.memory?.forget(generationKeys);
    const failed = await this.#renew(generationKeys);
    this.memory?.forget(generationKeys);
    if (failed.length === 0) return;
    for (const key of failed) this.#owed.add(key);
    this.logger.warn({ owed: this.#owed.size }, 'could not invalidate the cache: bypassing it until Redis takes the invalidations');
    void this.#settle();
  }

  async #renew(keys: string[]): Promise<string[]> {
    const results = await Promise.allSettled(keys.map((key) => this.redis.set(key, newGeneration(), 'EX', GENERATION_TTL_SECONDS)));
    return keys.filter((_key, i) => results[i]?.status === 'rejected');
  }

  /** Pays the owed invalidations once Redis is back; retries while it is not. */
  #settle(): Promise<void> {
    this.#settling ??= (async () => {
      while (this.#owed.size > 0) {
        if (this.redis.status === 'ready') {
          const owed = [...this.#owed];
          const failed = new Set(await this.#renew(owed));
          for (const key of owed) if (!failed.has(key)) this.#owed.delete(key);
          if (this.#owed.size === 0) this.logger.info('owed cache invalidations made: the cache is in use again');
        }
        if (this.#owed.size > 0) await new Promise((resolve) => setTimeout(resolve, 200).unref());
      }
    })().finally(() => (this.#settling = undefined));
    return this.#settling;
  }
}

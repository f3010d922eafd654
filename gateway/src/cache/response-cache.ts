import { randomBytes } from 'node:crypto';
import type { Logger } from '@app/shared/platform/logger';
import { isClusterClient, isOutOfMemory, type CacheClient } from '../redis/client.js';
import { decode, encode, type CachedResponse } from './entry.js';
import type { MemoryTier } from './memory-tier.js';
import { defaultBreakerSettings, RedisHealth, type RedisBreakerSettings } from './redis-health.js';
import type { CacheLifetime, ReadKeying, WriteKeying } from './keys.js';
import { SpaceBudget } from './space-budget.js';

/**
 * Generations outlive every entry by far; they only need to expire eventually. Not much later: a
 * read of an id nobody has creates one, so a flood of made-up ids must not keep them for long.
 */
const GENERATION_MARGIN_SECONDS = 60;

/**
 * On a cluster, a write whose renewals a master could not take (it failed, and its replica has
 * not taken over yet) waits this long for them before its response leaves: the replica brings the
 * old generation with it, and another gateway would read the old entry from it meanwhile. Long
 * enough for a failover with cluster-node-timeout up to a few seconds (docs/deploy.md).
 */
export const CLUSTER_FAILOVER_WAIT_MS = 5_000;

/** The lifetime of an entry whose service sets none of its own, in services.json (CACHE_TTL_SECONDS, CACHE_STALE_SECONDS). */
export interface CacheSettings extends CacheLifetime {
  /**
   * The longest lifetime (ttl + stale seconds) a service sets, when longer than the default: the
   * generations, and each caller's space budget, must last as long as the entries they cover.
   */
  longestLifetimeSeconds?: number;
  /** The largest identity body stored (CACHE_MAX_ENTRY_BYTES): a larger one is answered, never stored. */
  maxEntryBytes: number;
  /** The bytes each caller may store per entry lifetime (CACHE_CALLER_BYTES; see SpaceBudget). */
  callerBytes: number;
  /** The clock (ms), for tests of expiry. */
  now?: () => number;
  /** When Redis counts as down (see RedisHealth). */
  breaker?: Partial<RedisBreakerSettings>;
}

/** What Redis holds for a read: the current generation, and the entry if it belongs to it. */
export interface Lookup {
  generation: string | null;
  entry?: CachedResponse;
  /** The bytes Redis held under the entry's key, whatever their generation: what storing a fill replaces. */
  storedBytes?: number;
}

const newGeneration = () => randomBytes(8).toString('base64url');

// Sets a hold for ARGV[1] ms unless it already lasts longer: a hold only ever grows, whichever
// replica sets it. A script rather than `PEXPIRE … GT` so that it runs on any Redis.
const HOLD_SCRIPT = `if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], '1', 'PX', ARGV[1]) end return 1`;

/** Resolves when `settling` does, or after `ms`. */
async function settledWithin(settling: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([settling, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

/**
 * The gateway's view of Redis. Every failure is a miss, never an error; whether Redis is down at
 * all is RedisHealth's judgement, not one command's. A write that cannot renew its generations or
 * set its holds is remembered, and until that renewal or hold is made this gateway neither reads
 * nor fills the scopes it covers (and only those): stale entries never come back with Redis.
 */
export class ResponseCache {
  readonly #owed = new Set<string>();
  /** Holds not yet set in Redis: key → until when (Date.now() ms). */
  readonly #owedHolds = new Map<string, number>();
  #settling: Promise<void> | undefined;
  /** Ends the settling loop's pause between two attempts, while it pauses. */
  #wakeSettle: (() => void) | undefined;
  readonly #health: RedisHealth;
  readonly #space: SpaceBudget;
  readonly #stopListening: () => void;
  #closed = false;
  readonly now: () => number;
  readonly #generationSeconds: number;
  /** How long a write waits for renewals it owes before its response leaves (see CLUSTER_FAILOVER_WAIT_MS). */
  readonly #owedWaitMs: number;

  constructor(
    redis: CacheClient,
    readonly settings: CacheSettings,
    private readonly logger: Logger,
    /** Hot entries in this gateway's memory (memory-tier.ts); undefined when CACHE_MEMORY_MB=0. */
    readonly memory?: MemoryTier,
  ) {
    this.now = settings.now ?? Date.now;
    const longestLifetime = Math.max(settings.ttlSeconds + settings.staleSeconds, settings.longestLifetimeSeconds ?? 0);
    this.#generationSeconds = longestLifetime + GENERATION_MARGIN_SECONDS;
    this.#health = new RedisHealth(redis, logger, { ...defaultBreakerSettings, ...settings.breaker });
    this.#space = new SpaceBudget(redis, settings.callerBytes, longestLifetime);
    this.#owedWaitMs = isClusterClient(redis) ? CLUSTER_FAILOVER_WAIT_MS : 0;
    // Pay what is owed on the turn Redis is back, not after the retry pause under way.
    const onReady = () => {
      this.#wakeSettle?.();
      void this.#settle();
    };
    redis.on('ready', onReady);
    this.#stopListening = () => redis.off('ready', onReady);
  }

  /**
   * Lets go of what it holds on to: its listener on the Redis client (which may be another's), the
   * health probe, and the retries of what is owed. The client itself is its maker's to close.
   */
  close(): void {
    this.#closed = true;
    this.#stopListening();
    this.#health.close();
    this.#wakeSettle?.();
  }

  /** For /metrics: whether Redis is judged up, and how many renewals and holds are owed. */
  get state(): { redisUp: boolean; owed: number } {
    return { redisUp: this.#health.up, owed: this.#owed.size + this.#owedHolds.size };
  }

  /** Nothing is owed: every renewal and hold a write asked for is in Redis. */
  get #settled(): boolean {
    return this.#owed.size === 0 && this.#owedHolds.size === 0;
  }

  /** Whether a read or fill of `keying` may use Redis: Redis is up and nothing is owed for this scope. */
  #usable(keying: ReadKeying): boolean {
    // Nothing owed, nothing to look up: a lookup would hash the scope's keys, new strings each request.
    return this.#health.up && (this.#settled || (!this.#owed.has(keying.generationKey) && !this.#owedHolds.has(keying.holdKey)));
  }

  /** A fresh entry held in this gateway's memory: no round trip. */
  held(keying: ReadKeying): CachedResponse | undefined {
    const entry = this.memory?.held(keying);
    return entry && this.#usable(keying) && this.isFresh(entry, keying) ? entry : undefined;
  }

  /**
   * One round trip; undefined when the cache cannot be used for this scope now, or the scope is held.
   * The memory tier learns the generation it finds (so a fill of this scope goes into memory as soon
   * as it is fetched), and keeps a current, fresh entry.
   */
  async lookup(keying: ReadKeying): Promise<Lookup | undefined> {
    if (!this.#usable(keying)) return undefined;
    const read = this.memory?.watch(keying);
    let found: (Buffer | null)[];
    try {
      found = await this.#health.run((redis) => redis.mgetBuffer(keying.holdKey, keying.generationKey, keying.entryKey));
    } catch {
      if (read) this.memory?.learnGeneration(read, null);
      return undefined;
    }
    const [hold, generation, stored] = found;
    const current = generation?.toString() ?? null;
    if (read) this.memory?.learnGeneration(read, hold === null ? current : null);
    if (hold !== null) return undefined;
    const storedBytes = stored?.length;
    const entry = stored ? decode(stored) : undefined;
    if (!entry || entry.generation !== current) return { generation: current, storedBytes };
    if (this.isFresh(entry, keying)) this.memory?.learn(keying, entry);
    return { generation: current, entry, storedBytes };
  }

  ageSeconds(entry: CachedResponse): number {
    return Math.max(0, Math.floor((this.now() - entry.storedAt) / 1000));
  }

  /** Within the time-to-live of the scope it was read for (its service's, else the default). */
  isFresh(entry: CachedResponse, keying: ReadKeying): boolean {
    return this.now() - entry.storedAt < (keying.lifetime?.ttlSeconds ?? this.settings.ttlSeconds) * 1000;
  }

  /** Expired, but recent enough to serve when the service fails. */
  isServableStale(entry: CachedResponse, keying: ReadKeying): boolean {
    return this.now() - entry.storedAt < this.#lifetimeSeconds(keying) * 1000;
  }

  /** How long an entry of `keying` lives: fresh, then stale. */
  #lifetimeSeconds({ lifetime }: ReadKeying): number {
    return (lifetime?.ttlSeconds ?? this.settings.ttlSeconds) + (lifetime?.staleSeconds ?? this.settings.staleSeconds);
  }

  /**
   * The generation a fetch is stored under, taken BEFORE the fetch: a write that lands while the
   * fetch is under way renews the generation, so what the fetch brings back is never served.
   * When there is none yet, one is created (or the one a concurrent request just created is used).
   */
  async generationFor(keying: ReadKeying, lookup: Lookup): Promise<string | undefined> {
    if (lookup.generation !== null) return lookup.generation;
    try {
      const created = newGeneration();
      const existing = (await this.#health.run((redis) => redis.call('SET', keying.generationKey, created, 'EX', this.#generationSeconds, 'NX', 'GET'))) as string | null;
      return existing ?? created;
    } catch {
      return undefined;
    }
  }

  /**
   * Stores a fill in Redis, and in memory at once when its generation is known current there (as its
   * lookup found it): the requests that come while the SET is under way are hits from memory already.
   * Only an entry of at most `maxEntryBytes` of body; in Redis, only within what `caller` may still
   * store there (SpaceBudget), paid for in the same round trip as the SET: an entry it could not pay
   * for is deleted again. A refill of a key that held `replacedBytes` (after a write, or once fresh no
   * more) pays only for what it adds and keeps the key's expiry, so every entry lives at most one
   * lifetime from when its space was paid for. The memory tier has its own bound.
   */
  async store(keying: ReadKeying, entry: CachedResponse, caller: string, replacedBytes = 0): Promise<void> {
    if (!this.#usable(keying) || entry.body.length > this.settings.maxEntryBytes) return;
    this.memory?.learn(keying, entry);
    const encoded = encode(entry);
    const lifetime = this.#lifetimeSeconds(keying);
    const expiry = replacedBytes > 0 ? ['XX', 'KEEPTTL'] : ['EX', lifetime];
    const added = Math.max(0, encoded.length - replacedBytes);
    const set = (...options: (string | number)[]) => this.#health.run((redis) => redis.call('SET', keying.entryKey, encoded, ...options)).catch(() => 'failed');
    const [paid, stored] = await Promise.all([added > 0 ? this.#space.take(caller, added) : true, set(...expiry)]);
    if (!paid) {
      await this.#health.run((redis) => redis.del(keying.entryKey)).catch(() => undefined);
      return;
    }
    // The key being refilled expired meanwhile: it is made anew, and paid for in full.
    if (stored === null && (await this.#space.take(caller, encoded.length - added))) await set('EX', lifetime);
  }

  /**
   * Renews the generations a write affects: O(1) per key, whatever the number of entries. A write
   * whose outcome is unknown (`holdMs`: the service may still commit it for that long) first holds
   * them too: until the hold ends no replica reads or fills the cache for them, so a read made
   * before the write lands is never kept as fresh. Hold first, renew second: a read that looked
   * before the hold was set stores under a generation the renewal then retires. A renewal or hold
   * that fails is owed: retried until Redis takes it, and meanwhile only its scope is bypassed.
   * This gateway's memory forgets the scopes too, before and after (not only when Redis's
   * invalidation arrives): a read of the old generation that raced the renewal must not serve this
   * writer's client afterwards. And every other replica's memory has let go of them too before this
   * resolves (the tier's barrier), so the client reads its write through any replica.
   */
  async invalidate(keyings: readonly WriteKeying[], options: { holdMs?: number } = {}): Promise<void> {
    const { holdMs } = options;
    this.memory?.forget(keyings);
    if (holdMs !== undefined) {
      const until = Date.now() + holdMs;
      for (const key of await this.#hold(keyings.map((keying) => keying.holdKey), holdMs)) this.#owedHolds.set(key, Math.max(until, this.#owedHolds.get(key) ?? 0));
    }
    const unrenewed = await this.#renew(keyings.map((keying) => keying.generationKey));
    for (const key of unrenewed) this.#owed.add(key);
    this.memory?.forget(keyings);
    // Every replica's memory has let go of what it renewed before its client hears back.
    if (this.memory && unrenewed.length < keyings.length) await this.memory.barrier();
    if (this.#settled) return;
    this.logger.warn(
      { owed: this.#owed.size, owedHolds: this.#owedHolds.size },
      'could not invalidate: bypassing the cache for the scopes concerned until Redis takes the invalidations',
    );
    const settling = this.#settle();
    if (this.#owedWaitMs > 0) await settledWithin(settling, this.#owedWaitMs);
  }

  /** Sets the holds for `ms`; returns the keys it could not set. */
  async #hold(keys: string[], ms: number): Promise<string[]> {
    const results = await Promise.allSettled(keys.map((key) => this.#health.run((redis) => redis.eval(HOLD_SCRIPT, 1, key, Math.ceil(ms)))));
    return keys.filter((_key, i) => results[i]?.status === 'rejected');
  }

  /** Renews the generations; returns the keys it could not renew. */
  async #renew(keys: string[]): Promise<string[]> {
    const results = await Promise.allSettled(keys.map((key) => this.#renewOne(key)));
    return keys.filter((_key, i) => results[i]?.status === 'rejected');
  }

  /**
   * A Redis that refuses to store anything more (maxmemory reached, `noeviction`) still deletes: a
   * scope with no generation matches no entry, and gets a new one once Redis has room again.
   */
  #renewOne(key: string): Promise<unknown> {
    return this.#health.run((redis) => redis.set(key, newGeneration(), 'EX', this.#generationSeconds)).catch((error: unknown) => {
      if (!isOutOfMemory(error)) throw error;
      return this.#health.run((redis) => redis.del(key));
    });
  }

  /** Pays the owed invalidations as soon as Redis takes them; retries while it does not. */
  #settle(): Promise<void> {
    this.#settling ??= (async () => {
      while ((this.#owed.size > 0 || this.#owedHolds.size > 0) && !this.#closed) {
        if (this.#health.up) {
          // Holds before renewals, as in `invalidate`; a hold whose time has passed is owed no more.
          for (const [key, until] of this.#owedHolds) {
            const remaining = until - Date.now();
            if (remaining <= 0 || (await this.#hold([key], remaining)).length === 0) this.#owedHolds.delete(key);
          }
          const owed = [...this.#owed];
          const failed = new Set(await this.#renew(owed));
          for (const key of owed) if (!failed.has(key)) this.#owed.delete(key);
          if (this.#settled) this.logger.info('owed cache invalidations made: every scope is cached again');
        }
        if (!this.#settled) {
          await new Promise<void>((resolve) => {
            const pause = setTimeout(resolve, 200).unref();
            this.#wakeSettle = () => {
              clearTimeout(pause);
              resolve();
            };
          });
          this.#wakeSettle = undefined;
        }
      }
    })().finally(() => (this.#settling = undefined));
    return this.#settling;
  }
}

import { RATE_LIMIT_HEADER, RATE_LIMIT_POLICY_HEADER, retryAfter } from '@app/shared/platform/http/headers';
import type { Logger } from '@app/shared/platform/logger';
import { LRUCache } from 'lru-cache';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { isOutOfMemory, type CacheClient } from '../redis/client.js';

/** Reads (GET, HEAD, OPTIONS) and writes have separate budgets: a client reading a lot can still write. */
export type Budget = 'read' | 'write';

export interface RateLimitSettings {
  readsPerMinute: number;
  writesPerMinute: number;
  /** Prefix of the counters' Redis keys. */
  keyPrefix: string;
  /** At most this many points one replica takes from Redis at once (RATE_LIMIT_LEASE_POINTS): 1 asks Redis for every request. */
  leasePoints: number;
}

export interface RateLimitOutcome {
  allowed: boolean;
  /** Refused because the budget cannot be counted now (Redis is full), not because it is spent: a 503. */
  uncounted?: true;
  /** `RateLimit-Policy` and `RateLimit` (IETF draft-ietf-httpapi-ratelimit-headers), and `Retry-After` when refused. */
  headers: Record<string, string>;
}

const WINDOW_SECONDS = 60;
/** When a caller refused because Redis is full may try again. */
const RETRY_UNCOUNTED_SECONDS = 1;
/** A lease is at most this share of a budget, so that small budgets stay exact (a budget under 200 leases one point at a time). */
const LEASE_SHARE_OF_BUDGET = 0.01;
/** Clients whose leases one replica remembers; a forgotten lease's unused points are lost for its window (never granted twice). */
const LEASES_HELD = 10_000;

/** Points of one client's budget that this replica took from Redis and hands out itself until its window ends. */
interface Lease {
  /** Taken from Redis, not used yet. */
  left: number;
  /** What Redis had left of the budget at the last grant (other replicas may have taken some since). */
  leftInStore: number;
  /** When the window ends (ms since the epoch): the lease ends with it, its unused points with it. */
  endsAt: number;
  /** Requests waiting for points, and the points asked of Redis for them and not yet granted. */
  waiting: number;
  coming: number;
  /** The last call to Redis for more points: what its waiters wait for. */
  refill?: Promise<RateLimitOutcome | undefined>;
}

/** What one call to the limiter gave: points within the window, or the outcome of a request let through without. */
type Taken = { granted: number; leftInStore: number; endsAt: number } | Decided;
/** The outcome of a request decided without points: let through, or refused uncounted. */
type Decided = { outcome: RateLimitOutcome };

/** What a limiter counted (or refused: beyond the budget), and which limiter it was. */
interface Counted {
  result: RateLimiterRes;
  by: RateLimiterAbstract;
}

/** A limiter's refusal (it rejects with its figures) read as its answer; any other failure stays one. */
const refusal = (error: unknown): RateLimiterRes => {
  if (error instanceof RateLimiterRes) return error;
  throw error;
};

/**
 * Per-client request budgets (fixed one-minute windows), counted in Redis so that every gateway
 * replica sharing it enforces one budget per client (rate-limiter-flexible's atomic Lua call). When
 * Redis fails or is not connected, each replica counts in its own memory instead (the insurance
 * limiter): limits loosen by the number of replicas, and nobody is refused or held up because Redis
 * is away. The Redis client's own timeout (twice REDIS_COMMAND_TIMEOUT_MS) bounds a slow Redis.
 * A Redis that answers but refuses to count (maxmemory reached) fails closed instead: a caller can
 * fill Redis on purpose, and must not earn a budget per replica by it. Its requests are refused
 * with a 503 once the points its replica already holds are used.
 *
 * Leases: a replica does not ask Redis for every request. It consumes a lease of points at once
 * (1% of the budget, at most RATE_LIMIT_LEASE_POINTS) and serves the client's next requests from
 * it, in memory and synchronously, topping it up in the background when half is used (a burst that
 * finds it empty waits for one round trip: as many leases in flight as its requests need). Points
 * are consumed in Redis before they are used, so no client gets more than its budget across replicas.
 * What that costs a client spread over replicas, and the rest: docs/architecture.md (Rate limits).
 *
 * This is a thin layer over the library, not a counter of our own: rate-limiter-flexible keeps the
 * count, the window, the atomic Lua script and the in-memory insurance; the lease only decides how
 * many points to ask it for at once, which the library has no option for.
 */
export class RateLimits {
  readonly #limiters: Record<Budget, RateLimiterAbstract>;
  /** Each replica's own count, for when Redis cannot be reached (undefined without Redis: then the limiters are these). */
  readonly #insurance: Record<Budget, RateLimiterAbstract> | undefined;
  /** Redis refused to count for being full, last it was asked (said once in the log, not per request). */
  #full = false;
  readonly #points: Record<Budget, number>;
  readonly #leaseSize: Record<Budget, number>;
  readonly #policies: Record<Budget, string>;
  readonly #leases: Record<Budget, LRUCache<string, Lease>>;

  constructor(
    redis: CacheClient | undefined,
    settings: RateLimitSettings,
    private readonly logger: Logger,
  ) {
    const options = (budget: Budget, points: number) => ({ points, duration: WINDOW_SECONDS, keyPrefix: `${settings.keyPrefix}:${budget}` });
    const memory = (budget: Budget, points: number) => new RateLimiterMemory(options(budget, points));
    // No inMemoryBlockOnConsumed: a lease cut short goes beyond the budget for a moment, and the
    // leases already refuse a client over its budget from memory until its window ends. No
    // insuranceLimiter either: `#take` chooses between it and failing closed by the error.
    const stored = (budget: Budget, points: number): RateLimiterAbstract =>
      redis ? new RateLimiterRedis({ ...options(budget, points), storeClient: redis, rejectIfRedisNotReady: true }) : memory(budget, points);
    this.#points = { read: settings.readsPerMinute, write: settings.writesPerMinute };
    this.#limiters = { read: stored('read', settings.readsPerMinute), write: stored('write', settings.writesPerMinute) };
    this.#insurance = redis ? { read: memory('read', settings.readsPerMinute), write: memory('write', settings.writesPerMinute) } : undefined;
    const leaseSize = (points: number) => Math.max(1, Math.min(settings.leasePoints, Math.floor(points * LEASE_SHARE_OF_BUDGET)));
    this.#leaseSize = { read: leaseSize(settings.readsPerMinute), write: leaseSize(settings.writesPerMinute) };
    this.#policies = {
      read: `"read";q=${settings.readsPerMinute};w=${WINDOW_SECONDS}`,
      write: `"write";q=${settings.writesPerMinute};w=${WINDOW_SECONDS}`,
    };
    this.#leases = { read: new LRUCache({ max: LEASES_HELD }), write: new LRUCache({ max: LEASES_HELD }) };
  }

  /**
   * Takes one request from `client`'s budget: at once from this replica's lease when it has points,
   * else after a call to Redis. Never rejects: a limiter failure lets the request through.
   */
  consume(budget: Budget, client: string): RateLimitOutcome | Promise<RateLimitOutcome> {
    const now = Date.now();
    let lease = this.#leases[budget].get(client);
    if (lease && lease.endsAt > now) {
      if (lease.left > 0) {
        lease.left--;
        // Half used: topped up by what was used before it runs out, so that a steady client never
        // waits for Redis. Never while points are coming: any refill in flight asks more than half a lease.
        const size = this.#leaseSize[budget];
        if (lease.left + lease.coming < Math.floor(size / 2) && lease.leftInStore > 0) this.#refill(budget, client, lease, size - lease.left);
        return this.#outcome(budget, true, lease.left + lease.leftInStore, lease.endsAt - now);
      }
      // Nothing left here nor in Redis: refused from memory until the window ends.
      if (lease.leftInStore <= 0 && lease.coming === 0) return this.#outcome(budget, false, 0, lease.endsAt - now);
    }
    if (!lease) {
      lease = { left: 0, leftInStore: 0, endsAt: 0, waiting: 0, coming: 0 };
      this.#leases[budget].set(client, lease);
    }
    // Points are asked for as requests come to wait for them: a burst waits for one round trip, with
    // as many leases in flight as it needs, and the points left over afterwards stay under one lease.
    lease.waiting++;
    const waited = lease;
    const refill = lease.refill !== undefined && lease.waiting <= lease.coming ? lease.refill : this.#refill(budget, client, lease, this.#leaseSize[budget]);
    return refill.then((outcome) => {
      waited.waiting--;
      return outcome ?? this.consume(budget, client);
    });
  }

  /** Asks Redis for `size` more points for `lease`: what its waiters wait for. */
  #refill(budget: Budget, client: string, lease: Lease, size: number): Promise<RateLimitOutcome | undefined> {
    lease.coming += size;
    const refill = this.#take(budget, client, size).then((taken) => {
      lease.coming -= size;
      if ('outcome' in taken) return taken.outcome;
      // Points of an earlier window ended with it. Redis's next window ends a window after it or later
      // (and a new lease's end is 0): half a window of leeway tells the two apart.
      const sameWindow = taken.endsAt - lease.endsAt < WINDOW_SECONDS * 500;
      lease.left = (sameWindow ? lease.left : 0) + taken.granted;
      lease.leftInStore = sameWindow ? Math.min(lease.leftInStore, taken.leftInStore) : taken.leftInStore;
      lease.endsAt = taken.endsAt;
      return undefined;
    });
    lease.refill = refill;
    return refill;
  }

  /** Consumes `size` points of `client`'s budget, and gives back at once those beyond the budget. */
  async #take(budget: Budget, client: string, size: number): Promise<Taken> {
    const letThrough = { outcome: { allowed: true, headers: { [RATE_LIMIT_POLICY_HEADER]: this.#policies[budget] } } };
    let counted: Counted | Decided;
    try {
      counted = await this.#counted(budget, client, size);
    } catch (error) {
      this.logger.warn({ err: error }, 'rate limiter failed: request let through');
      return letThrough;
    }
    if ('outcome' in counted) return counted;
    const { result, by } = counted;
    // A reply the limiter could not read (a Redis command that timed out half-way) has no figures:
    // the policy is still stated, the request goes on.
    if (!(Number.isFinite(result.consumedPoints) && Number.isFinite(result.msBeforeNext))) return letThrough;
    const points = this.#points[budget];
    // Of the points just counted, those within the budget are this replica's; the rest go back to
    // where they were counted (Redis, or this replica's memory while Redis cannot be reached).
    const granted = Math.min(size, Math.max(0, points - (result.consumedPoints - size)));
    if (granted < size) {
      by.reward(client, size - granted).catch((error: unknown) => this.logger.warn({ err: error }, 'rate limiter could not give back unused points'));
    }
    return { granted, leftInStore: Math.max(0, points - result.consumedPoints), endsAt: Date.now() + Math.max(0, result.msBeforeNext) };
  }

  /**
   * `size` points counted in Redis, or refused there for being beyond the budget; where Redis cannot
   * be reached, in this replica's memory. Where Redis answers but is full, nothing is counted: the
   * request is refused (fails closed).
   */
  async #counted(budget: Budget, client: string, size: number): Promise<Counted | Decided> {
    const limiter = this.#limiters[budget];
    try {
      const result = await limiter.consume(client, size).catch(refusal);
      this.#full = false;
      return { result, by: limiter };
    } catch (error) {
      if (!this.#insurance) throw error;
      const insurance = this.#insurance[budget];
      if (!isOutOfMemory(error)) return { result: await insurance.consume(client, size).catch(refusal), by: insurance };
      if (!this.#full) this.logger.warn({ err: error }, 'redis is full and cannot count request budgets: refusing requests beyond the points already leased');
      this.#full = true;
      return { outcome: { allowed: false, uncounted: true, headers: { [RATE_LIMIT_POLICY_HEADER]: this.#policies[budget], ...retryAfter(RETRY_UNCOUNTED_SECONDS) } } };
    }
  }

  #outcome(budget: Budget, allowed: boolean, remaining: number, resetMs: number): RateLimitOutcome {
    const resetSeconds = Math.ceil(resetMs / 1000);
    const headers: Record<string, string> = { [RATE_LIMIT_POLICY_HEADER]: this.#policies[budget], [RATE_LIMIT_HEADER]: `"${budget}";r=${remaining};t=${resetSeconds}` };
    if (!allowed) Object.assign(headers, retryAfter(Math.max(1, resetSeconds)));
    return { allowed, headers };
  }
}

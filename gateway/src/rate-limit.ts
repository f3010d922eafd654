import type { Logger } from '@app/shared/platform/logger';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Redis } from './redis.js';

/** Reads (GET, HEAD, OPTIONS) and writes have separate budgets: a client reading a lot can still write. */
export type Budget = 'read' | 'write';

export interface RateLimitSettings {
  readsPerMinute: number;
  writesPerMinute: number;
  /** Prefix of the counters' Redis keys. */
  keyPrefix: string;
}

export interface RateLimitOutcome {
  allowed: boolean;
  /** `RateLimit-Policy` and `RateLimit` (IETF draft-ietf-httpapi-ratelimit-headers), and `Retry-After` when refused. */
  headers: Record<string, string>;
}

const WINDOW_SECONDS = 60;

/**
 * Per-client request budgets (fixed one-minute windows), counted in Redis so that every gateway
 * replica sharing it enforces one budget per client (rate-limiter-flexible: one atomic Lua call per
 * request). When Redis fails or is not connected, each replica counts in its own memory instead
 * (the insurance limiter): limits loosen by the number of replicas, and nobody is refused or held
 * up because Redis is away. The Redis client's own timeout (twice REDIS_COMMAND_TIMEOUT_MS) bounds a slow Redis.
 */
export class RateLimits {
  readonly #limiters: Record<Budget, RateLimiterAbstract>;
  readonly #policies: Record<Budget, string>;

  constructor(
    redis: Redis | undefined,
    settings: RateLimitSettings,
    private readonly logger: Logger,
  ) {
    const limiter = (budget: Budget, points: number): RateLimiterAbstract => {
      const options = { points, duration: WINDOW_SECONDS, keyPrefix: `${settings.keyPrefix}:${budget}` };
      const memory = new RateLimiterMemory(options);
      if (!redis) return memory;
      return new RateLimiterRedis({
        ...options,
        storeClient: redis,
        rejectIfRedisNotReady: true,
        insuranceLimiter: memory,
        // A client over its budget is refused from memory until its window ends: a flood costs no Redis calls.
        inMemoryBlockOnConsumed: points + 1,
      });
    };
    this.#limiters = { read: limiter('read', settings.readsPerMinute), write: limiter('write', settings.writesPerMinute) };
    this.#policies = {
      read: `"read";q=${settings.readsPerMinute};w=${WINDOW_SECONDS}`,
      write: `"write";q=${settings.writesPerMinute};w=${WINDOW_SECONDS}`,
    };
  }

  /** Takes one request from `client`'s budget. Never rejects: a limiter failure lets the request through. */
  async consume(budget: Budget, client: string): Promise<RateLimitOutcome> {
    let result: RateLimiterRes;
    let allowed = true;
    try {
      result = await this.#limiters[budget].consume(client);
    } catch (error) {
      if (!(error instanceof RateLimiterRes)) {
        this.logger.warn({ err: error }, 'rate limiter failed: request let through');
        return { allowed: true, headers: { 'RateLimit-Policy': this.#policies[budget] } };
      }
      result = error;
      allowed = false;
    }
    const resetSeconds = Math.max(0, Math.ceil(result.msBeforeNext / 1000));
    // A reply the limiter could not read (a Redis command that timed out half-way) has no figures:
    // the policy is still stated, the request goes on.
    if (allowed && !(Number.isFinite(result.remainingPoints) && Number.isFinite(resetSeconds))) return { allowed, headers: { 'RateLimit-Policy': this.#policies[budget] } };
    const headers: Record<string, string> = {
      'RateLimit-Policy': this.#policies[budget],
      'RateLimit': `"${budget}";r=${result.remainingPoints};t=${resetSeconds}`,
    };
    if (!allowed) headers['Retry-After'] = String(Math.max(1, resetSeconds));
    return { allowed, headers };
  }
}

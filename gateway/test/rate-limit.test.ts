import { jest } from '@jest/globals';
import { createLogger } from '@app/shared/platform/logger';
import { type Budget, type RateLimitOutcome, RateLimits } from '../src/rate-limit.js';

/**
 * The per-client budgets counted in this process's memory (no Redis): the leases, the 429 exactly
 * at the budget, and the headers each outcome carries.
 */
const logger = createLogger('rate-limit-test', 'silent');
const limits = (readsPerMinute: number, writesPerMinute: number, leasePoints = 10) =>
  new RateLimits(undefined, { readsPerMinute, writesPerMinute, keyPrefix: 'rate-limit-test', leasePoints }, logger);

/** Consumes `count` requests one after the other; the outcomes in order. */
async function consumeMany(rateLimits: RateLimits, budget: Budget, client: string, count: number): Promise<RateLimitOutcome[]> {
  const outcomes = [];
  for (let i = 0; i < count; i++) outcomes.push(await rateLimits.consume(budget, client));
  return outcomes;
}

/** The `r` (remaining) and `t` (seconds to reset) of a `RateLimit` header. */
function remainingAndReset(outcome: RateLimitOutcome): { r: number; t: number } {
  const match = /^"(?:read|write)";r=(\d+);t=(\d+)$/.exec(outcome.headers.RateLimit ?? '');
  if (!match) throw new Error(`RateLimit header ${outcome.headers.RateLimit}`);
  return { r: Number(match[1]), t: Number(match[2]) };
}

describe('RateLimits without Redis', () => {
  it('lets a small budget through exactly, then refuses with Retry-After', async () => {
    const rateLimits = limits(5, 2);
    const outcomes = await consumeMany(rateLimits, 'read', 'alice', 6);
    expect(outcomes.map(({ allowed }) => allowed)).toEqual([true, true, true, true, true, false]);
    expect(outcomes.slice(0, 5).map((outcome) => remainingAndReset(outcome).r)).toEqual([4, 3, 2, 1, 0]);
    const refused = outcomes[5]!;
    expect(refused.headers['RateLimit-Policy']).toBe('"read";q=5;w=60');
    const { r, t } = remainingAndReset(refused);
    expect(r).toBe(0);
    expect(t).toBeGreaterThan(0);
    expect(t).toBeLessThanOrEqual(60);
    expect(refused.headers['Retry-After']).toBe(String(t));
  });

  it('states the policy and what is left on every allowed request, and no Retry-After', async () => {
    const [outcome] = await consumeMany(limits(100, 20), 'write', 'alice', 1);
    expect(outcome!.allowed).toBe(true);
    expect(outcome!.headers['RateLimit-Policy']).toBe('"write";q=20;w=60');
    expect(remainingAndReset(outcome!).r).toBe(19);
    expect(outcome!.headers['Retry-After']).toBeUndefined();
  });

  it('counts reads and writes in separate budgets, and each client in its own', async () => {
    const rateLimits = limits(2, 2);
    await consumeMany(rateLimits, 'read', 'alice', 2);
    expect((await rateLimits.consume('read', 'alice')).allowed).toBe(false);
    expect((await rateLimits.consume('write', 'alice')).allowed).toBe(true);
    expect((await rateLimits.consume('read', 'bob')).allowed).toBe(true);
  });

  it('serves a client from its lease synchronously once it holds one', async () => {
    // A budget of 1,000 leases 10 points at a time (1% of it, at most leasePoints).
    const rateLimits = limits(1_000, 10);
    const first = rateLimits.consume('read', 'alice');
    expect(first).toBeInstanceOf(Promise);
    expect((await first).allowed).toBe(true);
    for (let i = 0; i < 5; i++) {
      const next = rateLimits.consume('read', 'alice');
      expect(next).not.toBeInstanceOf(Promise);
      expect((next as RateLimitOutcome).allowed).toBe(true);
      // The window's end, counted from now: within the minute.
      const { t } = remainingAndReset(next as RateLimitOutcome);
      expect(t).toBeGreaterThan(0);
      expect(t).toBeLessThanOrEqual(60);
    }
  });

  it('cuts the last lease to what is left: the 429 comes exactly at a budget that is no multiple of the lease', async () => {
    const rateLimits = limits(1_005, 1, 10);
    const outcomes = await consumeMany(rateLimits, 'read', 'alice', 1_006);
    expect(outcomes.filter(({ allowed }) => allowed)).toHaveLength(1_005);
    expect(outcomes[1_004]!.allowed).toBe(true);
    expect(outcomes[1_005]!.allowed).toBe(false);
  });

  it('leases one point at a time when leasePoints is 1', async () => {
    const rateLimits = limits(1_000, 1, 1);
    const first = rateLimits.consume('read', 'alice');
    await first;
    // Every request asks the limiter: none is answered from a lease.
    expect(rateLimits.consume('read', 'alice')).toBeInstanceOf(Promise);
  });

  it('leases one point at a time for a budget under 200, whatever leasePoints says', async () => {
    const rateLimits = limits(199, 1, 10);
    await rateLimits.consume('read', 'alice');
    expect(rateLimits.consume('read', 'alice')).toBeInstanceOf(Promise);
  });

  it('gives a client its whole budget again once the window ends, nothing of the last one carried over', async () => {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'queueMicrotask', 'setImmediate'] });
    try {
      const small = limits(2, 1);
      const leased = limits(1_000, 1, 10);
      await consumeMany(small, 'read', 'alice', 2);
      expect((await small.consume('read', 'alice')).allowed).toBe(false);
      // Three of a lease of ten used: seven held when the window ends.
      await consumeMany(leased, 'read', 'alice', 3);
      jest.advanceTimersByTime(61_000);
      const [again] = await consumeMany(small, 'read', 'alice', 1);
      expect(again!.allowed).toBe(true);
      expect(remainingAndReset(again!).r).toBe(1);
      const [fresh] = await consumeMany(leased, 'read', 'alice', 1);
      expect(remainingAndReset(fresh!).r).toBe(999);
    } finally {
      jest.useRealTimers();
    }
  });

  it('refuses a burst beyond the budget, however many wait at once', async () => {
    const rateLimits = limits(50, 1, 10);
    const outcomes = await Promise.all(Array.from({ length: 80 }, () => rateLimits.consume('read', 'alice')));
    expect(outcomes.filter(({ allowed }) => allowed)).toHaveLength(50);
  });
});

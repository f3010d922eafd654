import { jest } from '@jest/globals';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createLogger } from '@app/shared/platform/logger';
import { Redis } from 'ioredis';
import { type Budget, type RateLimitOutcome, RateLimits } from '../../src/rate-limits/budgets.js';
import { createCacheClient, type CacheClient } from '../../src/redis/client.js';
import { freePort } from '../fixtures.js';

/**
 * The per-client budgets: counted in this process's memory (no Redis): the leases, the 429 exactly
 * at the budget, and the headers each outcome carries; in the test Redis, by replicas sharing it
 * (under a key prefix of this file's own); and when Redis cannot count (unreachable, answering
 * without figures, full: a redis-server of this file's own).
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

  it('ends a lease with its window: at its very end the next request asks the limiter', async () => {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'queueMicrotask', 'setImmediate'] });
    try {
      const rateLimits = limits(1_000, 1, 10);
      await rateLimits.consume('read', 'alice');
      jest.advanceTimersByTime(60_000);
      const next = rateLimits.consume('read', 'alice');
      expect(next).toBeInstanceOf(Promise);
      expect(remainingAndReset(await next).r).toBe(999);
    } finally {
      jest.useRealTimers();
    }
  });

  it('says the seconds to the window’s end rounded up, on allowed and refused requests alike', async () => {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'queueMicrotask', 'setImmediate'] });
    try {
      const rateLimits = limits(1, 1);
      expect(remainingAndReset(await rateLimits.consume('read', 'alice')).t).toBe(60);
      jest.advanceTimersByTime(1_500);
      const refused = await rateLimits.consume('read', 'alice');
      expect(remainingAndReset(refused).t).toBe(59);
      expect(refused.headers['Retry-After']).toBe('59');
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

/** A key prefix of this file's own in the shared test Redis, so that parallel runners never meet. */
const keyPrefix = `rate-limit-test-${randomBytes(4).toString('hex')}`;
const replicaOf = (redis: CacheClient | undefined, readsPerMinute: number, leasePoints: number, logs = logger) =>
  new RateLimits(redis, { readsPerMinute, writesPerMinute: 1, keyPrefix, leasePoints }, logs);

/** A client's read counter in Redis (rate-limiter-flexible's key: the prefix, the budget, the client). */
const counterKey = (client: string) => `${keyPrefix}:read:${client}`;

/** A connected Redis client, as the gateway makes it. */
async function connected(url: string): Promise<Redis> {
  const redis = createCacheClient(url, logger);
  if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
  return redis;
}

/**
 * Waits until what the limiters sent on `redis` so far (a background refill, points given back) is
 * answered and handled: Redis answers one connection's commands in order, and every promise
 * callback has run before the next turn of the event loop.
 */
async function settled(redis: Redis): Promise<void> {
  await redis.ping();
  await new Promise((resolve) => setImmediate(resolve));
}


describe('RateLimits with Redis shared by replicas', () => {
  let redis: Redis;
  beforeAll(async () => {
    redis = await connected(process.env.TEST_REDIS_URL!);
  });
  afterAll(() => redis.disconnect());
  const clientName = () => `client-${randomBytes(4).toString('hex')}`;

  it('counts one budget for a client across replicas', async () => {
    const [a, b] = [replicaOf(redis, 5, 1), replicaOf(redis, 5, 1)];
    const client = clientName();
    const outcomes = [];
    for (const replica of [a, b, a, b, a, b]) outcomes.push(await replica.consume('read', client));
    expect(outcomes.map(({ allowed }) => allowed)).toEqual([true, true, true, true, true, false]);
    expect(outcomes.slice(0, 5).map((outcome) => remainingAndReset(outcome).r)).toEqual([4, 3, 2, 1, 0]);
    const { t } = remainingAndReset(outcomes[5]!);
    expect(t).toBeGreaterThan(0);
    expect(t).toBeLessThanOrEqual(60);
    expect(outcomes[5]!.headers['Retry-After']).toBe(String(t));
  });

  it('takes a lease from Redis per replica, each stating what it holds and what Redis had left', async () => {
    const [a, b] = [replicaOf(redis, 1_000, 10), replicaOf(redis, 1_000, 10)];
    const client = clientName();
    // A takes ten points (990 left in Redis), then B ten (980 left): each says its own lease and Redis's rest as it saw it.
    expect(remainingAndReset(await a.consume('read', client)).r).toBe(9 + 990);
    expect(remainingAndReset(await b.consume('read', client)).r).toBe(9 + 980);
    expect(remainingAndReset(a.consume('read', client) as RateLimitOutcome).r).toBe(8 + 990);
    expect(await redis.get(counterKey(client))).toBe('20');
    // Half used, A tops its lease up in the background by what it used (six points), once while it is on its way...
    for (let i = 0; i < 5; i++) a.consume('read', client);
    await settled(redis);
    expect(await redis.get(counterKey(client))).toBe('26');
    // ... and learns from Redis what B took meanwhile.
    expect(remainingAndReset(a.consume('read', client) as RateLimitOutcome).r).toBe(8 + 974);
  });

  it('makes a burst wait for one round trip, with as many leases in flight as it needs and no more', async () => {
    const a = replicaOf(redis, 1_000, 10);
    const client = clientName();
    const burst = (size: number) => Promise.all(Array.from({ length: size }, () => a.consume('read', client)));
    // Ten requests at once: one lease for them all (topped up by six as it ran half empty).
    expect((await burst(10)).every(({ allowed }) => allowed)).toBe(true);
    await settled(redis);
    expect(await redis.get(counterKey(client))).toBe('16');
    // Seven more: the six held, and one that waits for the top-up the sixth sent rather than asking for a lease of its own.
    expect((await burst(7)).every(({ allowed }) => allowed)).toBe(true);
    await settled(redis);
    expect(await redis.get(counterKey(client))).toBe('22');
  });

  it('gives back at once the points of a lease beyond the budget, and refuses from memory after them', async () => {
    const [a, b] = [replicaOf(redis, 1_005, 10), replicaOf(redis, 1_005, 10)];
    const client = clientName();
    await redis.set(counterKey(client), 1_000, 'PX', 60_000);
    // A asks for ten, gets the five left and gives the other five back.
    expect(remainingAndReset(await a.consume('read', client)).r).toBe(4);
    await settled(redis);
    expect(await redis.get(counterKey(client))).toBe('1005');
    // B gets none and gives all ten back.
    expect((await b.consume('read', client)).allowed).toBe(false);
    await settled(redis);
    expect(await redis.get(counterKey(client))).toBe('1005');
    const rest = Array.from({ length: 5 }, () => a.consume('read', client));
    expect(rest.map((outcome) => (outcome as RateLimitOutcome).allowed)).toEqual([true, true, true, true, false]);
  });

  it('drops the points of a lease whose window Redis has ended, and counts in the new one', async () => {
    const a = replicaOf(redis, 1_000, 10);
    const client = clientName();
    // The window ends in twenty seconds: A's lease with it.
    await redis.set(counterKey(client), 500, 'PX', 20_000);
    expect(remainingAndReset(await a.consume('read', client)).r).toBe(9 + 490);
    // Redis starts a new window before A's lease ends (its clock runs ahead of the replica's).
    await redis.del(counterKey(client));
    for (let i = 0; i < 5; i++) a.consume('read', client);
    await settled(redis);
    // The top-up came from the new window: the old lease's four points and its count are gone.
    const next = a.consume('read', client) as RateLimitOutcome;
    expect(remainingAndReset(next).r).toBe(5 + 994);
    expect(remainingAndReset(next).t).toBeGreaterThan(20);
  });
});

describe('RateLimits when Redis cannot count', () => {
  it('counts in each replica’s memory while Redis cannot be reached, and lets nobody wait', async () => {
    // A client that would hold commands until it connects (ioredis's default): none is sent it.
    const unreachable = new Redis(`redis://127.0.0.1:${await freePort()}`);
    unreachable.on('error', () => undefined);
    try {
      const [a, b] = [replicaOf(unreachable, 2, 1), replicaOf(unreachable, 2, 1)];
      const outcomes = await consumeMany(a, 'read', 'alice', 3);
      expect(outcomes.map(({ allowed }) => allowed)).toEqual([true, true, false]);
      expect(outcomes.slice(0, 2).map((outcome) => remainingAndReset(outcome).r)).toEqual([1, 0]);
      expect(outcomes[2]!.headers['Retry-After']).toBeDefined();
      // Each replica its own count: the limit loosens by the number of replicas.
      expect((await b.consume('read', 'alice')).allowed).toBe(true);
    } finally {
      unreachable.disconnect();
    }
  });

  it('cuts the last lease at the budget in memory too, giving the rest back there, not to Redis', async () => {
    const unreachable = createCacheClient(`redis://127.0.0.1:${await freePort()}`, logger);
    const logs = createLogger('rate-limit-test', 'silent');
    const warn = jest.spyOn(logs, 'warn');
    try {
      // A budget of 201 leases two points at a time: the last lease has one point of the budget.
      const outcomes = await consumeMany(replicaOf(unreachable, 201, 10, logs), 'read', 'alice', 202);
      expect(outcomes.filter(({ allowed }) => allowed)).toHaveLength(201);
      expect(outcomes[201]!.allowed).toBe(false);
      await new Promise((resolve) => setImmediate(resolve));
      // Giving back to the Redis that did not count them would fail (and, were it back, lower its count).
      expect(warn).not.toHaveBeenCalled();
    } finally {
      unreachable.disconnect();
    }
  });

  it('lets a request through, stating only the policy, when Redis answers without figures', async () => {
    // A store client whose script replies carry no count or no time left (a reply read half-way).
    for (const reply of [[null, null], ['1', null], [null, 60_000]]) {
      const halfRead = { status: 'ready', defineCommand: () => undefined, rlflxIncr: async () => reply } as unknown as CacheClient;
      const outcomes = await consumeMany(replicaOf(halfRead, 1_000, 10), 'read', 'alice', 2);
      expect(outcomes).toEqual([
        { allowed: true, headers: { 'RateLimit-Policy': '"read";q=1000;w=60' } },
        { allowed: true, headers: { 'RateLimit-Policy': '"read";q=1000;w=60' } },
      ]);
    }
  });
});

describe('RateLimits on a redis-server of this file’s own', () => {
  /** A redis-server of this file's own, whose maxmemory the tests set and whose commands they count. */
  let server: ReturnType<typeof spawn>;
  let exited: Promise<unknown>;
  let redis: Redis;
  beforeAll(async () => {
    const port = await freePort();
    server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--maxmemory-policy', 'noeviction'], { stdio: 'ignore' });
    exited = new Promise((resolve) => server.once('exit', resolve));
    // Connected once the server listens: the client tries again every 50 to 200 ms.
    redis = await connected(`redis://127.0.0.1:${port}`);
  });
  afterAll(async () => {
    redis.disconnect();
    server.kill('SIGKILL');
    await exited;
  });
  const setFull = (full: boolean) => redis.config('SET', 'maxmemory', full ? '1' : '0');
  /** How many times the limiters' script ran, by Redis's own count. */
  const scriptCalls = async () => [...(await redis.info('commandstats')).matchAll(/^cmdstat_(?:eval|evalsha):calls=(\d+)/gm)].reduce((sum, [, calls]) => sum + Number(calls), 0);

  it('asks Redis once per lease while the budget lasts: nothing to give back', async () => {
    const a = replicaOf(redis, 1_000, 10);
    // The first call loads the script.
    await a.consume('read', 'warm-up');
    const before = await scriptCalls();
    for (let i = 0; i < 5; i++) await a.consume('read', 'bob');
    expect((await scriptCalls()) - before).toBe(1);
  });

  it('refuses with a 503 once the points already leased are used, and counts again when Redis has room', async () => {
    const logs = createLogger('rate-limit-test', 'silent');
    const warn = jest.spyOn(logs, 'warn');
    const a = replicaOf(redis, 1_000, 10, logs);
    const uncounted = { allowed: false, uncounted: true, headers: { 'RateLimit-Policy': '"read";q=1000;w=60', 'Retry-After': '1' } };
    expect((await a.consume('read', 'alice')).allowed).toBe(true);
    await setFull(true);
    try {
      // The nine points held are served, whatever Redis says to the top-ups.
      for (let i = 0; i < 9; i++) expect((await a.consume('read', 'alice')).allowed).toBe(true);
      expect(await a.consume('read', 'alice')).toEqual(uncounted);
      // Said at once, and once only, not per request.
      expect(warn).toHaveBeenCalledTimes(1);
      expect(await a.consume('read', 'alice')).toEqual(uncounted);
      expect(await a.consume('read', 'alice')).toEqual(uncounted);
      expect(warn).toHaveBeenCalledTimes(1);
      // Not counted in memory instead: another replica, holding nothing, refuses too (and says so itself).
      expect(await replicaOf(redis, 1_000, 10, logs).consume('read', 'alice')).toEqual(uncounted);
      expect(warn).toHaveBeenCalledTimes(2);
    } finally {
      await setFull(false);
    }
    expect((await a.consume('read', 'alice')).allowed).toBe(true);
    // Full again after counting again: said again.
    await setFull(true);
    try {
      for (let i = 0; i < 9; i++) await a.consume('read', 'alice');
      expect(await a.consume('read', 'alice')).toEqual(uncounted);
      expect(warn).toHaveBeenCalledTimes(3);
    } finally {
      await setFull(false);
    }
  });
});

/**
 * Rate limits, as clients see them: a budget per caller (its token's subject, or its address),
 * shared by every gateway replica through Redis, reads and writes apart, RateLimit headers on every
 * response under /api, 429 with Retry-After over budget, and requests still flowing with Redis cut
 * off (each replica then counts in memory). Two replicas are two gateway apps sharing one Redis.
 */
import { randomBytes } from 'node:crypto';
import { testToken } from '../support/auth.js';
import { client, expectProblem, type Client } from '../support/http.js';
import { startGateway, startProductsService, type RunningGateway, type RunningService } from '../support/stack.js';
import { relayRedis, testRedisTarget } from '../support/redis-cluster.js';
import type { RedisTarget } from '../../gateway/src/redis/client.js';

const READS = 5;
const WRITES = 3;
let products: RunningService;
let replicas: RunningGateway[];
let productPath: string;

/**
 * A replica counting in the test Redis (or `redisUrl`) under `keyPrefix`; `reads` per minute
 * (default READS, small enough that leases are one point: exact).
 */
function startReplica(keyPrefix: string, options: { redisUrl?: RedisTarget; trustedProxyHops?: number; reads?: number; leasePoints?: number } = {}) {
  return startGateway({
    upstreams: { users: products.url, products: products.url },
    guard: {
      publicReads: ['products'],
      trustedProxyHops: options.trustedProxyHops,
      rateLimits: {
        readsPerMinute: options.reads ?? READS,
        writesPerMinute: WRITES,
        leasePoints: options.leasePoints ?? 1_000,
        keyPrefix,
        redisUrl: options.redisUrl ?? testRedisTarget(),
      },
    },
  });
}

const newPrefix = () => `test-rl-${randomBytes(6).toString('hex')}`;

beforeAll(async () => {
  products = await startProductsService();
  const created = await client(products.url).post('/api/products', { sku: `RL-${Date.now()}`, name: 'Limited', price: { amount: '2.00', currency: 'EUR' } });
  productPath = created.headers.get('location')!;
  const prefix = newPrefix();
  replicas = [await startReplica(prefix), await startReplica(prefix)];
});
afterAll(async () => {
  await Promise.all(replicas.map((replica) => replica.close()));
  await products.close();
});

async function asSubject(subject: string, replica: RunningGateway): Promise<Client> {
  return client(replica.url, { token: await testToken({ subject }) });
}

describe('a client looping on one route', () => {
  it('is refused with 429 and Retry-After once over its budget, on every replica alike; another client is not', async () => {
    const [one, two] = await Promise.all([asSubject('looper', replicas[0]!), asSubject('looper', replicas[1]!)]);
    const remaining: string[] = [];
    for (let i = 0; i < READS; i++) {
      const response = await (i % 2 === 0 ? one : two).get(productPath);
      expect(response.status).toBe(200);
      expect(response.headers.get('ratelimit-policy')).toBe(`"read";q=${READS};w=60`);
      remaining.push(response.headers.get('ratelimit')!.split(';')[1]!);
    }
    // One budget across both replicas: 4, 3, 2, 1, 0 left.
    expect(remaining).toEqual(['r=4', 'r=3', 'r=2', 'r=1', 'r=0']);
    for (const replica of [one, two]) {
      const refused = await replica.get(productPath);
      expectProblem(refused, 429, 'rate-limited');
      const retryAfter = Number(refused.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(refused.headers.get('ratelimit')).toMatch(/^"read";r=0;t=\d+$/);
    }
    // Writes have their own budget: the looper may still write (here, a write it may not make: 403 is not 429).
    expect((await one.patch(productPath, { stock: 7 }, { token: await testToken({ subject: 'looper', scopes: ['products:read'] }) })).status).toBe(403);
    // Someone else, with or without a token, is unaffected.
    expect((await (await asSubject('bystander', replicas[1]!)).get(productPath)).status).toBe(200);
    expect((await client(replicas[0]!.url, { token: null }).get(productPath)).status).toBe(200);
  });

  it('counts writes apart from reads', async () => {
    const writer = await asSubject('writer', replicas[0]!);
    for (let i = 0; i < WRITES; i++) {
      const written = await writer.patch(productPath, { stock: i });
      expect(written.status).toBe(200);
      expect(written.headers.get('ratelimit-policy')).toBe(`"write";q=${WRITES};w=60`);
    }
    expectProblem(await writer.patch(productPath, { stock: 9 }), 429, 'rate-limited');
    expect((await writer.get(productPath)).status).toBe(200);
  });
});

describe('a cache hit', () => {
  it('carries the RateLimit headers once, counted like any request', async () => {
    const cached = await startGateway({
      upstreams: { users: products.url, products: products.url },
      cache: {},
      guard: { rateLimits: { readsPerMinute: READS, writesPerMinute: WRITES, leasePoints: 1_000, keyPrefix: newPrefix(), redisUrl: testRedisTarget() } },
    });
    try {
      const api = await asSubject('cached-reader', cached);
      const seen: { cache: string | null; limit: string | null; policy: string | null }[] = [];
      for (let i = 0; i < 3; i++) {
        const response = await api.get(productPath);
        seen.push({ cache: response.headers.get('x-cache'), limit: response.headers.get('ratelimit'), policy: response.headers.get('ratelimit-policy') });
      }
      expect(seen.map((s) => s.cache)).toEqual(['MISS', 'HIT', 'HIT']);
      expect(seen.map((s) => s.policy)).toEqual(Array(3).fill(`"read";q=${READS};w=60`));
      expect(seen.map((s) => /^"read";r=(\d+);t=\d+$/.exec(s.limit ?? '')?.[1])).toEqual(['4', '3', '2']);
    } finally {
      await cached.close();
    }
  });
});

describe('leases: each replica takes points from Redis in batches', () => {
  // 1% of 1000 is 10: each replica takes 10 points from Redis at once.
  const BUDGET = 1000;
  const LEASE = 10;

  /** `count` reads as `api`, `parallel` at a time, spread over `apis` in turn: their statuses. */
  async function flood(apis: Client[], count: number, parallel: number): Promise<number[]> {
    const statuses: number[] = [];
    for (let sent = 0; sent < count; sent += parallel) {
      const batch = Array.from({ length: Math.min(parallel, count - sent) }, (_, i) => apis[(sent + i) % apis.length]!.get(productPath));
      statuses.push(...(await Promise.all(batch)).map((response) => response.status));
    }
    return statuses;
  }

  it('keep the 429 boundary exact on one replica, and RateLimit counting down by one', async () => {
    const replica = await startReplica(newPrefix(), { reads: BUDGET, leasePoints: LEASE });
    try {
      const api = await asSubject('steady', replica);
      const remaining: number[] = [];
      for (let i = 0; i < BUDGET; i++) {
        const response = await api.get(productPath);
        expect(response.status).toBe(200);
        remaining.push(Number(/;r=(\d+);/.exec(response.headers.get('ratelimit')!)?.[1]));
      }
      expect(remaining).toEqual(Array.from({ length: BUDGET }, (_, i) => BUDGET - 1 - i));
      const refused = await api.get(productPath);
      expectProblem(refused, 429, 'rate-limited');
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(refused.headers.get('ratelimit')).toMatch(/^"read";r=0;t=\d+$/);
    } finally {
      await replica.close();
    }
  });

  it('refuse a client flooding two replicas within its budget, at most a lease per replica early; another client is unaffected', async () => {
    const prefix = newPrefix();
    const pair = [await startReplica(prefix, { reads: BUDGET, leasePoints: LEASE }), await startReplica(prefix, { reads: BUDGET, leasePoints: LEASE })];
    try {
      const flooder = await Promise.all(pair.map((replica) => asSubject('flooder', replica)));
      const statuses = await flood(flooder, BUDGET + 100, 20);
      const admitted = statuses.filter((status) => status === 200).length;
      expect(statuses.filter((status) => status !== 200 && status !== 429)).toEqual([]);
      // Never more than the budget; fewer by at most the points each replica leased and did not use.
      expect(admitted).toBeLessThanOrEqual(BUDGET);
      expect(admitted).toBeGreaterThanOrEqual(BUDGET - pair.length * (LEASE - 1));
      for (const api of flooder) {
        const refused = await api.get(productPath);
        expectProblem(refused, 429, 'rate-limited');
        expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      }
      for (const replica of pair) expect((await (await asSubject('neighbour', replica)).get(productPath)).status).toBe(200);
    } finally {
      await Promise.all(pair.map((replica) => replica.close()));
    }
  });

  it('still let requests through at once with Redis cut off, limited per replica', async () => {
    const redisProxy = await relayRedis();
    const replica = await startReplica(newPrefix(), { redisUrl: redisProxy.target, reads: BUDGET, leasePoints: LEASE });
    try {
      const api = await asSubject('leased-through-an-outage', replica);
      expect((await api.get(productPath)).status).toBe(200);
      await redisProxy.cut();
      const during = await flood([api], BUDGET + 20, 20);
      // The lease held when Redis went away is used up, then the replica counts a budget in memory.
      expect(during.filter((status) => status === 200).length).toBeGreaterThanOrEqual(BUDGET);
      expect(during.filter((status) => status !== 200 && status !== 429)).toEqual([]);
      expect(during.at(-1)).toBe(429);
      expect((await (await asSubject('neighbour', replica)).get(productPath, { signal: AbortSignal.timeout(5_000) })).status).toBe(200);
    } finally {
      await replica.close();
      await redisProxy.cut();
    }
  });
});

describe('the client address', () => {
  it('comes from X-Forwarded-For only through the trusted proxy hops', async () => {
    const direct = await startReplica(newPrefix());
    const behindIngress = await startReplica(newPrefix(), { trustedProxyHops: 1 });
    try {
      const anonymous = (gateway: RunningGateway, forwardedFor: string) =>
        client(gateway.url, { token: null }).get(productPath, { headers: { 'x-forwarded-for': forwardedFor } });
      // Without trusted hops, a client cannot make itself new budgets by inventing addresses.
      for (let i = 0; i < READS; i++) expect((await anonymous(direct, `203.0.113.${i}`)).status).toBe(200);
      expect((await anonymous(direct, '203.0.113.99')).status).toBe(429);
      // Behind one trusted proxy, the address it adds is the client: each has its own budget, and
      // what a client puts before it does not count.
      for (let i = 0; i < READS; i++) expect((await anonymous(behindIngress, `198.51.100.${i}, 203.0.113.7`)).status).toBe(200);
      expect((await anonymous(behindIngress, '203.0.113.7')).status).toBe(429);
      expect((await anonymous(behindIngress, '203.0.113.8')).status).toBe(200);
    } finally {
      await Promise.all([direct.close(), behindIngress.close()]);
    }
  });
});

describe('Redis cut off', () => {
  it('requests still flow, each replica counting in its own memory', async () => {
    const redisProxy = await relayRedis();
    const replica = await startReplica(newPrefix(), { redisUrl: redisProxy.target });
    try {
      const api = await asSubject('through-an-outage', replica);
      expect((await api.get(productPath)).headers.get('ratelimit')).toMatch(/^"read";r=4;/);
      await redisProxy.cut();
      // In memory: a fresh count, still limited.
      const during: number[] = [];
      for (let i = 0; i < READS + 1; i++) during.push((await api.get(productPath, { signal: AbortSignal.timeout(5_000) })).status);
      expect(during).toEqual([200, 200, 200, 200, 200, 429]);
    } finally {
      await replica.close();
      await redisProxy.cut();
    }
  });
});

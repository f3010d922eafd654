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
import { TcpProxy } from '../support/tcp-proxy.js';

const READS = 5;
const WRITES = 3;
let products: RunningService;
let replicas: RunningGateway[];
let productPath: string;

/** A replica counting in the test Redis (or `redisUrl`) under `keyPrefix`. */
function startReplica(keyPrefix: string, options: { redisUrl?: string; trustedProxyHops?: number } = {}) {
  return startGateway({
    usersUrl: products.url,
    productsUrl: products.url,
    guard: {
      publicProductReads: true,
      trustedProxyHops: options.trustedProxyHops,
      rateLimits: { readsPerMinute: READS, writesPerMinute: WRITES, keyPrefix, redisUrl: options.redisUrl ?? process.env.TEST_REDIS_URL! },
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
    const redisUrl = new URL(process.env.TEST_REDIS_URL!);
    const redisProxy = await new TcpProxy({ host: redisUrl.hostname, port: Number(redisUrl.port || 6379) }).start();
    const replica = await startReplica(newPrefix(), { redisUrl: redisProxy.rewrite(redisUrl.toString()) });
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

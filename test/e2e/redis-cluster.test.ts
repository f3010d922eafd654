/**
 * The gateway on a Redis Cluster (REDIS_CLUSTER_NODES): its cache entries, generations and rate
 * limit counters spread over every master by their hash tags. The test cluster of this run
 * (test/support/redis-cluster-server.ts), whichever jest project runs this file; the suites about
 * the cache, the in-memory tier, the rate limits and Redis health run against it in the
 * `Redis Cluster` project too, and the failover is `npm run chaos`'s.
 */
import { Redis } from 'ioredis';
import { testToken } from '../support/auth.js';
import { client } from '../support/http.js';
import { testCluster } from '../support/redis-cluster.js';
import { startGateway, startUsersService, type RunningGateway, type RunningService } from '../support/stack.js';

/** Enough that each of three masters gets some of their keys (all in one: about 1 in 100,000). */
const USERS = 32;

let users: RunningService;
let gateway: RunningGateway;

beforeAll(async () => {
  users = await startUsersService();
  gateway = await startGateway({ upstreams: { users: users.url, products: users.url }, cache: { redisUrl: testCluster() }, guard: { rateLimits: { keyPrefix: 'cluster-rl' } } });
});
afterAll(async () => {
  await gateway.close();
  await users.close();
});

/** The keys each master holds under `prefix`, by the master's port. */
async function keysByMaster(prefix: string): Promise<Map<number, string[]>> {
  const seed = new Redis({ ...testCluster().nodes[0]!, maxRetriesPerRequest: 0 });
  try {
    const ranges = (await seed.call('CLUSTER', 'SLOTS')) as [number, number, [string, number]][];
    const masters = [...new Set(ranges.map(([, , [, port]]) => port))];
    return new Map(
      await Promise.all(
        masters.map(async (port) => {
          const node = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0 });
          try {
            return [port, await node.keys(`${prefix}*`)] as const;
          } finally {
            node.disconnect();
          }
        }),
      ),
    );
  } finally {
    seed.disconnect();
  }
}

it('stores entries, generations and rate limit counters across every master', async () => {
  const prefix = process.env.TEST_REDIS_KEY_PREFIX!;
  for (let i = 0; i < USERS; i++) {
    const through = client(gateway.url, { token: await testToken({ subject: `cluster-caller-${i}` }) });
    const created = await through.post('/api/users', { email: `cluster${i}-${Date.now()}@example.com`, name: `Spread ${i}` });
    expect(created.status).toBe(201);
    const location = created.headers.get('location')!;
    expect((await through.get(location)).status).toBe(200);
    let read = await through.get(location);
    for (let attempt = 0; attempt < 50 && read.headers.get('x-cache') !== 'HIT'; attempt++) read = await through.get(location);
    expect(read.headers.get('x-cache')).toBe('HIT');
  }
  const held = await keysByMaster(prefix);
  const counters = await keysByMaster(`${prefix}cluster-rl:`);
  expect(held.size).toBe(3);
  for (const [port, keys] of held) {
    expect({ port, entries: keys.some((key) => key.startsWith(`${prefix}c:{users:`)) }).toEqual({ port, entries: true });
    expect({ port, generations: keys.some((key) => key.startsWith(`${prefix}g:{users:`)) }).toEqual({ port, generations: true });
    expect({ port, counters: (counters.get(port) ?? []).length > 0 }).toEqual({ port, counters: true });
  }
});

/**
 * Redis full (maxmemory reached, nothing it may evict): a caller can fill it on purpose, with
 * distinct valid list pages. Two gateway replicas share it. A write acknowledged through one is
 * never followed by an older read through the other (the renewal Redis refuses to store becomes a
 * delete, which it still takes), and a caller gets no more than its budget across both (the
 * limits fail closed rather than count per replica). Real gateways, users service and redis-server.
 */
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { client } from '../support/http.js';
import { startOwnRedis, type OwnRedis } from '../support/redis-server.js';
import { startGateway, startUsersService, type RunningGateway, type RunningService } from '../support/stack.js';
import { repoPath } from '../deploy/stack.js';

/** The eviction policy docker-compose.yml ships Redis with. */
function shippedPolicy(): string {
  const compose = parse(readFileSync(repoPath('docker-compose.yml'), 'utf8')) as { services: { redis: { command: string[] } } };
  const { command } = compose.services.redis;
  return command[command.indexOf('--maxmemory-policy') + 1]!;
}

const policies = [...new Set(['noeviction', shippedPolicy()])];
let users: RunningService;
beforeAll(async () => {
  users = await startUsersService();
});
afterAll(() => users.close());

describe.each(policies)('with Redis full (maxmemory reached, %s)', (policy) => {
  let redis: OwnRedis;
  const gateways: RunningGateway[] = [];
  beforeEach(async () => {
    redis = await startOwnRedis({ maxmemory: '8mb', policy });
  });
  afterEach(async () => {
    await Promise.all(gateways.splice(0).map((gateway) => gateway.close()));
    await redis.stop();
  });

  async function replicas(guard: Parameters<typeof startGateway>[0]['guard'] = { rateLimits: false }) {
    const started = await Promise.all(
      [0, 1].map(() => startGateway({ usersUrl: users.url, productsUrl: users.url, cache: { redisUrl: redis.url, keyPrefix: 'full:' }, guard })),
    );
    gateways.push(...started);
    return started.map((gateway) => client(gateway.url));
  }

  it('a write acknowledged through one replica is never followed by an older read through the other', async () => {
    const [writer, reader] = await replicas();
    const locations: string[] = [];
    for (let i = 0; i < 20; i++) {
      const created = await writer!.post('/api/users', { email: `full-${policy}-${i}-${Date.now()}@example.com`, name: `Before ${i}` });
      expect(created.status).toBe(201);
      locations.push(created.headers.get('location')!);
    }
    // Each is held by the reader (its memory and Redis) before Redis fills up.
    for (const location of locations) {
      await reader!.get(location);
      expect((await reader!.get(location)).headers.get('x-cache')).toBe('HIT');
    }
    expect(await redis.fill()).toBeGreaterThan(0);
    const stale: string[] = [];
    for (const [i, location] of locations.entries()) {
      expect((await writer!.patch(location, { name: `After ${i}` })).status).toBe(200);
      const read = await reader!.get(location);
      expect(read.status).toBe(200);
      if (read.body.name !== `After ${i}`) stale.push(`${location}: ${read.body.name} (${read.headers.get('x-cache')})`);
    }
    expect(stale).toEqual([]);
  });

  it('a caller gets no more than its budget across replicas: the limits fail closed', async () => {
    const budget = 10;
    const [a, b] = await replicas({ rateLimits: { readsPerMinute: budget, redisUrl: redis.url, keyPrefix: `full-rl-${policy}` } });
    const created = await a!.post('/api/users', { email: `budget-${policy}-${Date.now()}@example.com`, name: 'Budget' });
    expect(created.status).toBe(201);
    const location = created.headers.get('location')!;
    expect(await redis.fill()).toBeGreaterThan(0);
    const statuses: number[] = [];
    for (let i = 0; i < 3 * budget; i++) {
      const read = await (i % 2 === 0 ? a! : b!).get(location);
      statuses.push(read.status);
      if (read.status !== 200) expect(read.headers.get('retry-after')).toMatch(/^\d+$/);
    }
    expect(statuses.filter((status) => status === 200).length).toBeLessThanOrEqual(budget);
    expect(statuses.filter((status) => status !== 200 && status !== 429 && status !== 503)).toEqual([]);
  });
});

import { configSchema } from '../../src/config.js';
import { redisTarget } from '../../src/redis/client.js';

const parsed = (env: Record<string, string>) => configSchema.safeParse({ AUTH_ENABLED: 'false', ...env });

it('uses REDIS_URL unless REDIS_CLUSTER_NODES names seed nodes', () => {
  expect(redisTarget(parsed({ REDIS_URL: 'redis://cache:6379' }).data!)).toBe('redis://cache:6379');
  expect(redisTarget(parsed({ REDIS_URL: 'redis://cache:6379', REDIS_CLUSTER_NODES: '' }).data!)).toBe('redis://cache:6379');
});

it('reads seed nodes as host:port or URLs, the credentials and TLS of any item applying to all', () => {
  expect(redisTarget(parsed({ REDIS_CLUSTER_NODES: '10.0.0.1:7000, redis-1.redis:7001' }).data!)).toEqual({
    nodes: [
      { host: '10.0.0.1', port: 7000 },
      { host: 'redis-1.redis', port: 7001 },
    ],
    username: undefined,
    password: undefined,
    tls: false,
  });
  expect(redisTarget(parsed({ REDIS_CLUSTER_NODES: 'rediss://:s%40cret@cache-0.example:6379,cache-1.example:6379,[::1]:7000' }).data!)).toEqual({
    nodes: [
      { host: 'cache-0.example', port: 6379 },
      { host: 'cache-1.example', port: 6379 },
      { host: '::1', port: 7000 },
    ],
    username: undefined,
    password: 's@cret',
    tls: true,
  });
});

it.each(['cache', 'cache:', 'http://cache:6379', 'redis://cache', 'redis://cache:6379/2'])('refuses the seed node %s', (node) => {
  const result = parsed({ REDIS_CLUSTER_NODES: node });
  expect(result.success).toBe(false);
  expect(result.error?.issues.map((issue) => issue.path.join('.'))).toEqual(['REDIS_CLUSTER_NODES']);
});

/**
 * The cache tells "Redis is down" from "Redis is slow": a slow Redis keeps the cache in use, and an
 * invalidation Redis did not take bypasses only the scopes it covers. Real gateway, real users
 * service, real Redis behind a TCP proxy the test steers.
 */
import { client, metricsOf, type Client } from '../support/http.js';
import { readMetrics } from '../../tools/metrics.js';
import { capturingLogger, startGateway, startUsersService, type RunningGateway, type RunningService } from '../support/stack.js';
import { relayRedis, type RedisRelay } from '../support/redis-cluster.js';

let users: RunningService;
let redisProxy: RedisRelay;
let gateway: RunningGateway;
let api: Client;
let counter = 0;
const gatewayLog = capturingLogger('gateway');

beforeAll(async () => {
  redisProxy = await relayRedis();
  users = await startUsersService();
  // The Redis path alone: how the in-memory tier in front of it meets a silent Redis is memory-tier.test.ts's.
  const cache = { redisUrl: redisProxy.target, memoryBytes: 0 };
  gateway = await startGateway({ upstreams: { users: users.url, products: users.url }, logger: gatewayLog.logger, cache });
  api = client(gateway.url);
});
afterAll(async () => {
  await gateway.close();
  await redisProxy.cut();
  await users.close();
});
afterEach(() => {
  redisProxy.replyDelayMs = 0;
  redisProxy.tamper = undefined;
  redisProxy.afterReply = undefined;
});

async function createUser() {
  const n = ++counter;
  const created = await api.post('/api/users', { email: `health${n}-${Date.now()}@example.com`, name: `Health ${n}` });
  expect(created.status).toBe(201);
  return { location: created.headers.get('location')!, id: created.body.id as string, email: created.body.email as string };
}

async function untilHit(path: string, on: Client = api) {
  for (let attempt = 0; attempt < 50; attempt++) {
    const response = await on.get(path);
    if (response.headers.get('x-cache') === 'HIT') return response;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`${path} never became a cache hit`);
}

const bypassCount = async () => readMetrics(await metricsOf(gateway)).value('gateway_cache_outcomes_total', { outcome: 'bypass' });

it('keeps using the cache when Redis answers slower than the old 100 ms timeout: hits, invalidations, no bypass', async () => {
  const user = await createUser();
  const bypassBefore = await bypassCount();
  redisProxy.replyDelayMs = 150;
  expect((await api.get(user.location)).headers.get('x-cache')).toBe('MISS');
  expect((await untilHit(user.location)).status).toBe(200);
  expect((await api.patch(user.location, { name: 'Written while Redis is slow' })).status).toBe(200);
  const read = await api.get(user.location);
  expect({ cache: read.headers.get('x-cache'), name: read.body.name }).toEqual({ cache: 'MISS', name: 'Written while Redis is slow' });
  expect((await untilHit(user.location)).body.name).toBe('Written while Redis is slow');
  expect(await bypassCount()).toBe(bypassBefore);
});

it('does not call a reply late that came in time while the gateway\'s event loop was busy for longer than the command timeout', async () => {
  const user = await createUser();
  await api.get(user.location);
  await untilHit(user.location);
  const bypassBefore = await bypassCount();
  // The gateway runs in this process: once Redis' reply to the lookup is in the gateway's socket,
  // keep the event loop busy for 1.5 s, past the 1 s command timeout.
  redisProxy.afterReply = () => {
    redisProxy.afterReply = undefined;
    const until = Date.now() + 1_500;
    while (Date.now() < until);
  };
  const read = await api.get(user.location);
  expect({ status: read.status, cache: read.headers.get('x-cache') }).toEqual({ status: 200, cache: 'HIT' });
  expect(await bypassCount()).toBe(bypassBefore);
});

it('does not take the Redis client\'s own hard stop, reached while the gateway\'s event loop was busy past it, for an outage', async () => {
  // As in production: every command is cut at twice the 1 s command timeout by the client itself.
  const log = capturingLogger('gateway');
  const cache = { redisUrl: redisProxy.target, memoryBytes: 0, commandTimeoutMs: 2_000 };
  const hardStopped = await startGateway({ upstreams: { users: users.url, products: users.url }, logger: log.logger, cache });
  const local = client(hardStopped.url);
  const bypassed = async () => Number(/gateway_cache_outcomes_total\{outcome="bypass"\} (\d+)/.exec(await metricsOf(hardStopped))?.[1] ?? 0);
  try {
    const created = await Promise.all(Array.from({ length: 8 }, () => createUser()));
    for (const user of created) {
      await local.get(user.location);
      await untilHit(user.location, local);
    }
    // Redis' replies wait 300 ms in the proxy; once all eight lookups are on their way, keep the
    // event loop busy for 2.5 s: the client's 2 s timers then fire before the replies are read.
    redisProxy.replyDelayMs = 300;
    const unseen = new Set(created.map((user) => user.id));
    redisProxy.tamper = (sent) => {
      const text = sent.toString('latin1');
      for (const id of unseen) if (text.includes(id)) unseen.delete(id);
      if (unseen.size === 0) {
        redisProxy.tamper = undefined;
        const until = Date.now() + 2_500;
        while (Date.now() < until);
      }
      return sent;
    };
    const reads = await Promise.all(created.map((user) => local.get(user.location)));
    // Those lookups failed (the client dropped their replies), so those eight reads went to the
    // service; but Redis is not judged down: the next reads are hits again, nothing more is bypassed.
    expect(reads.map((read) => read.status)).toEqual(Array(8).fill(200));
    expect(log.lines.filter((line) => line.level === 'warn' && String(line.msg).startsWith('redis is not answering'))).toEqual([]);
    redisProxy.replyDelayMs = 0;
    const bypassedBefore = await bypassed();
    for (const user of created) expect((await local.get(user.location)).headers.get('x-cache')).toBe('HIT');
    expect(await bypassed()).toBe(bypassedBefore);
  } finally {
    await hardStopped.close();
  }
});

it('bypasses only the scopes whose invalidation Redis did not take, and caches them again once it does', async () => {
  const written = await createUser();
  const other = await createUser();
  for (const path of [written.location, other.location]) {
    await api.get(path);
    await untilHit(path);
  }
  // Redis refuses (an error reply) every renewal of the written item's generation (its key after
  // this run's REDIS_KEY_PREFIX): it stays owed.
  const renewal = new RegExp(`\\$3\\r\\nSET(\\r\\n\\$\\d+\\r\\n[^\\r]*g:\\{users:${written.id}\\})`, 'gi');
  redisProxy.tamper = (sent) => Buffer.from(sent.toString('latin1').replace(renewal, '$$3\r\nSXT$1'), 'latin1');

  expect((await api.patch(written.location, { name: 'Invalidation owed' })).status).toBe(200);
  for (let i = 0; i < 3; i++) {
    const owed = await api.get(written.location);
    expect({ cache: owed.headers.get('x-cache'), name: owed.body.name }).toEqual({ cache: 'BYPASS', name: 'Invalidation owed' });
    expect((await api.get(other.location)).headers.get('x-cache')).toBe('HIT');
  }
  expect(await metricsOf(gateway)).toMatch(/^gateway_cache_owed_invalidations 1$/m);
  // The list pages' generation was renewed, so they are cached as usual.
  const list = `/api/users?email=${encodeURIComponent(written.email)}`; // a page no other test reads
  expect((await api.get(list)).headers.get('x-cache')).toBe('MISS');
  await untilHit(list);

  redisProxy.tamper = undefined;
  expect((await untilHit(written.location)).body.name).toBe('Invalidation owed');
});

it('judges a Redis that stops answering down after a few timed-out commands, serves from the services meanwhile, and uses it again once it answers', async () => {
  const user = await createUser();
  await api.get(user.location);
  await untilHit(user.location);
  redisProxy.replyDelayMs = 3_000; // longer than the 1 s command timeout: Redis looks hung
  const during = await Promise.all(Array.from({ length: 6 }, () => api.get(user.location)));
  expect(during.map((r) => [r.status, r.headers.get('x-cache')])).toEqual(Array(6).fill([200, 'BYPASS']));
  expect(gatewayLog.lines.filter((line) => line.msg === 'redis is not answering: the cache is bypassed until it does')).toHaveLength(1);
  expect(await metricsOf(gateway)).toMatch(/^gateway_redis_up 0$/m);
  const judgedDown = await api.get(user.location);
  expect({ status: judgedDown.status, cache: judgedDown.headers.get('x-cache') }).toEqual({ status: 200, cache: 'BYPASS' });
  redisProxy.replyDelayMs = 0;
  let back = await api.get(user.location);
  for (let i = 0; i < 100 && back.headers.get('x-cache') !== 'HIT'; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    back = await api.get(user.location);
  }
  expect(back.headers.get('x-cache')).toBe('HIT');
  expect(gatewayLog.lines.some((line) => line.msg === 'redis answers again: the cache is in use')).toBe(true);
  expect(await metricsOf(gateway)).toMatch(/^gateway_redis_up 1$/m);
});

/**
 * The gateway's Redis cache, as clients see it: hits, invalidation by every kind of write (also
 * across gateway replicas), the read/write race, request collapsing, stale-if-error, and Redis cut
 * off and back. Real gateway, real users service (behind a proxy the test steers), real Redis.
 */
import net from 'node:net';
import { client, metricsOf, expectProblem, type Client } from '../support/http.js';
import { readMetrics } from '../../tools/metrics.js';
import { HoldingProxy } from '../support/holding-proxy.js';
import { portOf } from '../support/raw-socket.js';
import { capturingLogger, startGateway, startUsersService, untilTracking, type RunningGateway, type RunningService } from '../support/stack.js';
import { relayRedis } from '../support/redis-cluster.js';

const deadline = () => ({ signal: AbortSignal.timeout(8_000) });

let users: RunningService;
let upstream: HoldingProxy;
let clock = Date.now();
const cacheOptions = { ttlSeconds: 60, staleSeconds: 300, now: () => clock };
let gateway: RunningGateway;
let api: Client;
let counter = 0;

beforeAll(async () => {
  users = await startUsersService();
  upstream = await new HoldingProxy(users.url).start();
  gateway = await startGateway({ upstreams: { users: upstream.url, products: users.url }, cache: cacheOptions, upstreamTimeoutMs: 1_000 });
  api = client(gateway.url);
});
afterAll(async () => {
  await gateway.close();
  await upstream.stop();
  await users.close();
});
beforeEach(() => {
  upstream.failWith = undefined;
});

async function createUser() {
  const n = ++counter;
  const created = await api.post('/api/users', { email: `cache${n}-${Date.now()}@example.com`, name: `Cached ${n}` });
  expect(created.status).toBe(201);
  return { location: created.headers.get('location')!, body: created.body, etag: created.headers.get('etag')! };
}

/** GETs `path` until the cache answers it (the entry is stored just after the miss's response). */
async function untilHit(path: string) {
  for (let attempt = 0; attempt < 50; attempt++) {
    const response = await api.get(path);
    if (response.headers.get('x-cache') === 'HIT') return response;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`${path} never became a cache hit`);
}

describe('hits and misses', () => {
  it('answers a repeated GET from the cache: MISS, then HIT with Age, without reaching the service', async () => {
    const user = await createUser();
    const first = await api.get(user.location);
    expect(first.headers.get('x-cache')).toBe('MISS');
    expect(first.headers.get('age')).toBeNull();
    const hit = await untilHit(user.location);
    expect(hit.status).toBe(200);
    expect(hit.body).toEqual(user.body);
    expect(hit.headers.get('etag')).toBe(user.etag);
    expect(hit.headers.get('cache-control')).toBe('no-cache');
    expect(hit.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(hit.headers.get('age')).toMatch(/^\d+$/);
    expect(hit.headers.get('x-request-id')).toMatch(/^[A-Za-z0-9._-]+$/);
    const before = upstream.count('GET', user.location);
    await api.get(user.location);
    expect(upstream.count('GET', user.location)).toBe(before);
  });

  it('answers HEAD and a matching If-None-Match (304) from the same entry', async () => {
    const user = await createUser();
    await api.get(user.location);
    await untilHit(user.location);
    const before = upstream.count('GET', user.location) + upstream.count('HEAD', user.location);
    const head = await api.head(user.location);
    expect({ status: head.status, cache: head.headers.get('x-cache'), body: head.text }).toEqual({ status: 200, cache: 'HIT', body: '' });
    const notModified = await api.get(user.location, { headers: { 'if-none-match': user.etag } });
    expect({ status: notModified.status, cache: notModified.headers.get('x-cache'), etag: notModified.headers.get('etag') }).toEqual({
      status: 304,
      cache: 'HIT',
      etag: user.etag,
    });
    expect(upstream.count('GET', user.location) + upstream.count('HEAD', user.location)).toBe(before);
  });

  it('keys lists by path and normalised query: parameter order does not matter', async () => {
    const user = await createUser();
    const email = encodeURIComponent(user.body.email);
    expect((await api.get(`/api/users?limit=5&email=${email}`)).headers.get('x-cache')).toBe('MISS');
    const hit = await untilHit(`/api/users?email=${email}&limit=5`);
    expect(hit.body.items).toEqual([user.body]);
  });

  it('never caches other statuses: a 404 reaches the service every time', async () => {
    const path = '/api/users/0193a5c2-7b1e-7c4d-9a61-2f0c1b9e8d40';
    for (let i = 0; i < 3; i++) expect((await api.get(path)).headers.get('x-cache')).toBe('MISS');
    expect(upstream.count('GET', path)).toBe(3);
  });

  it('bypasses the cache for requests with Cookie, and for paths it does not cache', async () => {
    const user = await createUser();
    await api.get(user.location);
    await untilHit(user.location);
    const response = await api.get(user.location, { headers: { cookie: 'a=b' } });
    expect(response.headers.get('x-cache')).toBe('BYPASS');
    expect(response.body).toEqual(user.body);
    expect((await api.get('/api/unlisted')).headers.get('x-cache')).toBe('BYPASS');
    expect((await api.get('/api/users/not-an-id')).headers.get('x-cache')).toBe('BYPASS');
  });

  it('with authentication off, bypasses it for requests with Authorization: the service may answer them per caller', async () => {
    const unguarded = await startGateway({ upstreams: { users: users.url, products: users.url }, cache: cacheOptions, guard: { auth: false } });
    try {
      const user = await createUser();
      const response = await client(unguarded.url).get(user.location, { headers: { authorization: 'Bearer x' } });
      expect(response.headers.get('x-cache')).toBe('BYPASS');
      expect(response.body).toEqual(user.body);
    } finally {
      await unguarded.close();
    }
  });

  it('marks every GET/HEAD under /api BYPASS when the cache is off', async () => {
    const uncached = await startGateway({ upstreams: { users: users.url, products: users.url } });
    try {
      const response = await client(uncached.url).get('/api/users?limit=1');
      expect(response.headers.get('x-cache')).toBe('BYPASS');
      expect((await client(uncached.url).head('/api/users?limit=1')).headers.get('x-cache')).toBe('BYPASS');
    } finally {
      await uncached.close();
    }
  });
});

describe('never stale after a write', () => {
  it.each([
    ['PUT', (api: Client, location: string) => api.put(location, { email: `put${++counter}@example.com`, name: 'Replaced' })],
    ['PATCH', (api: Client, location: string) => api.patch(location, { name: 'Patched' })],
    ['DELETE', (api: Client, location: string) => api.delete(location)],
  ])('%s invalidates the item and the list pages before its response arrives', async (_method, write) => {
    const user = await createUser();
    const list = `/api/users?email=${encodeURIComponent(user.body.email)}`;
    await api.get(user.location);
    await api.get(list);
    await untilHit(user.location);
    await untilHit(list);
    const written = await write(api, user.location);
    expect(written.status).toBeLessThan(300);
    const item = await api.get(user.location);
    const page = await api.get(list);
    expect(item.headers.get('x-cache')).toBe('MISS');
    expect(page.headers.get('x-cache')).toBe('MISS');
    if (written.status === 204) {
      expect(item.status).toBe(404);
      expect(page.body.items).toEqual([]);
    } else {
      expect(item.body).toEqual(written.body);
      expect(page.body.items).toEqual(written.body.email === user.body.email ? [written.body] : []);
    }
  });

  it('POST invalidates the list pages', async () => {
    await api.get('/api/users?limit=200');
    await untilHit('/api/users?limit=200');
    const user = await createUser();
    const page = await api.get('/api/users?limit=200');
    expect(page.headers.get('x-cache')).toBe('MISS');
    expect(page.body.items.map((u: { id: string }) => u.id)).toContain(user.body.id);
  });

  it('holds across gateway replicas sharing one Redis', async () => {
    const other = await startGateway({ upstreams: { users: upstream.url, products: users.url }, cache: cacheOptions });
    try {
      const user = await createUser();
      await api.get(user.location);
      await untilHit(user.location);
      const patched = await client(other.url).patch(user.location, { name: 'Written elsewhere' });
      expect(patched.status).toBe(200);
      expect((await api.get(user.location)).body.name).toBe('Written elsewhere');
    } finally {
      await other.close();
    }
  });

  it('closes the race: a read that fetched the old data before a write never stores it after the write', async () => {
    const user = await createUser();
    const held = upstream.hold((method, path) => method === 'GET' && path === user.location);
    const slowRead = api.get(user.location);
    await held.reached; // the service has answered with the old name; the gateway has not stored it yet
    const patched = await api.patch(user.location, { name: 'After the write' });
    expect(patched.status).toBe(200);
    held.release();
    expect((await slowRead).body.name).toBe(user.body.name); // it started before the write: old is fine
    for (let i = 0; i < 5; i++) {
      const read = await api.get(user.location);
      expect(read.body.name).toBe('After the write');
    }
  });

  it('while other clients read the same item at the same time, no read after the write sees the old data', async () => {
    const user = await createUser();
    await api.get(user.location);
    let written = false;
    let staleAfterWrite = 0;
    const readers = Array.from({ length: 4 }, async () => {
      for (let i = 0; i < 25; i++) {
        const startedAfterWrite = written;
        const read = await api.get(user.location);
        if (startedAfterWrite && read.body.name !== 'Concurrent write') staleAfterWrite++;
      }
    });
    const writer = (async () => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      const patched = await api.patch(user.location, { name: 'Concurrent write' });
      expect(patched.status).toBe(200);
      written = true;
    })();
    await Promise.all([...readers, writer]);
    expect(staleAfterWrite).toBe(0);
  });
});

describe('deployments sharing one Redis', () => {
  it('keep their entries apart by REDIS_KEY_PREFIX: a gateway never answers from another deployment\'s entry', async () => {
    const otherUsers = await startUsersService();
    const prefix = `${process.env.TEST_REDIS_KEY_PREFIX}other-deployment:`;
    const other = await startGateway({ upstreams: { users: otherUsers.url, products: otherUsers.url }, cache: { ...cacheOptions, keyPrefix: prefix } });
    try {
      const otherApi = client(other.url);
      await createUser();
      const theirs = await otherApi.post('/api/users', { email: `other-${Date.now()}@example.com`, name: 'Elsewhere' });
      expect(theirs.status).toBe(201);
      const myList = await untilHit('/api/users?limit=100');
      const theirList = await otherApi.get('/api/users?limit=100');
      expect(theirList.status).toBe(200);
      expect(theirList.headers.get('x-cache')).toBe('MISS');
      const ids = (page: unknown) => (page as { items: { id: string }[] }).items.map(({ id }) => id);
      expect(ids(theirList.body)).toEqual([(theirs.body as { id: string }).id]);
      expect(ids(myList.body)).not.toContain((theirs.body as { id: string }).id);
    } finally {
      await other.close();
      await otherUsers.close();
    }
  });
});

describe('request collapsing', () => {
  it('makes one upstream request for 10 concurrent misses of one key, and answers all from it', async () => {
    const user = await createUser();
    const held = upstream.hold((method, path) => method === 'GET' && path === user.location);
    const reads = Array.from({ length: 10 }, () => api.get(user.location));
    await held.reached;
    held.release();
    const responses = await Promise.all(reads);
    expect(responses.map((r) => r.status)).toEqual(Array(10).fill(200));
    for (const response of responses) expect(response.body).toEqual(user.body);
    expect(upstream.count('GET', user.location)).toBe(1);
    expect(readMetrics(await metricsOf(gateway)).value('gateway_cache_outcomes_total', { outcome: 'collapsed' })).toBeGreaterThan(0);
  });

  it('answers every request waiting for a fill whose first request was shed: none waits for a fetch that never starts', async () => {
    // One read in flight to a service at a time: a held fill of one user takes it.
    const narrow = await startGateway({ upstreams: { users: upstream.url, products: users.url }, cache: cacheOptions, concurrency: { limit: 2, writeShare: 0.5 } });
    const through = client(narrow.url);
    try {
      const [busy, user] = [await createUser(), await createUser()];
      await through.get(user.location);
      expect((await through.patch(user.location, { name: 'Renewed' })).status).toBe(200); // its entry is old now
      const held = upstream.hold((method, path) => method === 'GET' && path === busy.location);
      const busyRead = through.get(busy.location);
      await held.reached;
      const reads = await Promise.all(Array.from({ length: 10 }, () => through.get(user.location, deadline())));
      for (const read of reads) expectProblem(read, 503, 'service-unavailable');
      held.release();
      expect((await busyRead).status).toBe(200);
      const read = await through.get(user.location);
      expect({ status: read.status, name: read.body.name }).toEqual({ status: 200, name: 'Renewed' });
    } finally {
      await narrow.close();
    }
  });

  it('still fills and stores a miss whose client hung up while it waited on Redis, and logs no error for it', async () => {
    // Slow Redis replies keep the read waiting before its fill; no token and no rate limits, so that
    // nothing has asked for the client's address before its connection is gone.
    const redisProxy = await relayRedis();
    const { logger, lines } = capturingLogger('gateway');
    const replica = await startGateway({
      upstreams: { users: upstream.url, products: users.url },
      cache: { ...cacheOptions, redisUrl: redisProxy.target },
      guard: { auth: false, rateLimits: false },
      logger,
    });
    try {
      const user = await createUser();
      const id = user.location.split('/').pop()!;
      let lookupSent!: () => void;
      const looking = new Promise<void>((resolve) => (lookupSent = resolve));
      redisProxy.tamper = (sent) => {
        if (sent.includes(id)) lookupSent();
        return sent;
      };
      redisProxy.replyDelayMs = 200;
      const reached = upstream.hold((method, path) => method === 'GET' && path === user.location);
      const socket = net.connect(portOf(replica.url), '127.0.0.1');
      socket.on('error', () => undefined);
      socket.write(`GET ${user.location} HTTP/1.1\r\nHost: gateway\r\n\r\n`);
      await looking; // the gateway has the request and asks Redis about it: now the client hangs up
      socket.resetAndDestroy();
      const filled = await Promise.race([reached.reached.then(() => true), new Promise((resolve) => setTimeout(resolve, 3_000, false))]);
      reached.release();
      expect(filled).toBe(true);
      redisProxy.replyDelayMs = 0;
      let read = await client(replica.url, { token: null }).get(user.location);
      for (let i = 0; i < 50 && read.headers.get('x-cache') !== 'HIT'; i++) read = await client(replica.url, { token: null }).get(user.location);
      expect({ status: read.status, cache: read.headers.get('x-cache'), body: read.body }).toEqual({ status: 200, cache: 'HIT', body: user.body });
      expect(upstream.count('GET', user.location)).toBe(1);
      expect(lines.filter((line) => line.level === 'error' || line.level === 'warn')).toEqual([]);
    } finally {
      await replica.close();
      await redisProxy.cut();
    }
  });
});

describe('stale-if-error', () => {
  it('serves an entry that expired less than CACHE_STALE_SECONDS ago when the service fails, STALE with Age', async () => {
    const user = await createUser();
    await api.get(user.location);
    await untilHit(user.location);
    clock += 61_000; // expired: the TTL is 60 s
    upstream.failWith = 503;
    const stale = await api.get(user.location, deadline());
    expect(stale.status).toBe(200);
    expect(stale.headers.get('x-cache')).toBe('STALE');
    expect(Number(stale.headers.get('age'))).toBeGreaterThanOrEqual(61);
    expect(stale.body).toEqual(user.body);

    await upstream.stop(); // refused
    expect((await api.get(user.location, deadline())).headers.get('x-cache')).toBe('STALE');
    await upstream.start();

    clock += 300_000; // beyond the stale window: the failure shows
    expect((await api.get(user.location, deadline())).status).toBe(503);
    upstream.failWith = undefined;
    expect((await api.get(user.location)).headers.get('x-cache')).toBe('MISS');
  });

  it('does not serve an entry that a write made stale', async () => {
    const user = await createUser();
    await api.get(user.location);
    await untilHit(user.location);
    expect((await api.patch(user.location, { name: 'Newer' })).status).toBe(200);
    clock += 61_000;
    upstream.failWith = 503;
    expect((await api.get(user.location, deadline())).status).toBe(503);
  });
});

describe('Redis cut off and back', () => {
  it('bypasses the cache with no error while Redis is down, and never serves data older than a write made meanwhile', async () => {
    const redisProxy = await relayRedis();
    const replica = await startGateway({ upstreams: { users: upstream.url, products: users.url }, cache: { ...cacheOptions, redisUrl: redisProxy.target } });
    const through = client(replica.url);
    try {
      const user = await createUser();
      await through.get(user.location);
      for (let i = 0; i < 50 && (await through.get(user.location)).headers.get('x-cache') !== 'HIT'; i++);
      expect((await through.get(user.location)).headers.get('x-cache')).toBe('HIT');

      await redisProxy.cut();
      // Until the replica notices, its memory answers (nothing could have changed unseen: see memory-tier.test.ts).
      await untilTracking(replica.cache!.memory!, false);
      const during = await through.get(user.location, deadline());
      expect({ status: during.status, cache: during.headers.get('x-cache') }).toEqual({ status: 200, cache: 'BYPASS' });
      const patched = await through.patch(user.location, { name: 'Written during the outage' }, deadline());
      expect(patched.status).toBe(200);
      expect((await through.get(user.location, deadline())).body.name).toBe('Written during the outage');

      await redisProxy.restore();
      let afterwards = await through.get(user.location);
      for (let i = 0; i < 100 && afterwards.headers.get('x-cache') === 'BYPASS'; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        afterwards = await through.get(user.location);
      }
      expect(afterwards.headers.get('x-cache')).toBe('MISS');
      expect(afterwards.body.name).toBe('Written during the outage');
      expect((await api.get(user.location)).body.name).toBe('Written during the outage'); // the other replica too
    } finally {
      await replica.close();
      await redisProxy.cut();
    }
  });
});

describe('/metrics', () => {
  it('exposes requests by route, method and status, latency, and cache outcomes in Prometheus text', async () => {
    const response = await fetch(`${gateway.metricsUrl}/metrics`);
    const text = await response.text();
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
    const metrics = readMetrics(text);
    expect(metrics.value('gateway_http_requests_total', { route: '/api/users/{id}', method: 'GET', status: '200' })).toBeGreaterThan(0);
    // The parser merges the series of a histogram whose `le` label comes first, as prom-client writes it.
    expect(text).toMatch(/^gateway_http_request_duration_seconds_bucket\{le="0.005",route="\/api\/users",method="POST",status="201"\} \d+$/m);
    const outcomes = ['hit', 'miss', 'bypass', 'stale', 'collapsed'];
    expect(outcomes.filter((outcome) => !(metrics.value('gateway_cache_outcomes_total', { outcome }) > 0))).toEqual([]);
  });
});

it('answers a failed cached read with the service’s problem when nothing stale is held', async () => {
  const path = `/api/users?email=nobody${++counter}@example.com`;
  upstream.failWith = 503;
  expectProblem(await api.get(path, deadline()), 503);
});

/**
 * The gateway's per-upstream concurrency limit, as clients see it: requests beyond it get a 503
 * problem with Retry-After from the gateway without reaching the service; cache hits are never
 * shed; reads cannot take the slots kept for writes, and writes take free slots beyond them; a
 * proxied request waits a moment for a slot before it is shed. Real gateway and users service, with
 * a proxy in between that holds responses so the test decides what is in flight.
 */
import net from 'node:net';
import { testToken } from '../support/auth.js';
import { client, metricsOf, expectProblem, type Client } from '../support/http.js';
import { readMetrics } from '../../tools/metrics.js';
import { portOf, requestBytes } from '../support/raw-socket.js';
import { HoldingProxy } from '../support/holding-proxy.js';
import { TcpProxy } from '../../tools/tcp-proxy.js';
import { startGateway, startUsersService, type RunningGateway, type RunningService } from '../support/stack.js';

let users: RunningService;
let upstream: HoldingProxy;
let gateway: RunningGateway;
let api: Client;
let counter = 0;

beforeAll(async () => {
  users = await startUsersService();
  upstream = await new HoldingProxy(users.url).start();
  // 4 requests in flight to a service at most: one kept for writes, two for reads.
  gateway = await startGateway({ upstreams: { users: upstream.url, products: users.url }, cache: {}, concurrency: { limit: 4, writeShare: 0.25 } });
  api = client(gateway.url);
});
afterAll(async () => {
  await gateway.close();
  await upstream.stop();
  await users.close();
});

/** A new user, owned by `as` (the default caller unless given): a user is changed only by its owner. */
async function createUser(as: Client = api) {
  const n = ++counter;
  const created = await as.post('/api/users', { email: `shed${n}-${Date.now()}@example.com`, name: `Shed ${n}` });
  expect(created.status).toBe(201);
  return { location: created.headers.get('location')!, body: created.body };
}

/** One after the other: concurrent creates could themselves meet the limit. */
async function createUsers(n: number) {
  const created = [];
  for (let i = 0; i < n; i++) created.push(await createUser());
  return created;
}

async function untilHit(path: string) {
  for (let attempt = 0; attempt < 50; attempt++) {
    if ((await api.get(path)).headers.get('x-cache') === 'HIT') return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`${path} never became a cache hit`);
}

/** Returns once `count` requests of `kind` wait for a slot of the users service, as the gateway's /metrics say. */
async function untilWaiting(through: RunningGateway, kind: 'read' | 'write', count: number) {
  const waiting = async () => readMetrics(await metricsOf(through)).value('gateway_upstream_waiting', { upstream: 'users', kind });
  while ((await waiting()) !== count) await new Promise((resolve) => setImmediate(resolve));
}

/** Starts GETs of `paths` whose responses the proxy holds: each keeps one read slot until released. */
async function holdReads(paths: string[]) {
  const holds = paths.map((path) => upstream.hold((method, held) => method === 'GET' && held === path));
  const reads = paths.map((path) => api.get(path));
  await Promise.all(holds.map((hold) => hold.reached));
  return {
    release: async () => {
      for (const hold of holds) hold.release();
      return Promise.all(reads);
    },
  };
}

it('answers reads beyond the limit with a 503 problem and Retry-After, without reaching the service; hits and writes still get through', async () => {
  const [cached, written, ...others] = await createUsers(7);
  await api.get(cached!.location);
  await untilHit(cached!.location);
  const [shedMiss, shedBypass] = others.slice(3);
  const inFlight = await holdReads(others.slice(0, 3).map((user) => user!.location));

  const shed = await api.get(shedMiss!.location);
  expectProblem(shed, 503);
  expect(shed.body.type).toBe('https://problems.example/service-unavailable');
  expect({ retryAfter: shed.headers.get('retry-after'), cache: shed.headers.get('x-cache') }).toEqual({ retryAfter: '1', cache: 'MISS' });
  // Proxied, not filled: it waited its longest for a slot first.
  const bypass = await api.get(shedBypass!.location, { headers: { cookie: 'session=x' } });
  expectProblem(bypass, 503);
  expect({ retryAfter: bypass.headers.get('retry-after'), cache: bypass.headers.get('x-cache') }).toEqual({ retryAfter: '1', cache: 'BYPASS' });
  expect(upstream.count('GET', shedMiss!.location) + upstream.count('GET', shedBypass!.location)).toBe(0);

  expect(readMetrics(await metricsOf(gateway)).value('gateway_upstream_in_flight', { upstream: 'users', kind: 'read' })).toBe(3);

  const hit = await api.get(cached!.location);
  expect({ status: hit.status, cache: hit.headers.get('x-cache') }).toEqual({ status: 200, cache: 'HIT' });
  const patched = await api.patch(written!.location, { name: 'Written while reads saturate' });
  expect({ status: patched.status, name: patched.body.name }).toEqual({ status: 200, name: 'Written while reads saturate' });

  const released = await inFlight.release();
  expect(released.map((r) => r.status)).toEqual([200, 200, 200]);
  expect((await api.get(shedMiss!.location)).status).toBe(200);
  expect(readMetrics(await metricsOf(gateway)).value('gateway_shed_total', { upstream: 'users', kind: 'read' })).toBe(2);
});

it('a write finding no slot waits for one and takes a read slot once freed; reads cannot take the writes\' reserve', async () => {
  const [a, b, c, d, e, f] = await createUsers(6);
  // Reads hold all they may (3 of 4): the last slot is the writes'.
  const reads = await holdReads([d!, e!, f!].map((user) => user.location));
  expectProblem(await api.get(c!.location), 503);
  const heldWrite = upstream.hold((method, path) => method === 'PATCH' && path === a!.location);
  const write = api.patch(a!.location, { name: 'Holding the writes\' reserve' });
  await heldWrite.reached;
  const waiting = api.patch(b!.location, { name: 'Written in a read slot' });
  await untilWaiting(gateway, 'write', 1);
  expect(upstream.count('PATCH', b!.location)).toBe(0);
  await reads.release();
  expect((await waiting).status).toBe(200);
  heldWrite.release();
  expect((await write).status).toBe(200);
});

describe('slow senders and greedy callers', () => {
  /** Connections that each send a write's head and one byte of its 1,000-byte body, then nothing. */
  async function slowBodies(url: string, count: number): Promise<net.Socket[]> {
    const sockets = await Promise.all(
      Array.from({ length: count }, () => new Promise<net.Socket>((resolve) => {
        const socket = net.connect(portOf(url), '127.0.0.1', () => resolve(socket));
        socket.on('error', () => undefined);
      })),
    );
    for (const socket of sockets) socket.write(requestBytes('POST', '/api/users', { 'Content-Type': 'application/json', 'Content-Length': '1000' }, '{'));
    return sockets;
  }

  it('a write whose body is still arriving holds no slot: slow senders cannot shed everyone else’s writes', async () => {
    // 4 write slots at most; 6 connections trickling their bodies.
    const limited = await startGateway({ upstreams: { users: users.url, products: users.url }, concurrency: { limit: 8, writeShare: 0.25 } });
    const sockets = await slowBodies(limited.url, 6);
    try {
      const through = client(limited.url);
      const created = await through.post('/api/users', { email: `past-slow-${Date.now()}@example.com`, name: 'Past the slow senders' });
      expect(created.status).toBe(201);
      expect(readMetrics(await metricsOf(limited)).value('gateway_upstream_in_flight', { upstream: 'users', kind: 'write' })).toBe(0);
    } finally {
      for (const socket of sockets) socket.destroy();
      await limited.close();
    }
  });

  it('while another caller waits, one caller beyond its fair share of the slots is refused', async () => {
    // 8 write slots at most, a fair share of 2.
    const held = await new HoldingProxy(users.url).start();
    const limited = await startGateway({ upstreams: { users: held.url, products: users.url }, concurrency: { limit: 16, writeShare: 0.5 } });
    const greedy = client(limited.url);
    const other = client(limited.url, { token: await testToken({ subject: 'another-client' }) });
    try {
      const users8 = [];
      for (let i = 0; i < 8; i++) users8.push(await createUser());
      users8.push(await createUser(other));
      const holds = users8.slice(0, 8).map((user) => held.hold((method, path) => method === 'PATCH' && path === user.location));
      // Alone, a caller may use every slot.
      const writes = users8.slice(0, 8).map((user) => greedy.patch(user.location, { name: 'Greedy' }));
      await Promise.all(holds.map((hold) => hold.reached));
      const turn = other.patch(users8[8]!.location, { name: 'Its turn' });
      await untilWaiting(limited, 'write', 1);
      // It holds 8, beyond its share of 2, and the other waits: its next write is refused at once.
      expectProblem(await greedy.patch(users8[0]!.location, { name: 'Beyond its share' }), 503);
      holds[0]!.release();
      expect((await turn).status).toBe(200);
      for (const hold of holds.slice(1)) hold.release();
      expect((await Promise.all(writes)).map((write) => write.status)).toEqual(Array(8).fill(200));
    } finally {
      await limited.close();
      await held.stop();
    }
  });

  it('a write holds its slot until its service answers, not through the cache renewal after it', async () => {
    // The cache's Redis answers late, so each write's renewal waits for it.
    const redis = new URL(process.env.TEST_REDIS_URL!);
    const slowRedis = await new TcpProxy({ host: redis.hostname, port: Number(redis.port) }).start();
    const limited = await startGateway({
      upstreams: { users: users.url, products: users.url },
      cache: { redisUrl: slowRedis.rewrite(redis.toString()), memoryBytes: 0 },
      concurrency: { limit: 4, writeShare: 0.25 },
    });
    const through = client(limited.url);
    const writesInFlight = async () => readMetrics(await metricsOf(limited)).value('gateway_upstream_in_flight', { upstream: 'users', kind: 'write' });
    try {
      const [first, second] = await createUsers(2);
      slowRedis.replyDelayMs = 400;
      const write = through.patch(first!.location, { name: 'Renewed slowly' });
      let answered = false;
      void write.then(() => (answered = true));
      // The service has answered once the gateway holds no write slot; the client has not heard yet.
      while ((await writesInFlight()) !== 0 || !(await users.db.query<unknown[]>('SELECT name FROM users WHERE name = ?', ['Renewed slowly'])).length) {
        await new Promise((resolve) => setImmediate(resolve));
      }
      expect(answered).toBe(false);
      expect((await through.patch(second!.location, { name: 'Not shed behind a renewal' })).status).toBe(200);
      expect((await write).status).toBe(200);
    } finally {
      slowRedis.replyDelayMs = 0;
      await limited.close();
      await slowRedis.cut();
    }
  });
});

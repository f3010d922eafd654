/**
 * The gateway's per-upstream concurrency limit, as clients see it: requests beyond it get a 503
 * problem with Retry-After from the gateway without reaching the service; cache hits are never
 * shed; reads cannot take the slots kept for writes. Real gateway and users service, with a proxy
 * in between that holds responses so the test decides what is in flight.
 */
import { client, expectProblem, type Client } from '../support/http.js';
import { HoldingProxy } from '../support/holding-proxy.js';
import { startGateway, startUsersService, type RunningGateway, type RunningService } from '../support/stack.js';

let users: RunningService;
let upstream: HoldingProxy;
let gateway: RunningGateway;
let api: Client;
let counter = 0;

beforeAll(async () => {
  users = await startUsersService();
  upstream = await new HoldingProxy(users.url).start();
  // 4 requests in flight to a service at most, one of them kept for writes: reads hold at most 3.
  gateway = await startGateway({ upstreams: { users: upstream.url, products: users.url }, cache: {}, concurrency: { limit: 4, writeShare: 0.25 } });
  api = client(gateway.url);
});
afterAll(async () => {
  await gateway.close();
  await upstream.stop();
  await users.close();
});

async function createUser() {
  const n = ++counter;
  const created = await api.post('/api/users', { email: `shed${n}-${Date.now()}@example.com`, name: `Shed ${n}` });
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
  const bypass = await api.get(shedBypass!.location, { headers: { cookie: 'session=x' } });
  expectProblem(bypass, 503);
  expect({ retryAfter: bypass.headers.get('retry-after'), cache: bypass.headers.get('x-cache') }).toEqual({ retryAfter: '1', cache: 'BYPASS' });
  expect(upstream.count('GET', shedMiss!.location) + upstream.count('GET', shedBypass!.location)).toBe(0);

  expect((await api.get('/metrics')).text).toMatch(/gateway_upstream_in_flight\{upstream="users",kind="read"\} 3/);

  const hit = await api.get(cached!.location);
  expect({ status: hit.status, cache: hit.headers.get('x-cache') }).toEqual({ status: 200, cache: 'HIT' });
  const patched = await api.patch(written!.location, { name: 'Written while reads saturate' });
  expect({ status: patched.status, name: patched.body.name }).toEqual({ status: 200, name: 'Written while reads saturate' });

  const released = await inFlight.release();
  expect(released.map((r) => r.status)).toEqual([200, 200, 200]);
  expect((await api.get(shedMiss!.location)).status).toBe(200);
  const metrics = (await api.get('/metrics')).text;
  expect(metrics).toMatch(/gateway_shed_total\{upstream="users",kind="read"\} 2/);
});

it('sheds writes beyond their share while reads still get through, and reads cannot take the writes\' share', async () => {
  const [a, b, c, d, e, f] = await createUsers(6);
  const heldWrite = upstream.hold((method, path) => method === 'PATCH' && path === a!.location);
  const write = api.patch(a!.location, { name: 'Holding the writes\' share' });
  await heldWrite.reached;
  const shed = await api.patch(b!.location, { name: 'No write slot left' });
  expectProblem(shed, 503);
  expect(shed.headers.get('retry-after')).toBe('1');
  expect(upstream.count('PATCH', b!.location)).toBe(0);
  expect((await api.get(c!.location)).status).toBe(200); // a read does not need the writes' share
  heldWrite.release();
  expect((await write).status).toBe(200);

  const reads = await holdReads([d!, e!, f!].map((user) => user.location));
  expect((await api.patch(b!.location, { name: 'Written while reads saturate' })).status).toBe(200);
  await reads.release();
});

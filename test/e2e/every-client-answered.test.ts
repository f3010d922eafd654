/**
 * Whatever throws or rejects inside the gateway, its client is answered (a 500 problem at worst, or
 * its connection cut once the answer has begun) and the gateway goes on serving. A throw is planted
 * in each stage's work, in a cache fill, in the relay of a service's answer, in the cache's renewal
 * after a write and in the failure answer itself. And a client that goes lets go of its service, as
 * a released gateway lets go of everything.
 */
import { jest } from '@jest/globals';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { listen } from '@app/shared/platform/server';
import { TokenVerifier } from '../../gateway/src/auth/tokens.js';
import { ResponseCache } from '../../gateway/src/cache/response-cache.js';
import { configSchema as gatewayConfig } from '../../gateway/src/config.js';
import { createGateway } from '../../gateway/src/gateway.js';
import { RateLimits } from '../../gateway/src/rate-limits/budgets.js';
import { createCacheClient } from '../../gateway/src/redis/client.js';
import { ResponseWriter } from '../../gateway/src/respond.js';
import { ServiceHop } from '../../gateway/src/proxy/service-hop.js';
import { defaultToken } from '../support/auth.js';
import { client, expectProblem, type Client } from '../support/http.js';
import { testRedisTarget } from '../support/redis-cluster.js';
import { calmMemory, startGateway, startStack, testLogger } from '../support/stack.js';

let stack: Awaited<ReturnType<typeof startStack>>;
let api: Client;
let counter = 0;

beforeAll(async () => {
  stack = await startStack({ cache: {} });
  api = client(stack.gateway.url);
});
afterAll(() => stack.close());
afterEach(() => jest.restoreAllMocks());

const planted = () => {
  throw new Error('planted');
};

async function newUser() {
  const created = await api.post('/api/users', { email: `answered-${++counter}-${Date.now()}@example.com`, name: 'Answered' });
  expect(created.status).toBe(201);
  return created.headers.get('location')!;
}

/** After the planted fault, the same request is served as usual: the gateway keeps serving. */
async function servedAgain(path: string) {
  expect((await api.get(path)).status).toBe(200);
}

describe('a throw planted in', () => {
  it.each([
    ['the rate limit stage', () => jest.spyOn(RateLimits.prototype, 'consume').mockImplementationOnce(planted)],
    ['the identify stage', () => jest.spyOn(TokenVerifier.prototype, 'remembered').mockImplementationOnce(planted)],
    ['the cache read stage', () => jest.spyOn(ResponseCache.prototype, 'held').mockImplementationOnce(planted)],
    ['a cache fill', () => jest.spyOn(ServiceHop.prototype, 'fetch').mockImplementationOnce(planted)],
  ])('%s is answered 500 on a read', async (_where, plant) => {
    const user = await newUser();
    plant();
    expectProblem(await api.get(user), 500, 'internal');
    await servedAgain(user);
  });

  it.each([
    ['the proxy stage', () => jest.spyOn(ServiceHop.prototype, 'forward').mockImplementationOnce(planted)],
    ['the relay of the service’s answer', () => jest.spyOn(ResponseWriter.prototype, 'relay').mockImplementationOnce(planted)],
    ['the cache’s renewal after the write', () => jest.spyOn(ResponseCache.prototype, 'invalidate').mockImplementationOnce(() => Promise.reject(new Error('planted')))],
  ])('%s is answered 500 on a write', async (_where, plant) => {
    const user = await newUser();
    plant();
    expectProblem(await api.patch(user, { name: 'Planted' }), 500, 'internal');
    await servedAgain(user);
  });

  it('the answer to a failure cuts the connection, and the gateway goes on', async () => {
    const user = await newUser();
    jest.spyOn(RateLimits.prototype, 'consume').mockImplementationOnce(planted);
    jest.spyOn(ResponseWriter.prototype, 'ownHeaders').mockImplementationOnce(planted);
    await expect(api.get(user)).rejects.toThrow();
    await servedAgain(user);
  });
});

describe('a client that goes', () => {
  it('lets go of the service’s response at once: its socket is closed within 100 ms', async () => {
    let closedAt = 0;
    let reached: () => void = () => undefined;
    const served = new Promise<void>((resolve) => (reached = resolve));
    const slow = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('[');
      res.socket!.once('close', () => (closedAt = performance.now()));
      reached();
    });
    await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(slow.address() as AddressInfo).port}`;
    const gateway = await startGateway({ upstreams: { users: url, products: url } });
    try {
      const aborter = new AbortController();
      const response = await fetch(`${gateway.url}/api/users?limit=1`, { headers: { authorization: `Bearer ${defaultToken}` }, signal: aborter.signal });
      await served;
      expect(response.status).toBe(200);
      const abortedAt = performance.now();
      aborter.abort();
      for (const deadline = abortedAt + 1_000; closedAt === 0 && performance.now() < deadline; ) await new Promise((resolve) => setTimeout(resolve, 5));
      expect(closedAt).toBeGreaterThan(0);
      expect(closedAt - abortedAt).toBeLessThan(100);
    } finally {
      await gateway.close();
      slow.closeAllConnections();
      await new Promise((resolve) => slow.close(resolve));
    }
  });
});

describe('a gateway that is released', () => {
  it('closes its connections to the services and takes its listeners off a Redis client it was given', async () => {
    const connections = new Set<Socket>();
    const upstream = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('[]'));
    upstream.on('connection', (socket: Socket) => {
      connections.add(socket);
      socket.once('close', () => connections.delete(socket));
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    const redis = createCacheClient(testRedisTarget(), testLogger, { keyPrefix: process.env.TEST_REDIS_KEY_PREFIX });
    await new Promise((resolve) => redis.once('ready', resolve));
    const readyListeners = redis.listenerCount('ready');
    const config = gatewayConfig.parse({ GATEWAY_UPSTREAMS: `users=${url},products=${url}`, AUTH_ENABLED: 'false', RATE_LIMIT_ENABLED: 'false' });
    const gateway = createGateway(config, { logger: testLogger, redis, memory: null, limits: null, readMemory: calmMemory });
    const running = await listen(gateway.handler, 0, '127.0.0.1');
    try {
      await Promise.all(Array.from({ length: 4 }, (_, i) => fetch(`http://127.0.0.1:${running.port}/api/users?email=r${i}@example.com`).then((r) => r.text())));
      expect(connections.size).toBeGreaterThan(0);
      expect(redis.listenerCount('ready')).toBeGreaterThan(readyListeners);
      await running.close(1_000);
      await gateway.release();
      for (const deadline = Date.now() + 1_000; connections.size > 0 && Date.now() < deadline; ) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(connections.size).toBe(0);
      expect(redis.listenerCount('ready')).toBe(readyListeners);
    } finally {
      redis.disconnect();
      upstream.closeAllConnections();
      await new Promise((resolve) => upstream.close(resolve));
    }
  });
});

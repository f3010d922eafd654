/**
 * Whatever throws or rejects inside the gateway, its client is answered (a 500 problem at worst, or
 * its connection cut once the answer has begun) and the gateway goes on serving. A throw is planted
 * in each stage's work, in a cache fill, in the relay of a service's answer, in the cache's renewal
 * after a write and in the failure answer itself. And a client that goes lets go of its service.
 */
import { jest } from '@jest/globals';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { TokenVerifier } from '../../gateway/src/auth/tokens.js';
import { ResponseCache } from '../../gateway/src/cache/response-cache.js';
import { RateLimits } from '../../gateway/src/rate-limit.js';
import { ResponseWriter } from '../../gateway/src/respond.js';
import { ServiceHop } from '../../gateway/src/service-hop.js';
import { defaultToken } from '../support/auth.js';
import { client, expectProblem, type Client } from '../support/http.js';
import { startGateway, startStack } from '../support/stack.js';

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

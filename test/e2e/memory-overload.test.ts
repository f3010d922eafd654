/**
 * The gateway's overload manager as clients see it (gateway/src/load-shedding/overload.ts): memory, read by an
 * injected reader, past a share of its limit closes every connection after its response and keeps
 * no new cache entries; further, new requests get a 503 problem with Retry-After while the probes
 * are still answered. Real gateway, users service, MySQL and Redis.
 */
import { jest } from '@jest/globals';
import { ResponseCache } from '../../gateway/src/cache/response-cache.js';
import { client, expectProblem, metricsOf, type Client } from '../support/http.js';
import { readMetrics } from '../../tools/metrics.js';
import { startGateway, startUsersService, type RunningGateway, type RunningService } from '../support/stack.js';

let users: RunningService;
beforeAll(async () => (users = await startUsersService()));
afterAll(() => users.close());
afterEach(() => jest.restoreAllMocks());

/** A gateway whose V8 heap reads as `share` of its limit (its RSS as none). */
async function gatewayAt(share: number, run: (api: Client, gateway: RunningGateway) => Promise<void>) {
  const gateway = await startGateway({
    upstreams: { users: users.url, products: users.url },
    cache: {},
    readMemory: () => ({ rssBytes: 0, heapUsedBytes: share * 1_000_000, heapLimitBytes: 1_000_000 }),
  });
  try {
    await run(client(gateway.url), gateway);
  } finally {
    await gateway.close();
  }
}

test('at 91% of its limit a response closes its connection and the cache stores nothing', async () => {
  await gatewayAt(0.91, async (api) => {
    const created = await api.post('/api/users', { email: `overload-${Date.now()}@example.com`, name: 'Overload' });
    expect(created.status).toBe(201);
    expect(created.headers.get('connection')).toBe('close');
    const store = jest.spyOn(ResponseCache.prototype, 'store');
    const location = created.headers.get('location')!;
    // A fill calls `store` before its client is answered: each read finds nothing stored.
    for (let read = 0; read < 2; read++) {
      const got = await api.get(location);
      expect(got.status).toBe(200);
      expect(got.headers.get('x-cache')).toBe('MISS');
      expect(got.headers.get('connection')).toBe('close');
    }
    expect(store).not.toHaveBeenCalled();
  });
});

test('at 96% of its limit a new request gets 503 with Retry-After, counted, and the probes are still answered', async () => {
  await gatewayAt(0.96, async (api, gateway) => {
    const refused = await api.get('/api/users');
    expectProblem(refused, 503, 'service-unavailable');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await api.get('/healthz', { token: null })).status).toBe(200);
    expect((await api.get('/readyz', { token: null })).status).toBe(200);
    const metrics = readMetrics(await metricsOf(gateway));
    expect(metrics.value('gateway_overload_level')).toBe(3);
    expect(metrics.value('gateway_overload_shed_total')).toBe(1);
  });
});

test('under its first threshold nothing changes: kept-alive connections, entries stored', async () => {
  await gatewayAt(0.5, async (api) => {
    const created = await api.post('/api/users', { email: `calm-${Date.now()}@example.com`, name: 'Calm' });
    expect(created.headers.get('connection')).not.toBe('close');
    const store = jest.spyOn(ResponseCache.prototype, 'store');
    expect((await api.get(created.headers.get('location')!)).headers.get('x-cache')).toBe('MISS');
    expect(store).toHaveBeenCalledTimes(1);
  });
});

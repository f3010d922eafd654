/**
 * What operators and tooling see: OPTIONS answers, the health endpoints' method rules, and the
 * request log (one line per request, never a body, its duration counted from the request's arrival).
 */
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { RemoteKeySet, remoteKeySettingsOf } from '../../gateway/src/auth/key-source.js';
import { TokenVerifier } from '../../gateway/src/auth/tokens.js';
import { configSchema as gatewayConfig } from '../../gateway/src/config.js';
import { defaultToken, TEST_RULES, testPublicJwk } from '../support/auth.js';
import { client, expectProblem, type Client, type TestResponse } from '../support/http.js';
import { readMetrics } from '../../tools/metrics.js';
import { capturingLogger, startGateway, startStack } from '../support/stack.js';

const usersLog = capturingLogger('users-service');
let stack: Awaited<ReturnType<typeof startStack>>;
let gateway: Client;
let users: Client;
let counter = 0;

beforeAll(async () => {
  stack = await startStack({ usersLogger: usersLog.logger });
  gateway = client(stack.gateway.url);
  users = client(stack.users.url);
});
afterAll(() => stack.close());

const allowOf = (response: TestResponse) => (response.headers.get('allow') ?? '').split(',').map((method) => method.trim());

/** The users service's log lines for one request id, once its request line is written. */
async function logLinesOf(requestId: string): Promise<Record<string, unknown>[]> {
  const lines = () => usersLog.lines.filter((line) => line.requestId === requestId);
  // The line is written when the response closes, which may be just after the client has it.
  for (let attempt = 0; attempt < 100 && !lines().some((line) => 'status' in line); attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return lines();
}

describe('OPTIONS', () => {
  const cases = [
    { resource: 'users' as const, body: () => ({ email: `options${++counter}@example.com`, name: 'Options' }) },
    { resource: 'products' as const, body: () => ({ sku: `OPTIONS-${++counter}`, name: 'Options', price: { amount: '1', currency: 'EUR' } }) },
  ];

  describe.each(cases)('on /api/$resource', ({ resource, body }) => {
    it('answers 204 with Allow for the collection, OPTIONS included, directly and through the gateway', async () => {
      for (const api of [client(stack[resource].url), gateway]) {
        const response = await api.send('OPTIONS', `/api/${resource}`);
        expect(response.status).toBe(204);
        expect(response.text).toBe('');
        expect(allowOf(response).sort()).toEqual(['GET', 'HEAD', 'OPTIONS', 'POST']);
      }
    });

    it('answers 204 with Allow for an item, OPTIONS included, directly and through the gateway', async () => {
      const created = await gateway.post(`/api/${resource}`, body());
      expect(created.status).toBe(201);
      const location = created.headers.get('location')!;
      for (const api of [client(stack[resource].url), gateway]) {
        const response = await api.send('OPTIONS', location);
        expect(response.status).toBe(204);
        expect(response.text).toBe('');
        expect(allowOf(response).sort()).toEqual(['DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'PUT']);
      }
    });
  });
});

describe('/healthz and /readyz', () => {
  it.each(['/healthz', '/readyz'])('answer 405 with Allow: GET, HEAD to POST on %s, in every process', async (path) => {
    for (const base of [stack.gateway.url, stack.users.url, stack.products.url]) {
      const response = await client(base).send('POST', path);
      expectProblem(response, 405, 'method-not-allowed');
      const allow = allowOf(response);
      expect(allow).toEqual(expect.arrayContaining(['GET', 'HEAD']));
      expect(allow).not.toContain('POST');
    }
  });

  it.each(['/healthz', '/readyz'])('answer HEAD on %s without a body', async (path) => {
    for (const base of [stack.gateway.url, stack.users.url, stack.products.url]) {
      const response = await client(base).head(path);
      expect({ status: response.status, text: response.text }).toEqual({ status: 200, text: '' });
    }
  });
});

describe('the request log', () => {
  it('has one line per request with requestId, method, path, status and durationMs', async () => {
    const unknown = '/api/users/0193a5c2-7b1e-7c4d-9a61-2f0c1b9e8d40';
    const requests: { method: string; path: string; status: number; send: () => Promise<TestResponse> }[] = [
      { method: 'POST', path: '/api/users', status: 201, send: () => users.post('/api/users', { email: `logged${++counter}@example.com`, name: 'Logged' }) },
      { method: 'GET', path: '/api/users', status: 200, send: () => users.get('/api/users?limit=1') },
      { method: 'GET', path: unknown, status: 404, send: () => users.get(unknown) },
      { method: 'POST', path: '/api/users', status: 400, send: () => users.post('/api/users', { email: 'nope' }) },
      { method: 'DELETE', path: '/api/users', status: 405, send: () => users.delete('/api/users') },
      { method: 'GET', path: '/healthz', status: 200, send: () => users.get('/healthz') },
    ];
    for (const { method, path, status, send } of requests) {
      const response = await send();
      expect(response.status).toBe(status);
      const requestId = response.headers.get('x-request-id')!;
      const lines = await logLinesOf(requestId);
      expect(lines).toEqual([
        expect.objectContaining({ level: 'info', service: 'users-service', requestId, method, path, status, durationMs: expect.any(Number) }),
      ]);
      expect(lines[0]!.durationMs).toBeGreaterThanOrEqual(0);
    }
  });

  it('logs the path without the query string', async () => {
    const response = await users.get('/api/users?limit=2&email=someone%40example.com', { headers: { 'x-request-id': `query-${++counter}` } });
    const [line] = await logLinesOf(response.headers.get('x-request-id')!);
    expect(line).toMatchObject({ method: 'GET', path: '/api/users', status: 200 });
  });

  it('never logs a request body, a query value or a request header', async () => {
    const email = `secret.${++counter}@example.com`;
    const name = `Private Person ${counter}`;
    const token = `token-${counter}-do-not-log`;
    const headers = { authorization: `Bearer ${token}`, cookie: `session=${token}` };
    const created = await users.post('/api/users', { email, name }, { headers });
    expect(created.status).toBe(201);
    const invalid = await users.post('/api/users', { email: `${email}.invalid@`, name }, { headers });
    expect(invalid.status).toBe(400);
    const filtered = await users.get(`/api/users?email=${encodeURIComponent(email)}`, { headers });
    expect(filtered.body.items).toHaveLength(1);
    for (const response of [created, invalid, filtered]) expect(await logLinesOf(response.headers.get('x-request-id')!)).toHaveLength(1);

    const everything = JSON.stringify(usersLog.lines);
    for (const secret of [email, name, token, encodeURIComponent(email)]) expect(everything).not.toContain(secret);
  });
});

describe("the gateway's request log", () => {
  it("counts a request's duration from its arrival: a wait before the response is begun (here for the token keys) is in it", async () => {
    const gatewayLog = capturingLogger('gateway');
    let keysAsked!: () => void;
    let releaseKeys!: () => void;
    const asked = new Promise<void>((resolve) => (keysAsked = resolve));
    const released = new Promise<void>((resolve) => (releaseKeys = resolve));
    // A key set (JWKS) that answers when the test says: the gateway asks for it on the request's first token.
    const keys = http.createServer((_req, res) => {
      keysAsked();
      void released.then(() => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [testPublicJwk] })));
    });
    await new Promise<void>((resolve) => keys.listen(0, '127.0.0.1', resolve));
    const jwksUrl = `http://127.0.0.1:${(keys.address() as AddressInfo).port}/jwks`;
    const gateway = await startGateway({
      upstreams: stack.urls,
      logger: gatewayLog.logger,
      guard: { tokens: new TokenVerifier({ remote: new RemoteKeySet(remoteKeySettingsOf(gatewayConfig.parse({ AUTH_JWKS_URL: jwksUrl }))) }, TEST_RULES) },
    });
    try {
      const requestId = `waited-${Date.now()}`;
      const read = client(gateway.url).get('/api/users?limit=1', { headers: { 'x-request-id': requestId } });
      await asked; // the request has arrived, and waits for the keys
      // Held on purpose: however fast the machine, the request waits at least this long after it arrived.
      await new Promise((resolve) => setTimeout(resolve, 300));
      releaseKeys();
      expect((await read).status).toBe(200);
      let line: Record<string, unknown> | undefined;
      for (let attempt = 0; attempt < 100 && !line; attempt++) {
        line = gatewayLog.lines.find((entry) => entry.requestId === requestId && 'status' in entry);
        if (!line) await new Promise((resolve) => setTimeout(resolve, 10));
      }
      expect(line).toMatchObject({ method: 'GET', path: '/api/users', status: 200 });
      expect(line!.durationMs).toBeGreaterThanOrEqual(300);
    } finally {
      await gateway.close();
      keys.closeAllConnections();
      await new Promise((resolve) => keys.close(resolve));
    }
  });
});

describe('a request the client gave up on', () => {
  it('is logged and counted in the metrics as status 499, not as the 200 it never got', async () => {
    const gatewayLog = capturingLogger('gateway');
    let forwarded!: () => void;
    const reached = new Promise<void>((resolve) => (forwarded = resolve));
    // A products service that takes the request and never answers.
    const hung = net.createServer((socket) => {
      socket.on('error', () => undefined);
      socket.once('data', () => forwarded());
    });
    await new Promise<void>((resolve) => hung.listen(0, '127.0.0.1', resolve));
    const gateway = await startGateway({ upstreams: { ...stack.urls, products: `http://127.0.0.1:${(hung.address() as AddressInfo).port}` }, logger: gatewayLog.logger });
    try {
      const requestId = `given-up-${Date.now()}`;
      const aborter = new AbortController();
      const read = fetch(`${gateway.url}/api/products/${'0193a5c2-7b1e-7c4d-9a61-2f0c1b9e8d40'}`, { headers: { authorization: `Bearer ${defaultToken}`, 'x-request-id': requestId }, signal: aborter.signal });
      await reached;
      aborter.abort();
      await expect(read).rejects.toThrow();
      let line: Record<string, unknown> | undefined;
      for (let attempt = 0; attempt < 200 && !line; attempt++) {
        line = gatewayLog.lines.find((entry) => entry.requestId === requestId && 'status' in entry);
        if (!line) await new Promise((resolve) => setTimeout(resolve, 10));
      }
      expect(line).toMatchObject({ status: 499, aborted: true });
      const metrics = readMetrics(await (await fetch(`${gateway.metricsUrl}/metrics`)).text());
      const reads = (status: string) => metrics.value('gateway_http_requests_total', { route: '/api/products/{id}', method: 'GET', status });
      expect({ 499: reads('499'), 200: reads('200') }).toEqual({ 499: 1, 200: 0 });
    } finally {
      await gateway.close();
      hung.close();
    }
  });
});

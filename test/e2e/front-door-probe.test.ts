/**
 * What an outside probe of the gateway found, each case as the prober saw it: over real sockets,
 * to the real gateway (cache and rate limits on) in front of the real services. File descriptors
 * held by pipelined requests nobody reads, an API description built per request, refused requests
 * whose bodies kept their connections, prototype names as /docs files, missing `nosniff`, two Host
 * headers, and /metrics on the port clients use.
 */
import { readdirSync } from 'node:fs';
import net from 'node:net';
import { MAX_WAITING_REQUESTS } from '@app/shared/platform/http/requests-in-turn';
import { testToken } from '../support/auth.js';
import { client, expectProblem, metricsOf, type Client } from '../support/http.js';
import { readMetrics } from '../../tools/metrics.js';
import { portOf, rawExchange, rawExchangeAll, requestBytes } from '../support/raw-socket.js';
import { startGateway, startStack } from '../support/stack.js';

let stack: Awaited<ReturnType<typeof startStack>>;
let api: Client;
let port: number;

beforeAll(async () => {
  stack = await startStack({ cache: {} });
  api = client(stack.gateway.url);
  port = portOf(stack.gateway.url);
});
afterAll(() => stack.close());

const openFiles = () => readdirSync('/proc/self/fd').length;

/** Polls `measure` until it is at most `bound`, for at most `withinMs`; the last value it read. */
async function settlesTo(measure: () => number, bound: number, withinMs: number): Promise<number> {
  const deadline = Date.now() + withinMs;
  let value = measure();
  while (value > bound && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    value = measure();
  }
  return value;
}

/** A client that pipelines `count` requests on one connection, reads `readBytes` of the answers and leaves. */
function pipelineAndLeave(request: Buffer, count: number, readBytes: number): Promise<void> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(Buffer.concat(Array.from({ length: count }, () => request))));
    let read = 0;
    socket.on('data', (chunk: Buffer) => {
      read += chunk.length;
      if (read >= readBytes) socket.destroy();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => resolve());
  });
}

describe('pipelined requests', () => {
  it('open nothing while they wait: 20 clients × 100 pipelined /docs files, each reading 32 bytes, leave no file open', async () => {
    await api.get('/docs/swagger-ui-bundle.js'); // the file's first reading is not what is measured
    const before = openFiles();
    const bundle = requestBytes('GET', '/docs/swagger-ui-bundle.js');
    await Promise.all(Array.from({ length: 20 }, () => pipelineAndLeave(bundle, 100, 32)));
    expect(await settlesTo(openFiles, before + 10, 5_000)).toBeLessThanOrEqual(before + 10);
    expect((await api.get('/healthz')).status).toBe(200);
  });

  it(`are answered in order up to ${MAX_WAITING_REQUESTS} waiting; one more closes the connection`, async () => {
    const probe = requestBytes('GET', '/healthz');
    // One request in hand, MAX_WAITING_REQUESTS behind it (the last of them closing the connection).
    const atBound = await rawExchangeAll(port, Buffer.concat([...Array.from({ length: MAX_WAITING_REQUESTS }, () => probe), requestBytes('GET', '/healthz', { Connection: 'close' })]));
    expect(atBound.map(({ status }) => status)).toEqual(Array(MAX_WAITING_REQUESTS + 1).fill(200));
    const past = await rawExchangeAll(port, Buffer.concat(Array.from({ length: MAX_WAITING_REQUESTS + 2 }, () => probe)));
    expect(past.length).toBeLessThan(MAX_WAITING_REQUESTS + 2);
  });
});

describe('GET /openapi.json', () => {
  it('is built once and sent with an ETag: a 304 for the copy a client has, the same bytes for everyone', async () => {
    const first = await api.get('/openapi.json', { headers: { 'accept-encoding': 'identity' } });
    const etag = first.headers.get('etag');
    expect(etag).toMatch(/^"[\w-]{27}"$/);
    expect((await api.get('/openapi.json', { headers: { 'if-none-match': etag! } })).status).toBe(304);
    const again = await api.get('/openapi.json', { headers: { 'accept-encoding': 'identity' } });
    expect([again.headers.get('etag'), again.text]).toEqual([etag, first.text]);
    const compressed = await fetch(`${stack.gateway.url}/openapi.json`, { headers: { 'accept-encoding': 'br' } });
    expect([compressed.headers.get('content-encoding'), compressed.headers.get('etag')]).toEqual(['br', `W/${etag}`]);
    expect(await compressed.text()).toBe(first.text);
  });

  it('keeps a normal client served while 200 connections ask for it and never read', async () => {
    const request = requestBytes('GET', '/openapi.json');
    const sockets = await Promise.all(
      Array.from({ length: 200 }, () => new Promise<net.Socket>((resolve) => {
        const socket = net.connect(port, '127.0.0.1', () => socket.write(request, () => resolve(socket)));
        socket.on('error', () => undefined);
        socket.pause();
      })),
    );
    try {
      const latencies: number[] = [];
      for (let i = 0; i < 20; i++) {
        const startedAt = performance.now();
        const created = await api.post('/api/products', { sku: `PROBE-${Date.now()}-${i}`, name: 'Probe', price: { amount: '1.00', currency: 'EUR' } });
        expect(created.status).toBe(201);
        expect((await api.get(created.headers.get('location')!)).status).toBe(200);
        latencies.push(performance.now() - startedAt);
      }
      expect(Math.max(...latencies)).toBeLessThan(1_000);
    } finally {
      for (const socket of sockets) socket.destroy();
    }
  });
});

describe('the gateway’s own endpoints', () => {
  it('count against the caller’s budget like the API, the probes excepted', async () => {
    const limited = await startGateway({ upstreams: stack.urls, guard: { rateLimits: { readsPerMinute: 3, leasePoints: 1 } } });
    try {
      const own = client(limited.url);
      const statuses = [];
      for (const path of ['/openapi.json', '/docs', '/docs/swagger-ui.css', '/openapi.json']) statuses.push((await own.get(path)).status);
      expect(statuses).toEqual([200, 200, 200, 429]);
      expect((await own.get('/healthz')).status).toBe(200);
      expect((await own.get('/readyz')).status).toBe(200);
    } finally {
      await limited.close();
    }
  });
});

describe('a request refused before its body is read', () => {
  it.each([
    ['401, no token', undefined],
    ['403, a token without the scope', 'read-only'],
  ])('closes its connection at once (%s), however slowly the body trickles', async (_case, token) => {
    const headers: Record<string, string> = { 'Content-Type': 'application/json', 'Content-Length': '65536' };
    const authorization = token === undefined ? '' : `Bearer ${await testToken({ scopes: ['products:read'] })}`;
    const head = requestBytes('POST', '/api/products', headers).toString('latin1').replace(/Authorization: [^\r]*\r\n/, authorization ? `Authorization: ${authorization}\r\n` : '');
    const startedAt = performance.now();
    const response = await rawExchange(port, [head, '{', 2_000, '"'], { timeoutMs: 1_500 });
    expect([response.status, response.headers.connection, response.closed]).toEqual([token === undefined ? 401 : 403, 'close', true]);
    expect(performance.now() - startedAt).toBeLessThan(1_500);
  });
});

describe('the small things', () => {
  it('answers /docs files named like an object’s properties with 404, not 500', async () => {
    for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
      expectProblem(await api.get(`/docs/${name}`), 404, 'not-found');
    }
  });

  it('says nosniff, once, on every response: gateway and services, hits and relays, problems and raw refusals', async () => {
    const created = await api.post('/api/products', { sku: `NOSNIFF-${Date.now()}`, name: 'Nosniff', price: { amount: '1.00', currency: 'EUR' } });
    const item = created.headers.get('location')!;
    const etag = created.headers.get('etag')!;
    const responses = [
      created,
      await api.get(item), // a miss, then a hit
      await api.get(item),
      await api.get(item, { headers: { 'if-none-match': etag } }),
      await api.get('/api/users?limit=2'),
      await api.get('/api/nothing'),
      await api.get('/api/products', { token: null }),
      await api.get('/openapi.json'),
      await api.get('/docs'),
      await api.get('/docs/swagger-ui.css'),
      await api.get('/healthz'),
      await client(stack.products.url).get(item),
      await client(stack.products.url).get('/api/products?limit=1'),
      await client(stack.products.url).get('/nowhere'),
      await client(stack.products.url).get('/healthz'),
      await fetch(`${stack.gateway.metricsUrl}/metrics`),
    ];
    expect(responses.map((response) => response.headers.get('x-content-type-options'))).toEqual(Array(responses.length).fill('nosniff'));
    for (const target of [port, portOf(stack.products.url)]) {
      const malformed = await rawExchange(target, ['GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n']);
      expect([malformed.status, malformed.headers['x-content-type-options']]).toEqual([400, 'nosniff']);
    }
  });

  it('refuses a request with two Host header fields with 400, at the gateway and at a service', async () => {
    for (const target of [port, portOf(stack.products.url)]) {
      const response = await rawExchange(target, [requestBytes('GET', '/healthz', { Host: 'elsewhere.example' })]);
      expect(response.status).toBe(400);
      expect(JSON.parse(response.body)).toMatchObject({ detail: 'A request must not have more than one Host header field' });
    }
  });

  it('serves /metrics on the metrics port only', async () => {
    expectProblem(await api.get('/metrics'), 404, 'not-found');
    expect(readMetrics(await metricsOf(stack.gateway)).has('gateway_http_requests_total')).toBe(true);
  });
});

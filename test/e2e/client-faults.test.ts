/**
 * Input that is the client's fault, through the real gateway (cache on) to the real services: always
 * a 4xx problem+json, never a 500, a hang, or data silently altered. Each case here is one an
 * outside attacker found; test/e2e/hostile-input.test.ts generates many more.
 */
import http from 'node:http';
import { gzipSync } from 'node:zlib';
import { client, expectProblem, type Client } from '../support/http.js';
import { portOf, rawExchange, requestBytes, type SocketResponse } from '../support/raw-socket.js';
import { startGateway, startStack } from '../support/stack.js';
import { defaultToken } from '../support/auth.js';

let stack: Awaited<ReturnType<typeof startStack>>;
let api: Client;
let counter = 0;

beforeAll(async () => {
  stack = await startStack({ cache: {} });
  api = client(stack.gateway.url);
});
afterAll(() => stack.close());

async function newProduct() {
  const n = ++counter;
  const created = await api.post('/api/products', { sku: `FAULT-${n}`, name: `Product ${n}`, price: { amount: '1.00', currency: 'EUR' } });
  expect(created.status).toBe(201);
  return { location: created.headers.get('location')!, etag: created.headers.get('etag')!, body: created.body };
}

/** The stored state, straight from the service (no cache in between). */
const stored = async (location: string) => client(stack.products.url).get(location);

describe('request bodies', () => {
  it('refuses nesting past the limit before any recursive work: 400, not a stack overflow', async () => {
    const { location, etag } = await newProduct();
    for (const deep of ['{"a":'.repeat(8_000) + '1' + '}'.repeat(8_000), `{"name":${'['.repeat(20_000)}${']'.repeat(20_000)}}`]) {
      expect(Buffer.byteLength(deep)).toBeLessThan(100 * 1024);
      const patched = await api.send('PATCH', location, { raw: deep, headers: { 'content-type': 'application/merge-patch+json' } });
      expect(expectProblem(patched, 400, 'malformed-json').detail).toMatch(/deeper than 32 levels/);
      expectProblem(await api.send('POST', '/api/users', { raw: deep, headers: { 'content-type': 'application/json' } }), 400, 'malformed-json');
    }
    expect((await stored(location)).headers.get('etag')).toBe(etag);
  });

  it('accepts nesting up to the limit (then the schema decides)', async () => {
    const { location } = await newProduct();
    const nested = '{"price":'.repeat(1) + '{"amount":' + '{"x":'.repeat(29) + '1' + '}'.repeat(29) + '}}';
    const response = await api.send('PATCH', location, { raw: nested, headers: { 'content-type': 'application/merge-patch+json' } });
    expectProblem(response, 400, 'validation');
  });

  it.each(['gzip', 'deflate', 'br', 'x-unknown', 'gzip, identity'])('answers Content-Encoding: %s with 415 and Accept-Encoding: identity', async (encoding) => {
    const body = JSON.stringify({ email: `enc${++counter}@example.com`, name: 'Encoded' });
    for (const raw of [body, gzipSync(body)]) {
      const response = await api.send('POST', '/api/users', { raw, headers: { 'content-type': 'application/json', 'content-encoding': encoding } });
      expectProblem(response, 415, 'unsupported-content-encoding');
      expect(response.headers.get('accept-encoding')).toBe('identity');
    }
  });

  it('takes Content-Encoding: identity as no encoding', async () => {
    const response = await api.send('POST', '/api/users', {
      raw: JSON.stringify({ email: `identity${++counter}@example.com`, name: 'Plain' }),
      headers: { 'content-type': 'application/json', 'content-encoding': 'identity' },
    });
    expect(response.status).toBe(201);
  });

  it.each(['__proto__', 'constructor', 'prototype'])('refuses a %s member anywhere as an unknown field, and changes nothing', async (member) => {
    const { location, etag } = await newProduct();
    const cases = [
      { raw: `{"${member}":{"name":"x"}}`, path: member },
      { raw: `{"price":{"${member}":{"amount":"9.00"}}}`, path: `price.${member}` },
      { raw: `{"name":"ok","${member}":null}`, path: member },
    ];
    for (const { raw, path } of cases) {
      const patched = await api.send('PATCH', location, { raw, headers: { 'content-type': 'application/merge-patch+json' } });
      expect(expectProblem(patched, 400, 'validation').errors).toEqual([{ path, message: 'is not a known field' }]);
    }
    const created = await api.send('POST', '/api/users', { raw: `{"email":"p${++counter}@example.com","name":"P","${member}":{}}`, headers: { 'content-type': 'application/json' } });
    expect(expectProblem(created, 400, 'validation').errors).toEqual([{ path: member, message: 'is not a known field' }]);
    expect((await stored(location)).headers.get('etag')).toBe(etag);
  });

  it('refuses invalid UTF-8 anywhere in the body (never stored as U+FFFD)', async () => {
    const { location, etag } = await newProduct();
    const bodies = [
      Buffer.concat([Buffer.from('{"name":"bad '), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]),
      Buffer.concat([Buffer.from('{"name":"cut '), Buffer.from([0xe2, 0x82]), Buffer.from('"}')]),
      Buffer.concat([Buffer.from('{"name":"overlong '), Buffer.from([0xc0, 0xaf]), Buffer.from('"}')]),
      Buffer.concat([Buffer.from('{"name":"surrogate '), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"}')]),
    ];
    for (const raw of bodies) {
      const patched = await api.send('PATCH', location, { raw, headers: { 'content-type': 'application/merge-patch+json' } });
      expect(expectProblem(patched, 400, 'malformed-json').detail).toBe('The request body is not valid UTF-8');
    }
    expect((await stored(location)).headers.get('etag')).toBe(etag);
  });
});

describe('conditional requests (RFC 9110 §13)', () => {
  it('If-None-Match: * or a matching ETag on PUT, PATCH and DELETE of an existing item is a 412, and nothing changes', async () => {
    const { location, etag, body } = await newProduct();
    const fields = { sku: body.sku, name: body.name, price: body.price };
    for (const ifNoneMatch of ['*', etag, `"0", W/${etag}`]) {
      const headers = { 'if-none-match': ifNoneMatch };
      expectProblem(await api.put(location, { ...fields, name: 'Replaced' }, { headers }), 412, 'precondition-failed');
      expectProblem(await api.patch(location, { name: 'Patched' }, { headers }), 412, 'precondition-failed');
      expectProblem(await api.delete(location, { headers }), 412, 'precondition-failed');
    }
    expect((await stored(location)).headers.get('etag')).toBe(etag);
    const patched = await api.patch(location, { name: 'Patched' }, { headers: { 'if-none-match': '"999"' } });
    expect(patched.status).toBe(200);
    expect((await api.delete(location, { headers: { 'if-none-match': etag } })).status).toBe(204);
  });

  it('If-Match on every method: strong comparison, * for anything that exists, a collection has no ETag', async () => {
    const { location, etag } = await newProduct();
    expectProblem(await api.get(location, { headers: { 'if-match': '"999"' } }), 412, 'precondition-failed');
    expectProblem(await api.get(location, { headers: { 'if-match': `W/${etag}` } }), 412, 'precondition-failed');
    expect((await api.get(location, { headers: { 'if-match': etag } })).status).toBe(200);
    expect((await api.get(location, { headers: { 'if-match': '*' } })).status).toBe(200);
    expectProblem(await api.get('/api/products', { headers: { 'if-match': etag } }), 412, 'precondition-failed');
    expect((await api.get('/api/products?limit=1', { headers: { 'if-match': '*' } })).status).toBe(200);
    const user = { email: `cond${++counter}@example.com`, name: 'Cond' };
    expectProblem(await api.post('/api/users', user, { headers: { 'if-match': '"1"' } }), 412, 'precondition-failed');
    expectProblem(await api.post('/api/users', user, { headers: { 'if-none-match': '*' } }), 412, 'precondition-failed');
    expect((await api.post('/api/users', user, { headers: { 'if-match': '*', 'if-none-match': '"1"' } })).status).toBe(201);
    expect((await api.delete(location, { headers: { 'if-match': `"0", ${etag}` } })).status).toBe(204);
  });

  it('a malformed If-Match or If-None-Match on a write is a 400; a malformed If-None-Match on a read is ignored', async () => {
    const { location, etag } = await newProduct();
    for (const [name, value] of [['if-match', '1'], ['if-match', '"1" "2"'], ['if-none-match', 'W/1'], ['if-none-match', '*, "1"']] as const) {
      const problem = expectProblem(await api.patch(location, { name: 'X' }, { headers: { [name]: value } }), 400, 'validation');
      expect(problem.errors[0].path).toBe(name === 'if-match' ? 'If-Match' : 'If-None-Match');
      expectProblem(await api.delete(location, { headers: { [name]: value } }), 400, 'validation');
    }
    expectProblem(await api.get(location, { headers: { 'if-match': 'nonsense' } }), 400, 'validation');
    expect((await api.get(location, { headers: { 'if-none-match': 'nonsense' } })).status).toBe(200);
    expect((await stored(location)).headers.get('etag')).toBe(etag);
  });
});

/** Checks what every refused raw request gets: a problem+json of `status` that closes the connection. */
function expectRawProblem(response: SocketResponse, status: number, type: string) {
  expect({ status: response.status, type: response.headers['content-type'], connection: response.headers.connection }).toEqual({
    status,
    type: 'application/problem+json; charset=utf-8',
    connection: 'close',
  });
  expect(response.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  expect(JSON.parse(response.body)).toMatchObject({ type: `https://problems.example/${type}`, status, instance: expect.any(String) });
  expect(response.closed).toBe(true);
}

describe("Node's own HTTP errors", () => {
  const servers = () => [
    ['gateway', stack.gateway.url],
    ['users-service', stack.users.url],
    ['products-service', stack.products.url],
  ];

  it('are problem+json with Connection: close and X-Request-Id on the gateway and both services', async () => {
    for (const [, url] of servers()) {
      const port = portOf(url!);
      expectRawProblem(await rawExchange(port, ['GE(T /api/users HTTP/1.1\r\nHost: x\r\n\r\n']), 400, 'bad-request');
      expectRawProblem(
        await rawExchange(port, [requestBytes('POST', '/api/users', { 'Content-Length': '5', 'Transfer-Encoding': 'chunked' }, '0\r\n\r\n')]),
        400,
        'bad-request',
      );
      expectRawProblem(await rawExchange(port, ['GET /api/users HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n']), 400, 'bad-request');
      expectRawProblem(await rawExchange(port, [requestBytes('GET', '/api/users', { 'X-Big': 'a'.repeat(20_000) })]), 431, 'header-fields-too-large');
      expectRawProblem(await rawExchange(port, [requestBytes('GET', `/api/users?${'a=1&'.repeat(5_000)}`)]), 414, 'uri-too-long');
      expectRawProblem(await rawExchange(port, [requestBytes('GET', `/api/users?q=${'a'.repeat(9_000)}`)]), 414, 'uri-too-long');
    }
  });

  it('leave the servers answering', async () => {
    for (const [, url] of servers()) expect((await fetch(`${url}/healthz`)).status).toBe(200);
  });
});

describe('deadlines that name the guilty party', () => {
  /** An upstream that counts requests and answers only when told. */
  async function recordingUpstream(handler: http.RequestListener = (_req, res) => res.end()) {
    const requests: string[] = [];
    const server = http.createServer((req, res) => {
      requests.push(`${req.method} ${req.url}`);
      handler(req, res);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return {
      url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
      requests,
      close: () => new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
    };
  }

  it('a request body still arriving after the body deadline is a 408 from the gateway, not a 504 blaming the service', async () => {
    const gateway = await startGateway({ upstreams: stack.urls, requestBodyTimeoutMs: 300, upstreamTimeoutMs: 5_000 });
    try {
      const head = requestBytes('POST', '/api/users', { 'Content-Type': 'application/json', 'Content-Length': '40' });
      const response = await rawExchange(portOf(gateway.url), [head, '{"email":"slow@exa', 3_000], { timeoutMs: 2_500 });
      expectRawProblem(response, 408, 'request-timeout');
      expect(JSON.parse(response.body).detail).toBe('The request body did not arrive within 300 ms');
      expect((await client(stack.users.url).get('/api/users?email=slow@example.com')).body.items).toEqual([]);
    } finally {
      await gateway.close();
    }
  });

  it('a Content-Length over the body limit is a 413 at once, and nothing reaches the service', async () => {
    const upstream = await recordingUpstream();
    const gateway = await startGateway({ upstreams: { users: upstream.url, products: upstream.url } });
    try {
      const head = requestBytes('POST', '/api/users', { 'Content-Type': 'application/json', 'Content-Length': String(100 * 1024 + 1) });
      const response = await rawExchange(portOf(gateway.url), [head], { timeoutMs: 2_000 });
      expectRawProblem(response, 413, 'payload-too-large');
      expect(upstream.requests).toEqual([]);
    } finally {
      await gateway.close();
      await upstream.close();
    }
  });

  it('a response body that stalls after its headers is cut: the cache fill and every request collapsed onto it fail fast', async () => {
    const upstream = await recordingUpstream((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': '100' });
      res.write('{"items":[');
    });
    const id = '0193a5c2-7b1e-7c4d-9a61-2f0c1b9e8d40';
    for (const cache of [{}, undefined]) {
      const gateway = await startGateway({ upstreams: { users: upstream.url, products: upstream.url }, upstreamTimeoutMs: 300, cache });
      try {
        const outcomes = await Promise.all(
          Array.from({ length: 5 }, () =>
            fetch(`${gateway.url}/api/users/${id}`, { headers: { authorization: `Bearer ${defaultToken}` }, signal: AbortSignal.timeout(3_000) })
              .then(async (response) => ({ status: response.status, type: ((await response.json()) as { type: string }).type }))
              .catch((error: Error) => ({ cut: (error.cause as Error | undefined)?.message ?? error.message })),
          ),
        );
        if (cache) {
          // Collapsed onto one fill: every request gets the gateway's 504, naming the stalled body.
          expect(outcomes).toEqual(Array.from({ length: 5 }, () => ({ status: 504, type: 'https://problems.example/gateway-timeout' })));
        } else {
          // Streamed: the headers are out, so the client sees its connection cut, not a hang.
          for (const outcome of outcomes) expect(outcome).toEqual({ cut: 'other side closed' });
        }
      } finally {
        await gateway.close();
      }
    }
    await upstream.close();
  });
});

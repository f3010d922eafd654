/**
 * Authentication and scopes at the gateway, as clients see them: 401 without a token or with a bad
 * one (expired, wrongly signed, `alg: none`, HS256 signed with the public key, wrong audience or
 * issuer, not yet valid, dated in the future, without a `jti`, a `sub` outside the rule), 403 without the route's scope, public product reads when configured, the
 * verified subject forwarded (percent-encoded, whatever it holds) in place of the token, and
 * authorised requests served from the cache.
 */
import { createHmac, createPublicKey, generateKeyPairSync } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { TokenVerifier } from '../../gateway/src/auth/tokens.js';
import { TEST_RULES, testPublicKeyPem, testToken } from '../support/auth.js';
import { client, expectProblem, type Client } from '../support/http.js';
import { startGateway, startStack } from '../support/stack.js';

let stack: Awaited<ReturnType<typeof startStack>>;
let api: Client;
let anonymous: Client;
let userPath: string;
let productPath: string;

beforeAll(async () => {
  stack = await startStack({ cache: {} });
  api = client(stack.gateway.url);
  anonymous = client(stack.gateway.url, { token: null });
  const user = await api.post('/api/users', { email: `auth-${Date.now()}@example.com`, name: 'Auth Test' });
  const product = await api.post('/api/products', { sku: `AUTH-${Date.now()}`, name: 'Guarded', price: { amount: '1.00', currency: 'EUR' } });
  userPath = user.headers.get('location')!;
  productPath = product.headers.get('location')!;
});
afterAll(() => stack.close());

const base64url = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
const TEN_YEARS = 10 * 365 * 86_400;

function expectUnauthorized(response: Awaited<ReturnType<Client['get']>>, error?: string) {
  expectProblem(response, 401, 'unauthorized');
  const challenge = response.headers.get('www-authenticate')!;
  expect(challenge).toMatch(/^Bearer realm="api"/);
  if (error) expect(challenge).toContain(`error="${error}"`);
  else expect(challenge).not.toContain('error=');
}

describe('without a token', () => {
  it.each([
    ['GET', '/api/users'],
    ['GET', 'user'],
    ['HEAD', 'user'],
    ['POST', '/api/users'],
    ['PATCH', 'user'],
    ['DELETE', 'user'],
    ['GET', 'product'],
    ['DELETE', 'product'],
  ])('%s %s is a 401 problem with a Bearer challenge', async (method, target) => {
    const path = target === 'user' ? userPath : target === 'product' ? productPath : target;
    const response = await anonymous.send(method, path, method === 'POST' || method === 'PATCH' ? { json: {} } : {});
    if (method === 'HEAD') {
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toMatch(/^Bearer realm="api", scope="users:read"$/);
    } else expectUnauthorized(response);
  });

  it('a scheme other than Bearer counts as no token', async () => {
    expectUnauthorized(await anonymous.get(userPath, { headers: { authorization: 'Basic YWRtaW46YWRtaW4=' } }));
  });

  it('OPTIONS, the probes and the documents need none', async () => {
    expect((await anonymous.send('OPTIONS', userPath)).status).toBe(204);
    expect((await anonymous.get('/healthz')).status).toBe(200);
    expect((await anonymous.get('/openapi.json')).status).toBe(200);
  });
});

describe('a token that is not acceptable is a 401 with error="invalid_token"', () => {
  const otherKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
  it.each([
    ['expired', () => testToken({ expiresIn: -120 })],
    ['not valid yet', () => testToken({ notBefore: 600 })],
    ['signed by another key', () => testToken({ key: otherKey })],
    ['for another audience', () => testToken({ audience: 'another-api' })],
    ['from another issuer', () => testToken({ issuer: 'https://evil.example' })],
    ['with alg none', async () => `${base64url({ alg: 'none', typ: 'JWT' })}.${(await testToken()).split('.')[1]}.`],
    [
      'HS256, signed with the public key as the secret (key confusion)',
      async () => {
        const [, payload] = (await testToken()).split('.');
        const signed = `${base64url({ alg: 'HS256', typ: 'JWT' })}.${payload}`;
        return `${signed}.${createHmac('sha256', testPublicKeyPem).update(signed).digest('base64url')}`;
      },
    ],
    ['with a forged payload', async () => {
      const [header, , signature] = (await testToken({ scopes: ['products:read'] })).split('.');
      return `${header}.${(await testToken()).split('.')[1]}.${signature}`;
    }],
    ['not a JWT', async () => 'not-a-jwt'],
    ['with a sub that has no UTF-8 form (a lone surrogate)', () => testToken({ subject: 'mal\uD800lory' })],
    ['with a sub that ends with a space', () => testToken({ subject: 'test-client ' })],
    ['with a sub that begins with a space', () => testToken({ subject: ' test-client' })],
    ['with a sub that holds a NUL (C0)', () => testToken({ subject: 'test\u0000client' })],
    ['with a sub that holds a NEL (C1)', () => testToken({ subject: 'test\u0085client' })],
    ['with a sub not in Unicode NFC', () => testToken({ subject: 'cafe\u0301' })],
    ['without a jti', () => testToken({ tokenId: null })],
    ['issued in the future (beyond the clock tolerance)', () => testToken({ issuedIn: 120, expiresIn: 720 })],
    ['expiring in ten years, a minute after its iat', () => testToken({ issuedIn: TEN_YEARS - 60, expiresIn: TEN_YEARS })],
    ['with iat = exp = 1e15', () => testToken({ issuedIn: 1e15 - Math.floor(Date.now() / 1000), expiresIn: 1e15 - Math.floor(Date.now() / 1000) })],
  ])('%s', async (_case, token) => {
    const response = await api.get(userPath, { token: await token() });
    expectUnauthorized(response, 'invalid_token');
    // What was wrong, in words, never the token itself.
    expect(response.body.detail).toMatch(/^The access token|^No key/);
  });

  it('a header naming another allowed algorithm than the key is for (ES384 for an ES256 key), from anyone', async () => {
    const tokens = new TokenVerifier({ publicKey: createPublicKey(testPublicKeyPem) }, { ...TEST_RULES, algorithms: ['ES256', 'ES384', 'RS256', 'EdDSA'] });
    const gateway = await startGateway({ upstreams: stack.urls, guard: { tokens } });
    try {
      const [, claims, signature] = (await testToken()).split('.');
      for (const alg of ['ES384', 'RS256', 'EdDSA']) {
        const response = await client(gateway.url, { token: `${base64url({ alg, typ: 'JWT' })}.${claims}.${signature}` }).get(productPath);
        expectUnauthorized(response, 'invalid_token');
        expect(response.headers.get('retry-after')).toBeNull();
      }
    } finally {
      await gateway.close();
    }
  });

  it('even on a route that needs no token', async () => {
    const gateway = await startGateway({ upstreams: stack.urls, guard: { publicReads: ['products'] } });
    try {
      expectUnauthorized(await client(gateway.url).get(productPath, { token: await testToken({ expiresIn: -120 }) }), 'invalid_token');
    } finally {
      await gateway.close();
    }
  });
});

describe('scopes', () => {
  it('a token without the route\'s scope is a 403 with error="insufficient_scope"', async () => {
    const readOnly = client(stack.gateway.url, { token: await testToken({ scopes: ['users:read', 'products:read'] }) });
    expect((await readOnly.get(userPath)).status).toBe(200);
    const write = await readOnly.patch(userPath, { name: 'Not Allowed' });
    expectProblem(write, 403, 'insufficient-scope');
    expect(write.headers.get('www-authenticate')).toBe('Bearer realm="api", error="insufficient_scope", scope="users:write"');
    const productsOnly = client(stack.gateway.url, { token: await testToken({ scopes: ['products:read', 'products:write'] }) });
    expectProblem(await productsOnly.get('/api/users'), 403, 'insufficient-scope');
    expect((await productsOnly.get(productPath)).status).toBe(200);
    // Nothing was written by the refused write.
    expect((await api.get(userPath)).body.name).toBe('Auth Test');
  });

  it('product reads are public when configured so; user data and writes still need a token', async () => {
    const gateway = await startGateway({ upstreams: stack.urls, guard: { publicReads: ['products'] } });
    try {
      const visitor = client(gateway.url, { token: null });
      expect((await visitor.get(productPath)).status).toBe(200);
      expect((await visitor.get('/api/products')).status).toBe(200);
      expectUnauthorized(await visitor.patch(productPath, { stock: 1 }));
      expectUnauthorized(await visitor.get(userPath));
      expectUnauthorized(await visitor.get('/api/users'));
    } finally {
      await gateway.close();
    }
  });
});

describe('the cache serves authorised requests only', () => {
  it('a token with the scope gets a HIT; no token or the wrong scope gets nothing from the cache', async () => {
    let hit = false;
    for (let attempt = 0; attempt < 50 && !hit; attempt++) {
      hit = (await api.get(productPath)).headers.get('x-cache') === 'HIT';
      if (!hit) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(hit).toBe(true);
    // Another caller with the scope is served the same entry: resources are the same for everyone.
    const other = await client(stack.gateway.url, { token: await testToken({ subject: 'someone-else', scopes: ['products:read'] }) }).get(productPath);
    expect(other.headers.get('x-cache')).toBe('HIT');
    expectUnauthorized(await anonymous.get(productPath));
    expectProblem(await api.get(productPath, { token: await testToken({ scopes: ['users:read'] }) }), 403, 'insufficient-scope');
  });
});

describe('any subject reaches the services exactly', () => {
  // Each acceptable by the rule for a sub (docs/api.md), and still odd for a header, a path or a key.
  const hostile = ['m\u2603allory', 'a:|/*{}\\"\'', '%41 %2F', 'caf\u00e9 \u{1F600}'];

  it.each(hostile.map((subject) => [JSON.stringify(subject), subject]))('%s reads (cache misses) and writes like any subject', async (_name, subject) => {
    const as = client(stack.gateway.url, { token: await testToken({ subject }) });
    const created = await as.post('/api/products', { sku: `SUB-${Date.now()}-${hostile.indexOf(subject)}`, name: 'Subject', price: { amount: '1.00', currency: 'EUR' } }, { headers: { 'Idempotency-Key': 'subject-create' } });
    expect(created.status).toBe(201);
    const path = created.headers.get('location')!;
    const read = await as.get(path);
    expect({ status: read.status, cache: read.headers.get('x-cache') }).toEqual({ status: 200, cache: 'MISS' });
    expect((await as.patch(path, { stock: 3 }, { headers: { 'Idempotency-Key': 'subject-patch' } })).status).toBe(200);
    expect((await as.get(path)).body.stock).toBe(3);
    expect((await as.delete(path)).status).toBe(204);
  });

  it('subjects that differ only by case do not share Idempotency-Keys', async () => {
    const carol = client(stack.gateway.url, { token: await testToken({ subject: 'carol' }) });
    const lookalike = client(stack.gateway.url, { token: await testToken({ subject: 'Carol' }) });
    const idempotencyKey = `carol-${Date.now()}`;
    const first = await carol.patch(productPath, { stock: 11 }, { headers: { 'Idempotency-Key': idempotencyKey } });
    expect(first.status).toBe(200);
    expect((await carol.patch(productPath, { stock: 11 }, { headers: { 'Idempotency-Key': idempotencyKey } })).headers.get('idempotent-replayed')).toBe('true');
    const theirs = await lookalike.patch(productPath, { stock: 11 }, { headers: { 'Idempotency-Key': idempotencyKey } });
    expect({ status: theirs.status, replayed: theirs.headers.get('idempotent-replayed'), etag: theirs.headers.get('etag') === first.headers.get('etag') }).toEqual({ status: 200, replayed: null, etag: false });
  });

  it('a service refuses a subject that is not percent-encoded UTF-8 (400)', async () => {
    const response = await client(stack.products.url).patch(productPath, { stock: 1 }, { headers: { 'Idempotency-Key': 'bad-subject', 'X-Auth-Subject': '%E2%98' } });
    expect(expectProblem(response, 400, 'validation').errors).toEqual([{ path: 'X-Auth-Subject', message: 'must be percent-encoded UTF-8' }]);
  });
});

describe('what the services get', () => {
  let upstream: http.Server;
  let seen: http.IncomingHttpHeaders[];
  let gateway: Awaited<ReturnType<typeof startGateway>>;

  beforeAll(async () => {
    seen = [];
    upstream = http.createServer((req, res) => {
      seen.push(req.headers);
      res.setHeader('content-type', 'application/json');
      res.end('{}');
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    gateway = await startGateway({ upstreams: { users: url, products: url }, guard: { publicReads: ['products'] } });
  });
  afterAll(async () => {
    await gateway.close();
    await new Promise((resolve) => upstream.close(resolve));
  });

  it('the verified subject in X-Auth-Subject (percent-encoded), never the token, never a subject the client claims', async () => {
    const token = await testToken({ subject: 'alice ☃', scopes: ['users:read'] });
    await fetch(`${gateway.url}/api/users`, { headers: { authorization: `Bearer ${token}`, 'x-auth-subject': 'mallory' } });
    await fetch(`${gateway.url}/api/products`, { headers: { 'X-Auth-Subject': 'mallory' } });
    expect(seen).toHaveLength(2);
    expect(seen[0]).toMatchObject({ 'x-auth-subject': 'alice%20%E2%98%83' });
    expect(seen[0]).not.toHaveProperty('authorization');
    expect(seen[1]).not.toHaveProperty('x-auth-subject');
  });

  it("X-Forwarded-For with the client's address added after whatever the client sent, on a proxied write and on a cache fill", async () => {
    seen.length = 0;
    const token = await testToken({ scopes: ['products:write'] });
    await fetch(`${gateway.url}/api/products`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'x-forwarded-for': '203.0.113.9' }, body: '{}' });
    await fetch(`${gateway.url}/api/products?limit=7`, { headers: { 'x-forwarded-for': '203.0.113.9' } });
    await fetch(`${gateway.url}/api/products?limit=8`);
    expect(seen.map((headers) => headers['x-forwarded-for'])).toEqual(['203.0.113.9, 127.0.0.1', '203.0.113.9, 127.0.0.1', '127.0.0.1']);
  });
});

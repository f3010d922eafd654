/**
 * Revoking access tokens, as an operator and the clients see it: `POST /admin/revocations` with the
 * `gateway:admin` scope revokes one token (its `jti`) or every token of a subject; two gateway
 * replicas sharing a Redis then refuse it within a second on a warm cache hit, a miss and a write,
 * and on its caller's own cached read of a service whose records only their owners see ("owner":
 * "all"); a replica started afterwards refuses it from its first request; other tokens go on working.
 * A subject's revocation covers a token minted before it whose `iat` is later (within the clock
 * tolerance), and an ECDSA signature's twin is revoked with its token. `npm run revoke` does the same
 * from a shell, given a token id or a whole token (its id read from the claim AUTH_CLAIMS names).
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { ownershipOf } from '@app/shared/platform/services';
import { signedClaims, testToken } from '../support/auth.js';
import { client, expectProblem, type TestResponse } from '../support/http.js';
import { ROOT } from '../../tools/process.js';
import { PROVIDER_SHAPES } from '../support/provider-tokens.js';
import { portOf, rawExchange, requestBytes } from '../support/raw-socket.js';
import { resourceCases } from '../support/resource-case.js';
import { startGateway, startStack, type RunningGateway } from '../support/stack.js';

const WITHIN_MS = 1_000;

/** The first service in services.json whose records only their owners see, with its bodies. */
const ownersOnly = (await resourceCases()).find(({ name }) => ownershipOf(name) === 'all');

let stack: Awaited<ReturnType<typeof startStack>>;
let replica: RunningGateway;
let later: RunningGateway | undefined;
let productPath: string;
let otherProductPath: string;
let admin: string;

beforeAll(async () => {
  stack = await startStack({ cache: {} });
  replica = await startGateway({ upstreams: stack.urls, cache: {} });
  admin = await testToken({ scopes: ['gateway:admin'], subject: `admin-${randomUUID()}` });
  const api = client(stack.gateway.url);
  const created = await Promise.all(
    ['A', 'B'].map((n) => api.post('/api/products', { sku: `REVOKE-${n}-${Date.now()}`, name: 'Revocable', price: { amount: '1.00', currency: 'EUR' } })),
  );
  [productPath, otherProductPath] = created.map((response) => response.headers.get('location')!) as [string, string];
});
afterAll(async () => {
  await later?.close();
  await replica.close();
  await stack.close();
});

const revoke = (body: unknown, token: string | null = admin) => client(stack.gateway.url, { token }).post('/admin/revocations', body);

const expectRevoked = (response: TestResponse) => {
  expectProblem(response, 401, 'unauthorized');
  expect(response.headers.get('www-authenticate')).toContain('error="invalid_token"');
  expect(response.body).toMatchObject({ detail: 'The access token has been revoked' });
};

/** Asks until `gateway` refuses `token` on a read of `path`; how long that took (ms), failing past WITHIN_MS. */
async function untilRefused(gateway: RunningGateway, token: string, path: string): Promise<number> {
  const started = performance.now();
  for (;;) {
    const response = await client(gateway.url, { token }).get(path);
    if (response.status === 401) return performance.now() - started;
    expect(response.status).toBe(200);
    if (performance.now() - started > WITHIN_MS) throw new Error(`${gateway.url} still served ${path} after ${WITHIN_MS} ms`);
  }
}

/** Warms both replicas' cache with `token`'s read of `productPath`: the next read there is a HIT. */
async function warm(token: string): Promise<void> {
  for (const gateway of [stack.gateway, replica]) {
    const api = client(gateway.url, { token });
    await api.get(productPath);
    expect((await api.get(productPath)).headers.get('x-cache')).toBe('HIT');
  }
}

describe.each([
  ['one token, by its jti', (subject: string, tokenId: string) => ({ tokenId }), false],
  ['every token of a subject', (subject: string) => ({ subject }), true],
])('revoking %s', (_, revocation, otherTokensOfSubjectRefused) => {
  const subject = `client-${randomUUID()}`;
  const tokenId = randomUUID();
  let revoked: string;
  let sameSubject: string;
  let otherSubject: string;

  beforeAll(async () => {
    revoked = await testToken({ subject, tokenId });
    sameSubject = await testToken({ subject });
    otherSubject = await testToken({ subject: `other-${randomUUID()}` });
    await warm(revoked);
  });

  it('is recorded (201) and refused within a second by both replicas, on a warm hit, a miss and a write', async () => {
    const response = await revoke(revocation(subject, tokenId));
    expect(response.status).toBe(201);
    expect(response.body).toMatchObject(revocation(subject, tokenId));
    for (const gateway of [stack.gateway, replica]) {
      expect(await untilRefused(gateway, revoked, productPath)).toBeLessThanOrEqual(WITHIN_MS);
      const api = client(gateway.url, { token: revoked });
      expectRevoked(await api.get(otherProductPath));
      expectRevoked(await api.patch(productPath, { name: 'Not by a revoked token' }));
    }
    expect((await client(stack.gateway.url).get(productPath)).body).toMatchObject({ name: 'Revocable' });
  });

  it('is refused by a replica started after it, from its first request', async () => {
    await later?.close();
    later = await startGateway({ upstreams: stack.urls, cache: {} });
    expectRevoked(await client(later.url, { token: revoked }).get(productPath));
  });

  it(`leaves other subjects' tokens working${otherTokensOfSubjectRefused ? '' : ", and the subject's other tokens"}`, async () => {
    for (const gateway of [stack.gateway, replica]) {
      expect((await client(gateway.url, { token: otherSubject }).get(productPath)).status).toBe(200);
      const ofSubject = await client(gateway.url, { token: sameSubject }).get(productPath);
      if (otherTokensOfSubjectRefused) expectRevoked(ofSubject);
      else expect(ofSubject.status).toBe(200);
    }
  });
});

if (ownersOnly) {
  describe(`revoking one token by its jti, on its own cached read of ${ownersOnly.path} ("owner": "all")`, () => {
    it('is refused (401 invalid_token) by both replicas on the read their cache holds for it', async () => {
      const subject = `owner-${randomUUID()}`;
      const tokenId = randomUUID();
      const token = await testToken({ subject, tokenId });
      const created = await client(stack.gateway.url, { token }).post(ownersOnly.path, ownersOnly.valid(Math.floor(Math.random() * 1_000_000_000)));
      expect(created.status).toBe(201);
      const item = created.headers.get('location')!;
      // Its own entry, on both replicas: the next read there is a HIT.
      for (const gateway of [stack.gateway, replica]) {
        const api = client(gateway.url, { token });
        await api.get(item);
        const hit = await api.get(item);
        expect({ status: hit.status, cache: hit.headers.get('x-cache') }).toEqual({ status: 200, cache: 'HIT' });
      }
      expect((await revoke({ tokenId })).status).toBe(201);
      const sameSubject = await testToken({ subject });
      for (const gateway of [stack.gateway, replica]) {
        expect(await untilRefused(gateway, token, item)).toBeLessThanOrEqual(WITHIN_MS);
        expectRevoked(await client(gateway.url, { token }).get(item));
        // The entry is still there: the subject's other token is answered from it.
        const cached = await client(gateway.url, { token: sameSubject }).get(item);
        expect({ status: cached.status, cache: cached.headers.get('x-cache') }).toEqual({ status: 200, cache: 'HIT' });
      }
    });
  });
}

describe('a subject revoked until a time', () => {
  it('keeps the tokens issued after that time (and the clock tolerance)', async () => {
    const subject = `client-${randomUUID()}`;
    const token = await testToken({ subject });
    const response = await revoke({ subject, issuedBefore: new Date(Date.now() - 60_000).toISOString() });
    expect(response.status).toBe(201);
    expect((await client(replica.url, { token }).get(productPath)).status).toBe(200);
  });

  it('is never later than when it was made', async () => {
    const before = Date.now();
    const response = await revoke({ subject: `client-${randomUUID()}`, issuedBefore: new Date(before + 3_600_000).toISOString() });
    expect(response.status).toBe(201);
    expect(Date.parse(response.body.issuedBefore as string)).toBeLessThanOrEqual(Date.now());
  });
});

describe('a subject revoked now', () => {
  it('refuses a token minted before, whose iat is later than the revocation (within the clock tolerance)', async () => {
    const subject = `client-${randomUUID()}`;
    // An issuer whose clock runs 25 s ahead: within the tolerance, so the token is good until revoked.
    const ahead = await testToken({ subject, issuedIn: 25 });
    expect((await client(replica.url, { token: ahead }).get(productPath)).status).toBe(200);
    expect((await revoke({ subject })).status).toBe(201);
    expect(await untilRefused(replica, ahead, productPath)).toBeLessThanOrEqual(WITHIN_MS);
    expectRevoked(await client(stack.gateway.url, { token: ahead }).get(productPath));
  });
});

/** The other spelling of an ES256 signature (r, s): (r, n − s), which verifies as well. */
function ecdsaTwin(token: string): string {
  const P256_ORDER = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
  const [header, payload, signature] = token.split('.') as [string, string, string];
  const bytes = Buffer.from(signature, 'base64url');
  const s = BigInt(`0x${bytes.subarray(32).toString('hex')}`);
  const twinS = Buffer.from((P256_ORDER - s).toString(16).padStart(64, '0'), 'hex');
  return `${header}.${payload}.${Buffer.concat([bytes.subarray(0, 32), twinS]).toString('base64url')}`;
}

describe("an ECDSA signature's twin (S for n − S)", () => {
  it('is the same token: let in with it, and refused with it once its jti is revoked', async () => {
    const tokenId = randomUUID();
    const token = await testToken({ tokenId });
    const twin = ecdsaTwin(token);
    expect(twin).not.toBe(token);
    for (const spelling of [token, twin]) expect((await client(replica.url, { token: spelling }).get(productPath)).status).toBe(200);
    expect((await revoke({ tokenId })).status).toBe(201);
    for (const spelling of [token, twin]) expect(await untilRefused(replica, spelling, productPath)).toBeLessThanOrEqual(WITHIN_MS);
  });
});

describe('one token revoked with its exp', () => {
  it('is recorded with it, and refused', async () => {
    const tokenId = randomUUID();
    const token = await testToken({ tokenId });
    const expiresAt = new Date(Date.now() + 10 * 365 * 86_400_000).toISOString();
    const response = await revoke({ tokenId, expiresAt });
    expect({ status: response.status, body: response.body }).toEqual({ status: 201, body: { tokenId, expiresAt } });
    expect(await untilRefused(replica, token, productPath)).toBeLessThanOrEqual(WITHIN_MS);
  });
});

describe('the revocation endpoint', () => {
  let userToken: string;
  beforeAll(async () => {
    userToken = await testToken();
  });

  it('needs a token (401) with the gateway:admin scope (403)', async () => {
    expectProblem(await revoke({ tokenId: 'x' }, null), 401, 'unauthorized');
    const refused = await revoke({ tokenId: 'x' }, userToken);
    expectProblem(refused, 403, 'insufficient-scope');
    expect(refused.headers.get('www-authenticate')).toContain('scope="gateway:admin"');
  });

  it.each([
    '/admin/revocations/',
    '/ADMIN/revocations',
    '/admin/Revocations',
    '//admin/revocations',
    '/./admin/revocations',
    '/admin/./revocations',
    '/admin//revocations',
    '/%61dmin/revocations',
    '/admin/%72evocations',
    '/admin%2Frevocations',
    'http://gateway.example/admin/revocations',
    'http://gateway.example//admin/revocations',
  ])('is never reached without the gateway:admin scope through %s', async (target) => {
    const body = JSON.stringify({ subject: 'anyone' });
    const answer = await rawExchange(portOf(stack.gateway.url), [requestBytes('POST', target, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }, body)]);
    expect({ target, refused: [403, 404].includes(answer.status) }).toEqual({ target, refused: true });
  });

  it.each([
    ['an empty body', {}],
    ['both kinds at once', { tokenId: 'x', subject: 'y' }],
    ['an empty token id', { tokenId: '' }],
    ['a time that is not RFC 3339', { subject: 'y', issuedBefore: 'yesterday' }],
    ['a member it does not know', { tokenId: 'x', reason: 'leaked' }],
    ['a subject no token can have (a trailing space)', { subject: 'mallory ' }],
    ['a subject no token can have (not NFC)', { subject: 'cafe\u0301' }],
    ['an exp that is not RFC 3339', { tokenId: 'x', expiresAt: 'never' }],
    ['an exp for a subject', { subject: 'y', expiresAt: '2030-01-01T00:00:00Z' }],
  ])('refuses %s with a 400 naming the problem', async (_, body) => {
    expectProblem(await revoke(body), 400, 'validation');
  });
});

describe('npm run revoke', () => {
  const revokeCommand = (args: string[], env: Record<string, string> = {}) =>
    promisify(execFile)(process.execPath, ['scripts/revoke.ts', ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, REDIS_URL: process.env.TEST_REDIS_URL, REDIS_KEY_PREFIX: process.env.TEST_REDIS_KEY_PREFIX ?? '', ...env },
      timeout: 20_000,
    });

  it('revokes a token by its id for the running replicas', async () => {
    const tokenId = randomUUID();
    const token = await testToken({ tokenId });
    expect((await client(replica.url, { token }).get(productPath)).status).toBe(200);
    const { stdout } = await revokeCommand(['--jti', tokenId]);
    expect(stdout).toContain(`revoked token ${tokenId}`);
    expect(await untilRefused(replica, token, productPath)).toBeLessThanOrEqual(WITHIN_MS);
  });

  it('revokes a whole token by its jti, with its exp', async () => {
    const tokenId = randomUUID();
    const token = await testToken({ tokenId });
    expect((await client(replica.url, { token }).get(productPath)).status).toBe(200);
    const { stdout } = await revokeCommand(['--token', token]);
    const expiresAt = new Date(JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).exp * 1000).toISOString();
    expect(stdout).toContain(`revoked token ${tokenId} (expiring ${expiresAt})`);
    expect(await untilRefused(replica, token, productPath)).toBeLessThanOrEqual(WITHIN_MS);
  });

  it("takes a whole token's id from the claim AUTH_CLAIMS names: Entra ID's uti, which its gateway then refuses", async () => {
    const { issuer, audience, claims: shaped } = PROVIDER_SHAPES.entra;
    const entra = await startGateway({ upstreams: stack.urls, guard: { authSettings: { AUTH_CLAIMS: 'entra', AUTH_ISSUER: issuer, AUTH_AUDIENCE: audience } } });
    try {
      const claims = { ...shaped('entra-revoked', ['products:read']), uti: randomUUID() };
      const token = await signedClaims(claims);
      expect((await client(entra.url, { token }).get(productPath)).status).toBe(200);
      const { stdout } = await revokeCommand(['--token', token], { AUTH_CLAIMS: 'entra' });
      expect(stdout).toContain(`revoked token ${claims.uti} (expiring ${new Date(claims.exp! * 1000).toISOString()})`);
      expect(await untilRefused(entra, token, productPath)).toBeLessThanOrEqual(WITHIN_MS);
    } finally {
      await entra.close();
    }
  });

  it('refuses arguments that name no revocation, with its usage (exit 2)', async () => {
    for (const args of [['--jti', 'x', '--sub', 'y'], ['--token', 'not-a-jwt'], ['--sub', 'mallory ']]) {
      await expect(revokeCommand(args)).rejects.toMatchObject({ code: 2, stderr: expect.stringContaining('usage: npm run revoke') });
    }
  });
});

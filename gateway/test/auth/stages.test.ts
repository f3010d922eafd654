import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { createLogger } from '@app/shared/platform/logger';
import { HttpProblem } from '@app/shared/platform/problem';
import { requestTarget } from '@app/shared/platform/request-target';
import { RevocationList } from '../../src/auth/revocations.js';
import { KeysUnavailable } from '../../src/auth/key-source.js';
import { InvalidToken, type Principal, type TokenVerifier } from '../../src/auth/tokens.js';
import { Exchange } from '../../src/exchange.js';
import { Routing } from '../../src/routing/service-routes.js';
import { authStages } from '../../src/auth/stages.js';
import { recordingResponse, responseWriter } from '../fixtures.js';

/** The auth stages in process: what `identify` decides of a request, and what `enforce` answers. */
const logger = createLogger('auth-stage-test', 'silent');
const writer = responseWriter();
const routing = new Routing([
  { name: 'users', url: 'http://127.0.0.1:1', prefix: '/api/users', cachedReads: true, publicReads: false, owner: 'none' },
  { name: 'products', url: 'http://127.0.0.1:1', prefix: '/api/products', cachedReads: true, publicReads: true, owner: 'none' },
]);

const BEARER = 'Bearer header.payload.signature';
const ID = '01890a5d-ac96-774b-bcce-b302099a8057';

const principal = (subject: string, scopes: string[]): Principal => ({
  subject,
  forwardedSubject: encodeURIComponent(subject),
  caller: `sub:${subject}`,
  scopes: new Set(scopes),
  tokenId: `token-of-${subject}`,
  issuedAt: 1_000,
});

/**
 * A verifier that remembers `remembered` and verifies every other header to `verified` (a
 * principal, undefined for a header that is no bearer token, or an error it rejects with); it
 * records the headers it was asked about.
 */
function verifier(options: { remembered?: Principal; verified?: Principal | Error }) {
  const asked: string[] = [];
  const tokens = {
    remembered: (header: string) => {
      asked.push(header);
      return options.remembered;
    },
    verify: async (header: string) => {
      asked.push(header);
      if (options.verified instanceof Error) throw options.verified;
      return options.verified;
    },
  } as unknown as TokenVerifier;
  return { tokens, asked };
}

/** A request as the pipeline hands it over (its service routed), with a response that records what is written to it. */
function exchangeOf(method: string, url: string, headers: IncomingHttpHeaders = {}) {
  const req = { method, url, headers: { host: 'gateway', ...headers }, socket: { remoteAddress: '10.0.0.1' }, complete: true } as unknown as IncomingMessage;
  const { res, answer } = recordingResponse();
  const target = requestTarget(url);
  const exchange = new Exchange(req, res, target, routing.service(target), { requestId: 'r-1', log: logger });
  return { exchange, answer };
}

/** Runs `identify` (awaiting it when it waits) and then `enforce`, as the pipeline does; says whether `enforce` answered. */
async function decide(tokens: TokenVerifier | undefined, exchange: Exchange, traceSubject = false, revocations?: RevocationList): Promise<boolean> {
  const { identify, enforce } = authStages({ tokens, revocations, writer, traceSubject });
  expect(await identify.run(exchange)).toBe(false);
  return enforce.run(exchange);
}

describe('authStages: identify', () => {
  it('refuses with 401 invalid_token a revoked token, remembered or verified, still counting its caller', async () => {
    const revocations = new RevocationList({ maxLifetimeMs: 3_600_000, clockToleranceMs: 30_000 });
    revocations.add({ tokenId: 'token-of-mallory' }, Date.now());
    for (const options of [{ remembered: principal('mallory', ['users:read']) }, { verified: principal('mallory', ['users:read']) }]) {
      const { exchange, answer } = exchangeOf('GET', `/api/users/${ID}`, { authorization: BEARER });
      expect(await decide(verifier(options).tokens, exchange, false, revocations)).toBe(true);
      expect(exchange.caller).toBe('sub:mallory');
      expect(answer.status).toBe(401);
      expect(answer.headers['www-authenticate']).toBe('Bearer realm="api", error="invalid_token", error_description="The access token has been revoked"');
    }
    const { exchange } = exchangeOf('GET', `/api/users/${ID}`, { authorization: BEARER });
    expect(await decide(verifier({ verified: principal('alice', ['users:read']) }).tokens, exchange, false, revocations)).toBe(false);
  });

  it("lets a service's admin scope stand for its read and write scopes, and tells the service (X-Auth-Role), which no client can", async () => {
    const admin = verifier({ verified: principal('root', ['users:admin']) });
    for (const method of ['GET', 'PATCH']) {
      const { exchange } = exchangeOf(method, `/api/users/${ID}`, { authorization: BEARER, 'x-auth-role': 'owner' });
      expect(await decide(admin.tokens, exchange)).toBe(false);
      expect(exchange.req.headers).toEqual({ host: 'gateway', 'x-auth-subject': 'root', 'x-auth-role': 'admin' });
    }
    const reader = verifier({ verified: principal('carol', ['users:read', 'products:admin']) });
    const { exchange } = exchangeOf('GET', `/api/users/${ID}`, { authorization: BEARER, 'x-auth-role': 'admin' });
    expect(await decide(reader.tokens, exchange)).toBe(false);
    expect(exchange.req.headers).toEqual({ host: 'gateway', 'x-auth-subject': 'carol' });
    const writer = exchangeOf('DELETE', `/api/users/${ID}`, { authorization: BEARER });
    expect(await decide(reader.tokens, writer.exchange)).toBe(true);
    expect(writer.answer.status).toBe(403);
  });

  it('asks the gateway:admin scope under /admin (but for OPTIONS), and no token on its other endpoints', async () => {
    const reader = verifier({ verified: principal('carol', ['users:read']) });
    const admin = exchangeOf('POST', '/admin/revocations', { authorization: BEARER });
    expect(await decide(reader.tokens, admin.exchange)).toBe(true);
    expect(admin.answer.status).toBe(403);
    expect(admin.answer.headers['www-authenticate']).toContain('scope="gateway:admin"');
    const anonymous = exchangeOf('POST', '/admin/revocations');
    expect(await decide(reader.tokens, anonymous.exchange)).toBe(true);
    expect(anonymous.answer.status).toBe(401);
    const allowed = exchangeOf('POST', '/admin/revocations', { authorization: BEARER });
    expect(await decide(verifier({ verified: principal('root', ['gateway:admin']) }).tokens, allowed.exchange)).toBe(false);
    expect(allowed.exchange.req.headers).toEqual({ host: 'gateway', 'x-auth-subject': 'root' });
    for (const [method, url] of [['OPTIONS', '/admin/revocations'], ['GET', '/healthz'], ['GET', '/administration']]) {
      const { exchange } = exchangeOf(method!, url!, { authorization: BEARER });
      expect(await decide(reader.tokens, exchange)).toBe(false);
      expect(exchange.req.headers.authorization).toBe(BEARER);
    }
  });

  it('admits a verified token with the scope: the caller counted by subject, the services given the subject and not the token', async () => {
    const { tokens, asked } = verifier({ verified: principal('alice@example.com', ['users:read']) });
    const { exchange, answer } = exchangeOf('GET', '/api/users', { authorization: BEARER, accept: 'application/json' });
    expect(await decide(tokens, exchange)).toBe(false);
    expect(asked).toEqual([BEARER, BEARER]);
    expect(exchange.req.headers).toEqual({ host: 'gateway', accept: 'application/json', 'x-auth-subject': 'alice%40example.com' });
    expect(exchange.caller).toBe('sub:alice@example.com');
    expect(exchange.refusal).toBeUndefined();
    expect(answer.status).toBeUndefined();
  });

  it('decides a remembered token at once, without verifying it again', () => {
    const { tokens, asked } = verifier({ remembered: principal('bob', ['users:write']), verified: new Error('not to be verified') });
    const { exchange } = exchangeOf('POST', '/api/users', { authorization: BEARER });
    const { identify } = authStages({ tokens, writer, traceSubject: true });
    expect(identify.run(exchange)).toBe(false);
    expect(asked).toEqual([BEARER]);
    expect(exchange.caller).toBe('sub:bob');
    expect(exchange.req.headers).toEqual({ host: 'gateway', 'x-auth-subject': 'bob' });
    expect(exchange.refusal).toBeUndefined();
  });

  it('refuses with 403 a token without the scope of the method: read for GET and HEAD, write for the rest', async () => {
    const reader = verifier({ verified: principal('carol', ['users:read']) });
    for (const method of ['GET', 'HEAD']) {
      const { exchange } = exchangeOf(method, `/api/users/${ID}`, { authorization: BEARER });
      expect(await decide(reader.tokens, exchange)).toBe(false);
    }
    // A request without a method is read as a GET.
    const bare = exchangeOf('GET', '/api/users', { authorization: BEARER });
    delete bare.exchange.req.method;
    expect(await decide(reader.tokens, bare.exchange)).toBe(false);
    const { exchange, answer } = exchangeOf('PATCH', `/api/users/${ID}`, { authorization: BEARER });
    expect(await decide(reader.tokens, exchange)).toBe(true);
    // Refused, still counted as the caller its token names.
    expect(exchange.caller).toBe('sub:carol');
    expect(answer.status).toBe(403);
    expect(answer.headers['www-authenticate']).toBe('Bearer realm="api", error="insufficient_scope", scope="users:write"');
    expect(answer.body).toMatchObject({ detail: 'This request needs the users:write scope, which the access token does not grant', instance: `/api/users/${ID}` });
  });

  it('refuses with 401 a request without a token, naming the scope it needs', async () => {
    const { tokens, asked } = verifier({});
    const { exchange, answer } = exchangeOf('DELETE', `/api/users/${ID}`);
    expect(await decide(tokens, exchange)).toBe(true);
    expect(asked).toEqual([]);
    expect(exchange.caller).toBeUndefined();
    expect(answer.status).toBe(401);
    expect(answer.headers['www-authenticate']).toBe('Bearer realm="api", scope="users:write"');
    expect(answer.body).toMatchObject({
      detail: 'This request needs an access token with the users:write scope (Authorization: Bearer <token>)',
      instance: `/api/users/${ID}`,
    });
  });

  it('treats an Authorization header that holds no bearer token as no token, and does not pass it on', async () => {
    const { tokens } = verifier({ verified: undefined });
    const { exchange, answer } = exchangeOf('GET', '/api/users', { authorization: 'Basic YWxpY2U6c2VjcmV0' });
    expect(await decide(tokens, exchange)).toBe(true);
    expect(exchange.req.headers).toEqual({ host: 'gateway' });
    expect(answer.status).toBe(401);
    expect(answer.headers['www-authenticate']).toBe('Bearer realm="api", scope="users:read"');
  });

  it('lets anyone read a service with public reads, and without a token when none is sent', async () => {
    const { tokens } = verifier({ verified: undefined });
    expect(await decide(tokens, exchangeOf('GET', '/api/products').exchange)).toBe(false);
    expect(await decide(tokens, exchangeOf('GET', '/api/products', { authorization: 'Basic eA==' }).exchange)).toBe(false);
    // Writes to it still need their scope.
    expect(await decide(tokens, exchangeOf('PUT', `/api/products/${ID}`).exchange)).toBe(true);
  });

  it('asks no scope of an OPTIONS, nor of a path no service serves (its 404 comes later)', async () => {
    const { tokens } = verifier({ verified: principal('dave', []) });
    expect(await decide(tokens, exchangeOf('OPTIONS', '/api/users').exchange)).toBe(false);
    const unknown = exchangeOf('POST', '/api/orders', { authorization: BEARER });
    expect(await decide(tokens, unknown.exchange)).toBe(false);
    expect(unknown.exchange.caller).toBe('sub:dave');
  });

  it('refuses an invalid token with 401 invalid_token, its reason quoted in the challenge', async () => {
    const { tokens } = verifier({ verified: new InvalidToken('The token says "no" \\ twice') });
    const { exchange, answer } = exchangeOf('GET', '/api/users', { authorization: BEARER });
    expect(await decide(tokens, exchange)).toBe(true);
    expect(answer.status).toBe(401);
    expect(answer.headers['www-authenticate']).toBe('Bearer realm="api", error="invalid_token", error_description="The token says \\"no\\" \\\\ twice"');
    expect(answer.body).toMatchObject({ detail: 'The token says "no" \\ twice' });
  });

  it('answers 503 with Retry-After, when the key set may next be fetched, when the keys to verify a token are unavailable', async () => {
    const { tokens } = verifier({ verified: new KeysUnavailable(new Error('connect ECONNREFUSED'), 2) });
    const { exchange, answer } = exchangeOf('GET', '/api/users', { authorization: BEARER });
    expect(await decide(tokens, exchange)).toBe(true);
    expect(answer.status).toBe(503);
    expect(answer.headers['retry-after']).toBe('2');
    expect(answer.body).toMatchObject({ detail: 'The keys to verify access tokens are unavailable; try again shortly' });
  });

  it('fails the request with any other error of the verifier, as the pipeline then answers it', async () => {
    const failure = new TypeError('a bug');
    const { tokens } = verifier({ verified: failure });
    const { identify } = authStages({ tokens, writer, traceSubject: false });
    await expect(identify.run(exchangeOf('GET', '/api/users', { authorization: BEARER }).exchange)).rejects.toBe(failure);
  });

  it('drops a subject the client sent: only the gateway says who the caller is', async () => {
    const forged = { 'x-auth-subject': 'admin', accept: '*/*' };
    // Also when tokens are off, and outside /api.
    for (const [tokens, url] of [[undefined, '/api/users'], [verifier({}).tokens, '/openapi.json']] as const) {
      const { exchange } = exchangeOf('GET', url, forged);
      expect(await decide(tokens, exchange)).toBe(false);
      expect(exchange.req.headers).toEqual({ host: 'gateway', accept: '*/*' });
    }
    const { tokens } = verifier({ verified: principal('erin', ['users:read']) });
    const { exchange } = exchangeOf('GET', '/api/users', { ...forged, authorization: BEARER });
    expect(await decide(tokens, exchange)).toBe(false);
    expect(exchange.req.headers['x-auth-subject']).toBe('erin');
  });

  it('leaves alone a request when tokens are off, outside /api, or a CORS preflight', async () => {
    const { tokens, asked } = verifier({ verified: new Error('not to be verified') });
    const off = exchangeOf('DELETE', `/api/users/${ID}`, { authorization: BEARER });
    const outside = exchangeOf('GET', '/metrics', { authorization: BEARER });
    const preflight = exchangeOf('OPTIONS', '/api/users', { authorization: BEARER });
    preflight.exchange.preflight = true;
    for (const [verifying, { exchange }] of [[undefined, off], [tokens, outside], [tokens, preflight]] as const) {
      expect(await decide(verifying, exchange)).toBe(false);
      expect(exchange.req.headers.authorization).toBe(BEARER);
      expect(exchange.caller).toBeUndefined();
    }
    expect(asked).toEqual([]);
  });
});

describe('authStages: enforce', () => {
  it('passes on a request with no refusal, and answers the refusal identify decided', () => {
    const { enforce } = authStages({ tokens: undefined, writer, traceSubject: false });
    const passed = exchangeOf('GET', '/api/users');
    expect(enforce.run(passed.exchange)).toBe(false);
    expect(passed.answer.status).toBeUndefined();
    const refused = exchangeOf('GET', '/api/users');
    refused.exchange.rateLimit = { RateLimit: '"read";r=4;t=60' };
    refused.exchange.refusal = new HttpProblem('insufficient-scope', 'Not for you');
    expect(enforce.run(refused.exchange)).toBe(true);
    expect(refused.answer.status).toBe(403);
    // The gateway's own headers, the budget it counted against too.
    expect(refused.answer.headers).toMatchObject({ 'x-request-id': 'r-1', ratelimit: '"read";r=4;t=60' });
  });
});

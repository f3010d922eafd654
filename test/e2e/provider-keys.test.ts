/**
 * The gateway with its own key source from its configuration: an identity provider found by
 * discovery (AUTH_DISCOVERY), served by hand. /readyz waits for the first key set; while the
 * provider is down, known keys work and a token naming an unknown key is a quick 503 with
 * Retry-After.
 */
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, SignJWT } from 'jose';
import { ALL_SCOPES, TEST_RULES } from '../support/auth.js';
import { client, expectProblem, metricsOf } from '../support/http.js';
import { readMetrics } from '../../tools/metrics.js';
import { type RunningService, startGateway, startUsersService } from '../support/stack.js';

let users: RunningService;
beforeAll(async () => {
  users = await startUsersService();
});
afterAll(() => users.close());

const keys = Object.fromEntries(['one', 'two', 'three'].map((kid) => [kid, generateKeyPairSync('ec', { namedCurve: 'P-256' })]));

/** The provider: its discovery document and key set (the kids in `published`), or a 503 for everything while down. */
function provider(published: string[]) {
  const state = { up: true, published };
  const server = http.createServer((req, res) => {
    void (async () => {
      if (!state.up) return res.writeHead(503).end();
      const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      if (req.url === '/.well-known/openid-configuration') return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ issuer, jwks_uri: `${issuer}/keys` }));
      const jwks = await Promise.all(state.published.map(async (kid) => ({ ...(await exportJWK(keys[kid]!.publicKey)), kid, alg: 'ES256', use: 'sig' })));
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: jwks }));
    })();
  });
  return { state, server };
}

async function eventually(check: () => Promise<boolean>): Promise<void> {
  for (let attempt = 0; attempt < 100; attempt++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('condition not reached');
}

it('is ready once it has the keys, takes a new key at once; with the provider down, known keys work and an unknown one is a 503 with Retry-After within 2 s', async () => {
  const { state, server } = provider(['one']);
  state.up = false;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const sign = (kid: string) =>
    new SignJWT({ scope: ALL_SCOPES.join(' ') })
      .setProtectedHeader({ alg: 'ES256', kid })
      .setSubject('provider-client')
      .setIssuer(issuer)
      .setAudience(TEST_RULES.audience)
      .setIssuedAt()
      .setJti(randomUUID())
      .setExpirationTime('10m')
      .sign(keys[kid]!.privateKey);
  const gateway = await startGateway({
    upstreams: { users: users.url },
    guard: { authSettings: { AUTH_DISCOVERY: 'true', AUTH_ISSUER: issuer, AUTH_AUDIENCE: TEST_RULES.audience, AUTH_ALGORITHMS: 'ES256' } },
  });
  const api = client(gateway.url, { token: null });
  const withToken = async (kid: string) => ({ headers: { authorization: `Bearer ${await sign(kid)}` } });
  try {
    const unready = expectProblem(await api.get('/readyz'), 503, 'service-unavailable');
    expect(unready.detail).toBe("The identity provider's keys have not been fetched yet");

    state.up = true;
    // /readyz asks for the keys again (the cooldown allowing): ready once they came.
    await eventually(async () => (await api.get('/readyz')).status === 200);
    expect((await api.get('/api/users?limit=1', await withToken('one'))).status).toBe(200);
    // A key the provider has just begun to sign with: accepted at once, within the cooldown too.
    state.published = ['one', 'two'];
    expect((await api.get('/api/users?limit=1', await withToken('two'))).status).toBe(200);

    state.up = false;
    state.published = ['one', 'two', 'three'];
    const began = Date.now();
    const unknown = await api.get('/api/users?limit=1', await withToken('three'));
    expect(Date.now() - began).toBeLessThan(2_000);
    expectProblem(unknown, 503, 'service-unavailable');
    expect(Number(unknown.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // Tokens of the key it has (each new, so verified, not remembered) still pass; it stays ready.
    for (let i = 0; i < 5; i++) expect((await api.get('/api/users?limit=1', await withToken('one'))).status).toBe(200);
    expect((await api.get('/readyz')).status).toBe(200);

    const metrics = readMetrics(await metricsOf(gateway));
    expect(metrics.value('gateway_auth_key_fetches_total', { outcome: 'changed' })).toBe(2);
    expect(metrics.value('gateway_auth_key_fetches_total', { outcome: 'failed' })).toBeGreaterThanOrEqual(2);
  } finally {
    await gateway.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/**
 * Key rotation and outages of a real OpenID provider (scripts/idp.ts, oidc-provider), as a client
 * sees them through the gateway, which finds the provider's keys by discovery: a new signing key
 * accepted from its first token, a retired one refused once the key set's age has passed, a flood
 * of unknown keys costing the provider at most one key set fetch per cooldown, and with the
 * provider down, known keys working, an unknown one a quick 503, and the gateway still ready.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as delay } from 'node:timers/promises';
import { configSchema as gatewayConfig } from '../../gateway/src/config.js';
import { generateSigningKey, IDP_AUDIENCE, IDP_CLIENTS, startIdp, type RunningIdp, type SigningKey } from '../../scripts/idp.js';
import { countFromEnv } from '../../tools/env.js';
import { eventually } from '../support/eventually.js';
import { client, expectProblem, metricsOf, request, type TestResponse } from '../support/http.js';
import { clientCredentialsToken, signerLike } from '../support/idp-client.js';
import { readMetrics } from '../../tools/metrics.js';
import { startStack } from '../support/stack.js';

/** The key set's age past which it is fetched again: short, so that a retired key is seen to go within the test. */
const MAX_AGE_SECONDS = 2;
/** The gateway's default, which the suite keeps: the least time between two fetches. */
const COOLDOWN_MS = gatewayConfig.shape.AUTH_JWKS_COOLDOWN_MS.parse(undefined) as number;
/** How long the read load runs with the provider down (the issue asks for 30 s: `PROVIDER_OUTAGE_SECONDS=30`). */
const OUTAGE_SECONDS = countFromEnv('PROVIDER_OUTAGE_SECONDS', 10);
const READ = '/api/users?limit=1';
const SCOPE = 'users:read';

const [keyA, keyB, keyC] = [generateSigningKey(), generateSigningKey(), generateSigningKey()] as [SigningKey, SigningKey, SigningKey];
let idp: RunningIdp | undefined;
/** Where the provider listens: the kernel's pick at first, then the same port at each restart. */
let port = 0;
/** Requests for the provider's key set, over every start of it. */
let jwksRequests = 0;
let stack: Awaited<ReturnType<typeof startStack>>;

/**
 * The provider on its port with these keys (the first signs), its key set requests counted. Each
 * answer closes its connection: one kept alive, which the test and the gateway share in this
 * process, could be taken for a request in the instant between the provider's stop and the client
 * seeing the connection closed, which a restart at once makes likely.
 */
async function startProvider(signingKeys: SigningKey[]): Promise<RunningIdp> {
  const started = await startIdp({ port, signingKeys });
  started.server.on('request', (incoming: IncomingMessage, response: ServerResponse) => {
    response.setHeader('connection', 'close');
    if (incoming.url === new URL(started.jwksUri).pathname) jwksRequests++;
  });
  return started;
}

/** Stops the provider, and starts it again with these keys unless none are given. */
async function restartProvider(signingKeys: SigningKey[] = []): Promise<void> {
  await idp?.close();
  idp = undefined;
  if (signingKeys.length > 0) idp = await startProvider(signingKeys);
}

beforeAll(async () => {
  idp = await startProvider([keyA]);
  port = Number(new URL(idp.issuer).port);
  const settings = { AUTH_DISCOVERY: 'true', AUTH_ISSUER: idp.issuer, AUTH_AUDIENCE: IDP_AUDIENCE, AUTH_JWKS_MAX_AGE_SECONDS: String(MAX_AGE_SECONDS) };
  stack = await startStack({ guard: { authSettings: settings } });
});
afterAll(async () => {
  await stack?.close();
  await idp?.close();
});

/** A token from the provider as it signs now, for the first development client. */
const providerToken = () => clientCredentialsToken(idp!.tokenEndpoint, IDP_CLIENTS[0], SCOPE);
const readWith = (token: string) => request(stack.gateway.url, 'GET', READ, { token });
/** Every key set fetch the gateway counted, whatever it came to. */
const gatewayFetches = async () => readMetrics(await metricsOf(stack.gateway)).value('gateway_auth_key_fetches_total');

/** `count` requests, `concurrency` at a time, each with a new token from `token()`: the statuses seen. */
async function stream(count: number, concurrency: number, token: () => Promise<string>): Promise<number[]> {
  const statuses: number[] = [];
  const worker = async () => {
    while (statuses.length < count) {
      const slot = statuses.push(0) - 1;
      statuses[slot] = (await readWith(await token())).status;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return statuses;
}

describe('rotation', () => {
  let reusedA: string;
  const unusedA: string[] = [];

  it('takes the key the provider begins to sign with from its first token: 0 refused', async () => {
    reusedA = await providerToken();
    expect((await readWith(reusedA)).status).toBe(200);
    // Tokens of A the gateway has not seen yet, to ask once each after A is retired.
    for (let i = 0; i < 60; i++) unusedA.push(await providerToken());
    // A key nobody has: the gateway fetches the set for it, so that B's first tokens come within the cooldown.
    const stranger = await signerLike(reusedA, generateSigningKey());
    expectProblem(await readWith(await stranger(crypto.randomUUID())), 401, 'unauthorized');
    const fetchesBefore = await gatewayFetches();

    await restartProvider([keyB, keyA]);
    expect(idp!.signingKid).toBe(keyB.kid);
    // From the moment the provider is back, every request with a new token of B.
    const statuses = await stream(150, 6, providerToken);
    expect(statuses.filter((status) => status !== 200)).toEqual([]);
    // The stream began before the gateway had B: it fetched the key set during it.
    expect(await gatewayFetches()).toBeGreaterThan(fetchesBefore);
    expect((await readWith(reusedA)).status).toBe(200);
  });

  it("refuses the retired key's tokens within the key set's age, and B's keep working", async () => {
    await restartProvider([keyB]);
    const withinMs = MAX_AGE_SECONDS * 1000 + COOLDOWN_MS + 1_000;
    const tookMs = await eventually(
      async () => {
        expect((await readWith(await providerToken())).status).toBe(200);
        const status = (await readWith(unusedA.shift()!)).status;
        expect([200, 401]).toContain(status);
        return status === 401;
      },
      { withinMs, everyMs: 100 },
    );
    expect(tookMs).toBeLessThan(withinMs);
    const refused = expectProblem(await readWith(reusedA), 401, 'unauthorized');
    expect(refused.detail).toBe('No key this gateway trusts signed the access token');
    expect((await readWith(await providerToken())).status).toBe(200);
  });
});

describe('a flood of unknown keys', () => {
  it('1,000 requests in about a second, each naming another key: all 401, at most one key set fetch per cooldown', async () => {
    const sign = await signerLike(await providerToken(), generateSigningKey());
    const tokens = await Promise.all(Array.from({ length: 1_000 }, () => sign(crypto.randomUUID())));
    const [providerBefore, gatewayBefore] = [jwksRequests, await gatewayFetches()];
    const began = performance.now();
    const answers: Promise<number>[] = [];
    // Ten waves of 100, one each 100 ms: the flood spans two cooldowns at least.
    for (let wave = 0; wave < 10; wave++) {
      if (wave > 0) await delay(100);
      answers.push(...tokens.slice(wave * 100, (wave + 1) * 100).map(async (token) => (await readWith(token)).status));
    }
    const statuses = await Promise.all(answers);
    const elapsedMs = performance.now() - began;
    const providerFetches = jwksRequests - providerBefore;
    expect(providerFetches).toBeGreaterThanOrEqual(1);
    expect(providerFetches).toBeLessThanOrEqual(Math.floor(elapsedMs / COOLDOWN_MS) + 1);
    expect((await gatewayFetches()) - gatewayBefore).toBe(providerFetches);
    expect(statuses.filter((status) => status !== 401)).toEqual([]);
  });
});

describe('the provider down', () => {
  it(
    `known keys keep working under a ${OUTAGE_SECONDS} s read load, an unknown key is a 503 with Retry-After within 2 s, /readyz stays 200`,
    async () => {
      const model = await providerToken();
      const signB = await signerLike(model, keyB);
      const unknownC = await (await signerLike(model, keyC))(keyC.kid);
      await restartProvider();
      const until = performance.now() + OUTAGE_SECONDS * 1000;
      const failures: string[] = [];
      let served = 0;
      const load = async () => {
        while (performance.now() < until) {
          const response = await readWith(await signB(keyB.kid)).catch((error: Error) => ({ status: error.message }));
          if (response.status === 200) served++;
          else failures.push(String(response.status));
        }
      };
      const loading = Promise.all(Array.from({ length: 8 }, load));
      // Meanwhile, twice a second: a token of the key the provider will begin with, and /readyz.
      const probes: { refused: TestResponse; ms: number; ready: number }[] = [];
      while (performance.now() < until) {
        const began = performance.now();
        const refused = await readWith(unknownC);
        const ms = performance.now() - began;
        const ready = (await client(stack.gateway.url, { token: null }).get('/readyz')).status;
        probes.push({ refused, ms, ready });
        await delay(500);
      }
      await loading;
      expect(failures).toEqual([]);
      expect(served).toBeGreaterThan(OUTAGE_SECONDS * 10);
      expect(probes.length).toBeGreaterThanOrEqual(OUTAGE_SECONDS);
      for (const { refused, ready } of probes) {
        expectProblem(refused, 503, 'service-unavailable');
        expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        expect(ready).toBe(200);
      }
      expect(Math.max(...probes.map(({ ms }) => ms))).toBeLessThan(2_000);

      await restartProvider([keyC, keyB]);
      await eventually(async () => (await readWith(unknownC)).status === 200, { withinMs: COOLDOWN_MS + 2_000 });
    },
    OUTAGE_SECONDS * 1000 + 30_000,
  );
});

import { generateKeyPairSync, type KeyObject, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, SignJWT } from 'jose';
import type { Logger } from '@app/shared/platform/logger';
import { CLAIM_PRESETS } from '../../src/auth/claims.js';
import { type Clock, KeysUnavailable, RemoteKeySet, type RemoteKeySettings } from '../../src/auth/key-source.js';
import type { KeyFetchOutcome } from '../../src/auth/metrics.js';
import { InvalidToken, TokenVerifier } from '../../src/auth/tokens.js';
import { configSchema } from '../../src/config.js';

const rules = { issuer: 'https://issuer.test', audience: 'api', algorithms: ['ES256'], clockToleranceSeconds: 30, maxLifetimeSeconds: 86_400, claims: CLAIM_PRESETS.generic };
const COOLDOWN_MS = 500;
const MAX_AGE_MS = 60_000;

/** A clock the test moves: `sleep` ends only when `advance` passes its end. */
class FakeClock implements Clock {
  #now = 1_000_000;
  #sleepers: { until: number; wake: () => void }[] = [];
  #onSleep: (() => void) | undefined;

  now = () => this.#now;

  sleep(ms: number): Promise<void> {
    this.#onSleep?.();
    return new Promise((wake) => this.#sleepers.push({ until: this.#now + ms, wake }));
  }

  get sleeping(): number {
    return this.#sleepers.length;
  }

  /** Resolves once something sleeps on this clock (now, if something already does). */
  untilSleeping(): Promise<void> {
    return this.#sleepers.length > 0 ? Promise.resolve() : new Promise((resolve) => (this.#onSleep = resolve));
  }

  advance(ms: number): void {
    this.#now += ms;
    const due = this.#sleepers.filter(({ until }) => until <= this.#now);
    this.#sleepers = this.#sleepers.filter((sleeper) => !due.includes(sleeper));
    for (const { wake } of due) wake();
  }
}

type Behaviour = 'up' | 'down' | 'hang' | 'drip' | 'redirect' | 'huge';

/** An identity provider on 127.0.0.1: its discovery document and key set, answering as `behaviour` says. */
class Provider {
  readonly keys: { kid: string; privateKey: KeyObject; publicKey: KeyObject }[] = [];
  behaviour: Behaviour = 'up';
  /** The key set's fetches. */
  fetches = 0;
  discoveredIssuer: string | undefined;
  /** While set, the key set is answered as it was when asked, once `release` resolves; `reached` is called when asked. */
  held: { reached: () => void; release: Promise<void> } | undefined;
  readonly #server = http.createServer((req, res) => void this.#answer(req, res));

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  addKey(kid: string): void {
    this.keys.push({ kid, ...generateKeyPairSync('ec', { namedCurve: 'P-256' }) });
  }

  retire(kid: string): void {
    this.keys.splice(this.keys.findIndex((key) => key.kid === kid), 1);
  }

  async stop(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise((resolve) => this.#server.close(resolve));
  }

  async #answer(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    if (this.behaviour === 'hang') return;
    if (this.behaviour === 'down') return void res.writeHead(503).end();
    if (this.behaviour === 'redirect') return void res.writeHead(302, { location: `${this.url}/elsewhere` }).end();
    if (req.url?.endsWith('/.well-known/openid-configuration')) {
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ issuer: this.discoveredIssuer, jwks_uri: `${this.url}/jwks.json` }));
    }
    this.fetches++;
    if (this.behaviour === 'drip') return void res.writeHead(200, { 'content-type': 'application/json' }).write('{"keys": [');
    const keys = await Promise.all(this.keys.map(async ({ kid, publicKey }) => ({ ...(await exportJWK(publicKey)), kid, alg: 'ES256' })));
    const body = JSON.stringify({ keys, ...(this.behaviour === 'huge' ? { padding: 'x'.repeat(100_000) } : {}) });
    if (this.held) {
      this.held.reached();
      await this.held.release;
    }
    // Chunked (no Content-Length) when huge: the cap must hold while reading, not only on the header.
    if (this.behaviour === 'huge') res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    res.end(body);
  }
}

function sign(key: KeyObject, kid: string): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({}).setProtectedHeader({ alg: 'ES256', kid }).setSubject('alice').setIssuer(rules.issuer).setAudience(rules.audience).setIssuedAt(now).setJti(randomUUID()).setExpirationTime(now + 600).sign(key);
}

let provider: Provider;
let clock: FakeClock;
let outcomes: KeyFetchOutcome[];
let logged: { level: string; fields: Record<string, unknown>; message: string }[];
const logger = {
  info: (fields: Record<string, unknown>, message: string) => logged.push({ level: 'info', fields, message }),
  warn: (fields: Record<string, unknown>, message: string) => logged.push({ level: 'warn', fields, message }),
} as unknown as Logger;

beforeEach(async () => {
  provider = new Provider();
  await provider.start();
  provider.addKey('one');
  clock = new FakeClock();
  outcomes = [];
  logged = [];
});
afterEach(() => provider.stop());

function keySet(settings: Partial<RemoteKeySettings> = {}): { keys: RemoteKeySet; verify: (token: string) => Promise<unknown> } {
  const base = { location: { jwksUrl: `${provider.url}/jwks.json` }, cooldownMs: COOLDOWN_MS, maxAgeMs: MAX_AGE_MS, timeoutMs: 1_000, maxBytes: 65_536, maxKeys: 10, maxWaiting: 2_000 };
  const given = Object.fromEntries(Object.entries(settings).filter(([, value]) => value !== undefined));
  const keys = new RemoteKeySet({ ...base, ...given }, { clock, logger, onFetch: (outcome) => outcomes.push(outcome) });
  const verifier = new TokenVerifier({ remote: keys }, rules);
  return { keys, verify: (token) => verifier.verify(`Bearer ${token}`) };
}

const tokenOf = (kid: string) => sign(provider.keys.find((key) => key.kid === kid)!.privateKey, kid);
const NO_KEY = 'No key this gateway trusts signed the access token';

describe('key rotation', () => {
  it('accepts a new key from the moment it signs, inside the cooldown, by waiting for the next fetch', async () => {
    const { verify } = keySet();
    expect(await verify(await tokenOf('one'))).toMatchObject({ subject: 'alice' });
    provider.addKey('two');
    const rotated = verify(await tokenOf('two'));
    await clock.untilSleeping();
    expect(provider.fetches).toBe(1);
    clock.advance(COOLDOWN_MS);
    expect(await rotated).toMatchObject({ subject: 'alice' });
    expect(provider.fetches).toBe(2);
    expect(outcomes).toEqual(['changed', 'changed']);
    expect(logged).toContainEqual({ level: 'info', fields: { added: ['two'], removed: [], keys: 2 }, message: 'the key set changed' });
  });

  it('does not refuse a new key on the word of a fetch that began before the token arrived', async () => {
    const { verify } = keySet();
    await verify(await tokenOf('one'));
    clock.advance(COOLDOWN_MS);
    let reached!: () => void;
    let release!: () => void;
    const asked = new Promise<void>((resolve) => (reached = resolve));
    provider.held = { reached, release: new Promise<void>((resolve) => (release = resolve)) };
    // A token of a key nobody publishes begins a fetch, held by the provider with the set as it was.
    const stranger = verify(await sign(generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey, 'stranger'));
    await asked;
    provider.held = undefined;
    provider.addKey('two');
    const rotated = verify(await tokenOf('two'));
    release();
    await expect(stranger).rejects.toEqual(new InvalidToken(NO_KEY));
    await clock.untilSleeping();
    clock.advance(COOLDOWN_MS);
    expect(await rotated).toMatchObject({ subject: 'alice' });
    expect(provider.fetches).toBe(3);
  });

  it('refuses a retired key once it has left the set and the set is older than its max age', async () => {
    const { verify } = keySet();
    await verify(await tokenOf('one'));
    const retiredKey = provider.keys[0]!.privateKey;
    provider.addKey('two');
    provider.retire('one');
    clock.advance(MAX_AGE_MS - 1);
    expect(await verify(await sign(retiredKey, 'one'))).toMatchObject({ subject: 'alice' });
    expect(provider.fetches).toBe(1);
    clock.advance(1);
    await expect(verify(await sign(retiredKey, 'one'))).rejects.toEqual(new InvalidToken(NO_KEY));
    expect(provider.fetches).toBe(2);
    expect(await verify(await tokenOf('two'))).toMatchObject({ subject: 'alice' });
    expect(logged).toContainEqual(expect.objectContaining({ fields: { added: ['two'], removed: ['one'], keys: 1 } }));
  });

  it('costs a flood of 1,000 unknown kids one fetch per cooldown, and refuses them with 401 naming no key', async () => {
    const { verify } = keySet();
    await verify(await tokenOf('one'));
    const stranger = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    for (let round = 1; round <= 3; round++) {
      const tokens = await Promise.all(Array.from({ length: 1_000 }, () => sign(stranger, randomUUID())));
      const flood = Promise.allSettled(tokens.map(verify));
      await clock.untilSleeping();
      clock.advance(COOLDOWN_MS);
      const settled = await flood;
      expect(settled.every((result) => result.status === 'rejected' && result.reason instanceof InvalidToken && result.reason.message === NO_KEY)).toBe(true);
      expect(provider.fetches).toBe(1 + round);
    }
  });

  it('bounds the requests waiting for a fetch: those beyond are 503 at once', async () => {
    const { verify } = keySet({ maxWaiting: 10 });
    await verify(await tokenOf('one'));
    const stranger = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    const tokens = await Promise.all(Array.from({ length: 25 }, () => sign(stranger, randomUUID())));
    const flood = Promise.allSettled(tokens.map(verify));
    await clock.untilSleeping();
    clock.advance(COOLDOWN_MS);
    const reasons = (await flood).map((result) => (result.status === 'rejected' ? (result.reason as Error).name : 'accepted'));
    expect(reasons.filter((name) => name === 'InvalidToken')).toHaveLength(10);
    expect(reasons.filter((name) => name === 'KeysUnavailable')).toHaveLength(15);
    expect(provider.fetches).toBe(2);
  });
});

describe('the provider down', () => {
  it('keeps the last good set however long (past its max age), and answers an unknown kid with KeysUnavailable at once', async () => {
    const { keys, verify } = keySet();
    await verify(await tokenOf('one'));
    provider.behaviour = 'down';
    provider.addKey('two');
    // The first token needing a fetch waits for the cooldown, then for the fetch, which fails.
    const first = verify(await tokenOf('two'));
    await clock.untilSleeping();
    clock.advance(COOLDOWN_MS);
    await expect(first).rejects.toBeInstanceOf(KeysUnavailable);
    // Until the cooldown has passed, the next ones fail at once: nothing sleeps, the clock stands still.
    await expect(verify(await tokenOf('two'))).rejects.toMatchObject({ name: 'KeysUnavailable', retryAfterSeconds: 1 });
    expect(clock.sleeping).toBe(0);
    // Past its max age, each request goes on with the set, without waiting for the fetch it begins.
    for (let hour = 1; hour <= 3; hour++) {
      clock.advance(3_600_000);
      expect(await verify(await tokenOf('one'))).toMatchObject({ subject: 'alice' });
      await keys.refresh();
    }
    expect(outcomes).toEqual(['changed', 'failed', 'failed', 'failed', 'failed']);
    const failed = { level: 'warn', message: 'fetching the key set failed', fields: expect.objectContaining({ location: { jwksUrl: `${provider.url}/jwks.json` } }) };
    expect(logged.filter(({ level }) => level === 'warn')).toEqual(Array(4).fill(failed));
    provider.behaviour = 'up';
    clock.advance(COOLDOWN_MS);
    expect(await verify(await tokenOf('two'))).toMatchObject({ subject: 'alice' });
  });

  it('gives up on a provider that does not answer within the timeout', async () => {
    const { verify } = keySet({ timeoutMs: 200 });
    provider.behaviour = 'hang';
    const refused = verify(await tokenOf('one'));
    await expect(refused).rejects.toBeInstanceOf(KeysUnavailable);
    await expect(refused).rejects.toMatchObject({ cause: { message: 'no whole answer within 200 ms' } });
  });

  it('by default answers a token that needs a fetch within 2 s: the cooldown and the timeout together are less', () => {
    const { AUTH_JWKS_COOLDOWN_MS, AUTH_JWKS_TIMEOUT_MS } = configSchema.parse({});
    expect(AUTH_JWKS_COOLDOWN_MS + AUTH_JWKS_TIMEOUT_MS).toBeLessThan(2_000);
  });
});

describe('readiness', () => {
  it('is not ready until a set was fetched, starts a fetch when asked, and stays ready through an outage', async () => {
    provider.behaviour = 'down';
    const { keys, verify } = keySet();
    expect(keys.unreadyReason()).toBe("The identity provider's keys have not been fetched yet");
    await expect(verify(await tokenOf('one'))).rejects.toBeInstanceOf(KeysUnavailable);
    expect(keys.unreadyReason()).toBe("The identity provider's keys have not been fetched yet");
    provider.behaviour = 'up';
    clock.advance(COOLDOWN_MS);
    keys.unreadyReason();
    await verify(await tokenOf('one'));
    expect(keys.unreadyReason()).toBeUndefined();
    provider.behaviour = 'down';
    clock.advance(MAX_AGE_MS);
    await verify(await tokenOf('one'));
    expect(keys.unreadyReason()).toBeUndefined();
  });
});

describe('discovery', () => {
  it("reads the JWKS URL from the issuer's discovery document, the issuer's trailing slash dropped", async () => {
    const issuer = `${provider.url}/realms/test/`;
    provider.discoveredIssuer = issuer;
    const { verify } = keySet({ location: { issuer } });
    expect(await verify(await tokenOf('one'))).toMatchObject({ subject: 'alice' });
  });

  it('refuses a document naming another issuer than the configured one, exactly', async () => {
    const issuer = `${provider.url}/realms/test`;
    provider.discoveredIssuer = `${issuer}/`;
    const { verify } = keySet({ location: { issuer } });
    const refused = verify(await tokenOf('one'));
    await expect(refused).rejects.toBeInstanceOf(KeysUnavailable);
    await expect(refused).rejects.toMatchObject({ cause: { message: expect.stringContaining(`its issuer is "${issuer}/", not "${issuer}" (AUTH_ISSUER)`) } });
    expect(provider.fetches).toBe(0);
  });
});

describe('a fetch is bounded', () => {
  const cases: [string, { behaviour: Behaviour; maxBytes?: number; extraKeys?: number }, string][] = [
    ['larger than the cap, without a Content-Length', { behaviour: 'huge' }, 'larger than 65536 bytes'],
    ['larger than the cap, as its Content-Length says', { behaviour: 'up', maxBytes: 1_024, extraKeys: 8 }, 'larger than 1024 bytes'],
    ['holding more keys than the cap', { behaviour: 'up', extraKeys: 10 }, '11 keys, more than 10'],
    ['a redirect, not followed', { behaviour: 'redirect' }, 'answered 302'],
  ];
  it.each(cases)('refuses a key set %s', async (_case, { behaviour, maxBytes, extraKeys }, message) => {
    for (let i = 0; i < (extraKeys ?? 0); i++) provider.addKey(`extra-${i}`);
    provider.behaviour = behaviour;
    const refused = keySet({ maxBytes }).verify(await tokenOf('one'));
    await expect(refused).rejects.toBeInstanceOf(KeysUnavailable);
    await expect(refused).rejects.toMatchObject({ cause: { message: expect.stringContaining(message) } });
  });

  it('stops reading a response that trickles in once the timeout has passed', async () => {
    provider.behaviour = 'drip';
    const refused = keySet({ timeoutMs: 200 }).verify(await tokenOf('one'));
    await expect(refused).rejects.toMatchObject({ name: 'KeysUnavailable', cause: { message: 'no whole answer within 200 ms' } });
  });
});

import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, SignJWT } from 'jose';
import { InvalidToken, type KeySource, KeysUnavailable, TokenVerifier } from '../src/auth/tokens.js';

const rules = { issuer: 'https://issuer.test', audience: 'api', algorithms: ['ES256'], clockToleranceSeconds: 30, maxLifetimeSeconds: 86_400 };

/** When `sign` issues its tokens, in seconds (`iat`). */
const now = Math.floor(Date.now() / 1000);

function sign(key: KeyObject, options: { kid?: string; expiresIn?: number } = {}) {
  return new SignJWT({ scope: 'users:read' })
    .setProtectedHeader({ alg: 'ES256', ...(options.kid ? { kid: options.kid } : {}) })
    .setSubject('alice')
    .setIssuer(rules.issuer)
    .setAudience(rules.audience)
    .setIssuedAt(now)
    .setExpirationTime(now + (options.expiresIn ?? 3600))
    .sign(key);
}

describe('TokenVerifier', () => {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });

  it('remembers a verified token until it expires, and never a refused one', async () => {
    const verifier = new TokenVerifier({ publicKey }, rules);
    const header = `Bearer ${await sign(privateKey)}`;
    expect(verifier.remembered(header)).toBeUndefined();
    const alice = { subject: 'alice', forwardedSubject: 'alice', caller: 'sub:alice', scopes: new Set(['users:read']), tokenId: undefined, issuedAt: now * 1000 };
    expect(await verifier.verify(header)).toStrictEqual(alice);
    expect(verifier.remembered(header)).toStrictEqual(alice);
    // Expired 10 s ago: still inside the clock tolerance, so accepted, but not remembered.
    const almostExpired = `Bearer ${await sign(privateKey, { expiresIn: -10 })}`;
    await verifier.verify(almostExpired);
    expect(verifier.remembered(almostExpired)).toBeUndefined();
    const expired = `Bearer ${await sign(privateKey, { expiresIn: -120 })}`;
    await expect(verifier.verify(expired)).rejects.toThrow(InvalidToken);
    expect(verifier.remembered(expired)).toBeUndefined();
  });

  it('forgets a remembered token once it has expired', async () => {
    let now = Date.now();
    const verifier = new TokenVerifier({ publicKey }, rules, () => now);
    const token = await sign(privateKey, { expiresIn: 60 });
    const expiresAt = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).exp * 1000;
    const header = `Bearer ${token}`;
    await verifier.verify(header);
    now = expiresAt - 1;
    expect(verifier.remembered(header)).toMatchObject({ subject: 'alice' });
    now = expiresAt;
    expect(verifier.remembered(header)).toBeUndefined();
    // Forgotten, not just hidden: the clock turned back does not bring it back.
    now = expiresAt - 1;
    expect(verifier.remembered(header)).toBeUndefined();
  });

  it('remembers only the very header it verified, not one that ends the same', async () => {
    const verifier = new TokenVerifier({ publicKey }, rules);
    const token = await sign(privateKey);
    await verifier.verify(`Bearer ${token}`);
    const [header, payload, signature] = token.split('.');
    // Another payload with the verified token's signature: the same last characters, not its header.
    const forged = `Bearer ${header}.${payload}x.${signature}`;
    expect(verifier.remembered(forged)).toBeUndefined();
    await expect(verifier.verify(forged)).rejects.toThrow(InvalidToken);
    expect(verifier.remembered(`Bearer ${token}`)).toMatchObject({ subject: 'alice' });
    expect(await verifier.verify(`Basic ${token}`)).toBeUndefined();
  });

  it('answers a remembered header from memory, with the principal it verified', async () => {
    const verifier = new TokenVerifier({ publicKey }, rules);
    const header = `Bearer ${await sign(privateKey)}`;
    const principal = await verifier.verify(header);
    expect(await verifier.verify(header)).toBe(principal);
  });

  it('reads the token of a Bearer header with any case and spaces, and no other header', async () => {
    const verifier = new TokenVerifier({ publicKey }, rules);
    const token = await sign(privateKey);
    expect(await verifier.verify(`bearer   ${token}  `)).toMatchObject({ subject: 'alice' });
    expect(await verifier.verify(`XBearer ${token}`)).toBeUndefined();
    expect(await verifier.verify(`Bearer ${token} ${token}`)).toBeUndefined();
  });

  it('takes the scopes apart at any number of spaces', async () => {
    const verifier = new TokenVerifier({ publicKey }, rules);
    const token = await new SignJWT({ scope: ' users:read  users:write ' })
      .setProtectedHeader({ alg: 'ES256' })
      .setSubject('alice')
      .setIssuer(rules.issuer)
      .setAudience(rules.audience)
      .setIssuedAt()
      .setExpirationTime('1h')
      .sign(privateKey);
    expect((await verifier.verify(`Bearer ${token}`))?.scopes).toEqual(new Set(['users:read', 'users:write']));
    const unscoped = await new SignJWT({}).setProtectedHeader({ alg: 'ES256' }).setSubject('bob').setIssuer(rules.issuer).setAudience(rules.audience).setIssuedAt().setExpirationTime('1h').sign(privateKey);
    expect((await verifier.verify(`Bearer ${unscoped}`))?.scopes).toEqual(new Set());
  });

  it("carries the token's id (jti) and issue time, for revocations", async () => {
    const verifier = new TokenVerifier({ publicKey }, rules);
    const token = await new SignJWT({}).setProtectedHeader({ alg: 'ES256' }).setSubject('bob').setIssuer(rules.issuer).setAudience(rules.audience).setJti('t-1').setIssuedAt(now - 60).setExpirationTime(now + 600).sign(privateKey);
    expect(await verifier.verify(`Bearer ${token}`)).toMatchObject({ tokenId: 't-1', issuedAt: (now - 60) * 1000 });
  });

  it('accepts a subject of up to 255 characters, what a record keeps as its owner', async () => {
    const subject = 'a'.repeat(255);
    const token = await new SignJWT({}).setProtectedHeader({ alg: 'ES256' }).setSubject(subject).setIssuer(rules.issuer).setAudience(rules.audience).setIssuedAt(now).setExpirationTime(now + 600).sign(privateKey);
    expect((await new TokenVerifier({ publicKey }, rules).verify(`Bearer ${token}`))?.subject).toBe(subject);
  });

  it('says why it refuses a token, in words the client can act on', async () => {
    const other = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const p384 = generateKeyPairSync('ec', { namedCurve: 'P-384' });
    const claims = (payload: Record<string, unknown> = {}) =>
      new SignJWT({ sub: 'alice', iss: rules.issuer, aud: rules.audience, iat: now, exp: now + 600, ...payload }).setProtectedHeader({ alg: 'ES256' });
    const cases: [string, string, KeySource?][] = [
      [await sign(privateKey, { expiresIn: -120 }), 'The access token has expired'],
      [await claims({ nbf: Math.floor(Date.now() / 1000) + 600 }).sign(privateKey), 'The access token is not valid yet'],
      [await claims({ aud: 'elsewhere' }).sign(privateKey), "The access token's aud claim is not accepted here"],
      [await claims({ exp: undefined }).sign(privateKey), 'The access token has no exp claim'],
      [await claims({ iat: undefined }).sign(privateKey), 'The access token has no iat claim'],
      [await claims({ iat: 'then' }).sign(privateKey), "The access token's iat claim is not accepted here"],
      [await claims({ exp: now + 86_401 }).sign(privateKey), 'The access token lives longer than this gateway accepts'],
      [await claims({ sub: '' }).sign(privateKey), "The access token's sub claim is not accepted here"],
      [await claims({ sub: 'a\uD800' }).sign(privateKey), "The access token's sub claim is not accepted here"],
      [await claims({ sub: 'a'.repeat(256) }).sign(privateKey), "The access token's sub claim is not accepted here"],
      [await new SignJWT({ sub: 'alice' }).setProtectedHeader({ alg: 'ES384' }).sign(p384.privateKey), "The access token's signature algorithm is not accepted"],
      [await sign(other.privateKey), "The access token's signature is not valid"],
      [await sign(privateKey, { kid: 'two' }), 'No key this gateway trusts signed the access token', { publicKey: { keys: [{ ...publicKey.export({ format: 'jwk' }), kid: 'one' }] } }],
      ['e30.e30.e30', 'The access token is malformed'],
    ];
    for (const [token, message, source] of cases) {
      const refused = new TokenVerifier(source ?? { publicKey }, rules).verify(`Bearer ${token}`);
      await expect(refused).rejects.toThrow(InvalidToken);
      await expect(refused).rejects.toMatchObject({ name: 'InvalidToken', message });
    }
  });

  it('fetches a JWKS once, again for an unknown kid, and not more than once per cooldown', async () => {
    const keys = [{ kid: 'one', ...generateKeyPairSync('ec', { namedCurve: 'P-256' }) }];
    let fetches = 0;
    const server = http.createServer(async (_req, res) => {
      fetches++;
      const jwks = { keys: await Promise.all(keys.map(async ({ kid, publicKey: key }) => ({ ...(await exportJWK(key)), kid, alg: 'ES256' }))) };
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(jwks));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const cooldownMs = 300;
      const verifier = new TokenVerifier({ jwksUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks.json`, refetchCooldownMs: cooldownMs }, rules);
      await verifier.verify(`Bearer ${await sign(keys[0]!.privateKey, { kid: 'one' })}`);
      await verifier.verify(`Bearer ${await sign(keys[0]!.privateKey, { kid: 'one', expiresIn: 1800 })}`);
      expect(fetches).toBe(1);
      // A key rotated in: within the cooldown, tokens naming an unknown kid are refused without a fetch...
      keys.push({ kid: 'two', ...generateKeyPairSync('ec', { namedCurve: 'P-256' }) });
      const rotated = `Bearer ${await sign(keys[1]!.privateKey, { kid: 'two' })}`;
      await expect(verifier.verify(rotated)).rejects.toThrow(InvalidToken);
      await expect(verifier.verify(`Bearer ${await sign(keys[1]!.privateKey, { kid: 'unknown' })}`)).rejects.toThrow(InvalidToken);
      expect(fetches).toBe(1);
      // ...and after it, the first such token makes the verifier fetch the set again and finds the key.
      await new Promise((resolve) => setTimeout(resolve, cooldownMs + 50));
      expect(await verifier.verify(rotated)).toMatchObject({ subject: 'alice' });
      expect(fetches).toBe(2);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('a token whose header names another allowed algorithm than the key is for', () => {
  const algorithms = ['RS256', 'PS256', 'ES256', 'ES384', 'EdDSA', 'Ed25519'];
  const allowed = { ...rules, algorithms };
  const keys = {
    ES256: generateKeyPairSync('ec', { namedCurve: 'P-256' }),
    RS256: generateKeyPairSync('rsa', { modulusLength: 2048 }),
    EdDSA: generateKeyPairSync('ed25519'),
  };
  const base64url = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const cases = Object.entries(keys).flatMap(([keyAlg, key]) => algorithms.filter((alg) => alg !== keyAlg && !(keyAlg === 'EdDSA' && alg === 'Ed25519') && !(keyAlg === 'RS256' && alg === 'PS256')).map((alg) => [alg, keyAlg, key] as const));

  it.each(cases)('%s against a %s key (alone, and in a key set) is an invalid token, never "keys unavailable"', async (alg, keyAlg, key) => {
    const signed = await new SignJWT({}).setProtectedHeader({ alg: keyAlg }).setSubject('mallory').setIssuer(rules.issuer).setAudience(rules.audience).setIssuedAt(now).setExpirationTime(now + 600).sign(key.privateKey);
    const [, claims, signature] = signed.split('.');
    const forged = `Bearer ${base64url({ alg, typ: 'JWT' })}.${claims}.${signature}`;
    for (const source of [{ publicKey: key.publicKey }, { publicKey: { keys: [key.publicKey.export({ format: 'jwk' })] } }]) {
      await expect(new TokenVerifier(source, allowed).verify(forged)).rejects.toThrow(InvalidToken);
    }
  });

  it('while a key set that cannot be had (unreachable, or not a 200) is "keys unavailable"', async () => {
    const server = http.createServer((_req, res) => res.writeHead(500).end());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    const token = `Bearer ${await sign(keys.ES256.privateKey)}`;
    try {
      const refused = new TokenVerifier({ jwksUrl: `http://127.0.0.1:${port}/jwks.json` }, allowed).verify(token);
      await expect(refused).rejects.toThrow(KeysUnavailable);
      // Named for the log, with what failed as its cause.
      await expect(refused).rejects.toMatchObject({ name: 'KeysUnavailable', message: 'The keys to verify access tokens are unavailable', cause: expect.any(Error) });
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
    await expect(new TokenVerifier({ jwksUrl: `http://127.0.0.1:${port}/jwks.json` }, allowed).verify(token)).rejects.toThrow(KeysUnavailable);
  });
});

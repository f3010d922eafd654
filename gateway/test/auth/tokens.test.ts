import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SignJWT } from 'jose';
import { CLAIM_PRESETS } from '../../src/auth/claims.js';
import { type KeySource, KeysUnavailable, RemoteKeySet } from '../../src/auth/key-source.js';
import { InvalidToken, REMEMBERED_TOKEN_BYTES, TokenVerifier } from '../../src/auth/tokens.js';

const rules = { issuer: 'https://issuer.test', audience: 'api', algorithms: ['ES256'], clockToleranceSeconds: 30, maxLifetimeSeconds: 86_400, claims: CLAIM_PRESETS.generic };

/** When `sign` issues its tokens, in seconds (`iat`). */
const now = Math.floor(Date.now() / 1000);

function sign(key: KeyObject, options: { kid?: string; expiresIn?: number } = {}) {
  return new SignJWT({ scope: 'users:read' })
    .setProtectedHeader({ alg: 'ES256', ...(options.kid ? { kid: options.kid } : {}) })
    .setSubject('alice')
    .setIssuer(rules.issuer)
    .setAudience(rules.audience)
    .setIssuedAt(now)
    .setJti('alice-1')
    .setExpirationTime(now + (options.expiresIn ?? 3600))
    .sign(key);
}

/** A token with these claims (`sub`, `iss`, `aud`, `jti`, `iat` and `exp` a valid one would have, unless given), signed with `key`. */
const claims = (key: KeyObject, payload: Record<string, unknown> = {}) =>
  new SignJWT({ sub: 'alice', iss: rules.issuer, aud: rules.audience, jti: 'alice-2', iat: now, exp: now + 600, ...payload }).setProtectedHeader({ alg: 'ES256' }).sign(key);

describe('TokenVerifier', () => {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });

  it('remembers a verified token until it expires, and never a refused one', async () => {
    const verifier = new TokenVerifier({ publicKey }, rules);
    const header = `Bearer ${await sign(privateKey)}`;
    expect(verifier.remembered(header)).toBeUndefined();
    const alice = { subject: 'alice', forwardedSubject: 'alice', caller: 'sub:alice', scopes: new Set(['users:read']), tokenId: 'alice-1', issuedAt: now * 1000 };
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

  it('remembers tokens up to a bound on their bytes too, forgetting the least recently used first', async () => {
    const verifier = new TokenVerifier({ publicKey }, rules);
    // Each header a little over a tenth of the bound: ten fit, not sixteen.
    const pad = 'x'.repeat(Math.ceil(REMEMBERED_TOKEN_BYTES / 14));
    const headers: string[] = [];
    for (let n = 0; n < 16; n++) {
      headers.push(`Bearer ${await claims(privateKey, { jti: `big-${n}`, pad })}`);
      await verifier.verify(headers.at(-1)!);
    }
    expect(verifier.remembered(headers[0]!)).toBeUndefined();
    expect(verifier.remembered(headers[15]!)).toMatchObject({ tokenId: 'big-15' });
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
    const token = await claims(privateKey, { scope: ' users:read  users:write ' });
    expect((await verifier.verify(`Bearer ${token}`))?.scopes).toEqual(new Set(['users:read', 'users:write']));
    const unscoped = await claims(privateKey, { sub: 'bob' });
    expect((await verifier.verify(`Bearer ${unscoped}`))?.scopes).toEqual(new Set());
  });

  it("carries the token's id (jti) and issue time, for revocations", async () => {
    const verifier = new TokenVerifier({ publicKey }, rules);
    const token = await claims(privateKey, { sub: 'bob', jti: 't-1', iat: now - 60 });
    expect(await verifier.verify(`Bearer ${token}`)).toMatchObject({ tokenId: 't-1', issuedAt: (now - 60) * 1000 });
  });

  it('accepts a subject of up to 255 characters, what a record keeps as its owner', async () => {
    const subject = 'a'.repeat(255);
    const token = await claims(privateKey, { sub: subject });
    expect((await new TokenVerifier({ publicKey }, rules).verify(`Bearer ${token}`))?.subject).toBe(subject);
  });

  it("bounds a token by the gateway's clock: an iat at most the tolerance ahead, so no exp further than the longest life", async () => {
    let clock = now * 1000;
    const verifier = new TokenVerifier({ publicKey }, rules, () => clock);
    const ahead = (seconds: number) => claims(privateKey, { jti: `ahead-${seconds}`, iat: now + seconds, exp: now + seconds + 600 });
    expect(await verifier.verify(`Bearer ${await ahead(30)}`)).toMatchObject({ issuedAt: (now + 30) * 1000 });
    const tooFar = `Bearer ${await ahead(31)}`;
    await expect(verifier.verify(tooFar)).rejects.toMatchObject({ message: 'The access token was issued in the future (its iat is later than now)' });
    // The same token, once the clock has come within the tolerance of its iat.
    clock += 1_000;
    expect(await verifier.verify(tooFar)).toMatchObject({ issuedAt: (now + 31) * 1000 });
  });

  it("refuses any other spelling of a token's signature than base64url's own", async () => {
    const verifier = new TokenVerifier({ publicKey }, rules);
    const token = await sign(privateKey);
    const signature = token.slice(token.lastIndexOf('.') + 1);
    // 64 bytes are 86 characters, the last holding 2 bits and 4 unused ones: set one, or pad.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const last = alphabet.indexOf(signature.at(-1)!);
    const otherBits = `${token.slice(0, -1)}${alphabet[last ^ 1]}`;
    expect(Buffer.from(otherBits.slice(otherBits.lastIndexOf('.') + 1), 'base64url')).toEqual(Buffer.from(signature, 'base64url'));
    for (const spelling of [otherBits, `${token}==`]) {
      await expect(verifier.verify(`Bearer ${spelling}`)).rejects.toMatchObject({ name: 'InvalidToken', message: "The access token's signature is not in base64url's one spelling" });
    }
    expect(await verifier.verify(`Bearer ${token}`)).toMatchObject({ subject: 'alice' });
  });

  it('says why it refuses a token, in words the client can act on', async () => {
    const other = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const p384 = generateKeyPairSync('ec', { namedCurve: 'P-384' });
    const signed = (payload: Record<string, unknown>) => claims(privateKey, payload);
    const cases: [string, string, KeySource?][] = [
      [await sign(privateKey, { expiresIn: -120 }), 'The access token has expired'],
      [await signed({ nbf: Math.floor(Date.now() / 1000) + 600 }), 'The access token is not valid yet'],
      [await signed({ aud: 'elsewhere' }), "The access token's aud claim is not accepted here"],
      [await signed({ exp: undefined }), 'The access token has no exp claim'],
      [await signed({ iat: undefined }), 'The access token has no iat claim'],
      [await signed({ iat: 'then' }), "The access token's iat claim is not accepted here"],
      [await signed({ exp: now + 86_401 }), 'The access token lives longer than this gateway accepts'],
      [await signed({ iat: now + 120 }), 'The access token was issued in the future (its iat is later than now)'],
      // Ten years ahead, with a life of a minute: a token bounded only by its own claims.
      [await signed({ iat: now + 315_360_000 - 60, exp: now + 315_360_000 }), 'The access token was issued in the future (its iat is later than now)'],
      [await signed({ iat: 1e15, exp: 1e15 }), 'The access token was issued in the future (its iat is later than now)'],
      [await signed({ jti: undefined }), 'The access token has no jti claim'],
      [await signed({ jti: '' }), "The access token's jti claim is not a string of 1 to 255 characters"],
      [await signed({ jti: 7 }), "The access token's jti claim is not a string of 1 to 255 characters"],
      [await signed({ jti: 'j'.repeat(256) }), "The access token's jti claim is not a string of 1 to 255 characters"],
      [await signed({ sub: '' }), "The access token's sub claim is not a string of 1 to 255 characters"],
      [await signed({ sub: 'a'.repeat(256) }), "The access token's sub claim is not a string of 1 to 255 characters"],
      [await signed({ sub: 'a\uD800' }), "The access token's sub claim holds a lone surrogate"],
      [await signed({ sub: 'al\u0085ice' }), "The access token's sub claim holds a control character"],
      [await signed({ sub: 'alice ' }), "The access token's sub claim begins or ends with white space"],
      [await signed({ sub: 'cafe\u0301' }), "The access token's sub claim is not in Unicode NFC"],
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
});

/** An identity provider's key set at `jwksUrl`, with bounds a test never meets. */
const remoteKeys = (jwksUrl: string) => new RemoteKeySet({ location: { jwksUrl }, cooldownMs: 500, maxAgeMs: 600_000, timeoutMs: 1_000, maxBytes: 65_536, maxKeys: 10, maxWaiting: 10 });

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
      const refused = new TokenVerifier({ remote: remoteKeys(`http://127.0.0.1:${port}/jwks.json`) }, allowed).verify(token);
      await expect(refused).rejects.toThrow(KeysUnavailable);
      // Named for the log, with what failed as its cause.
      await expect(refused).rejects.toMatchObject({ name: 'KeysUnavailable', message: 'The keys to verify access tokens are unavailable', cause: expect.any(Error) });
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
    await expect(new TokenVerifier({ remote: remoteKeys(`http://127.0.0.1:${port}/jwks.json`) }, allowed).verify(token)).rejects.toThrow(KeysUnavailable);
  });
});

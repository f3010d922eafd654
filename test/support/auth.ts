import { readServiceList } from '@app/shared/platform/services';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { type JWTPayload, SignJWT } from 'jose';
import { CLAIM_PRESETS } from '../../gateway/src/auth/claims.js';
import { TokenVerifier, type TokenRules } from '../../gateway/src/auth/tokens.js';

/**
 * The tests' signing key (made fresh for each test process) and tokens signed with it. Every test
 * gateway trusts this key; `client()` sends a token with every scope unless told otherwise.
 */
export const ALL_SCOPES = readServiceList().flatMap(({ scopes }) => [scopes.read, scopes.write]);
export const TEST_RULES: TokenRules = { issuer: 'https://issuer.test', audience: 'rest-microservices-test', algorithms: ['ES256'], clockToleranceSeconds: 30, maxLifetimeSeconds: 86_400, claims: CLAIM_PRESETS.generic };

const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
export const testPublicKeyPem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
/** The test key as a JWK, for a key set (JWKS) a test serves. */
export const testPublicJwk = publicKey.export({ format: 'jwk' });

export interface TokenOptions {
  scopes?: readonly string[];
  subject?: string;
  /** Seconds from now; negative for a token that has already expired. */
  expiresIn?: number;
  /** Seconds from now of its `iat` (now unless given). */
  issuedIn?: number;
  issuer?: string;
  audience?: string;
  notBefore?: number;
  /** Another key (a KeyObject or secret bytes) and its algorithm. */
  key?: Parameters<SignJWT['sign']>[0];
  algorithm?: string;
  /** Its `jti` (a new UUID unless given; none with null). */
  tokenId?: string | null;
}

/** The subject of the tokens `client()` sends by default. */
export const DEFAULT_SUBJECT = 'test-client';

/** A token signed with the test key (or `key`): by default every scope, subject DEFAULT_SUBJECT, one hour. */
export function testToken(options: TokenOptions = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const jwt = new SignJWT({ scope: (options.scopes ?? ALL_SCOPES).join(' ') })
    .setProtectedHeader({ alg: options.algorithm ?? 'ES256', typ: 'JWT' })
    .setSubject(options.subject ?? DEFAULT_SUBJECT)
    .setIssuer(options.issuer ?? TEST_RULES.issuer)
    .setAudience(options.audience ?? TEST_RULES.audience)
    .setIssuedAt(now + (options.issuedIn ?? 0))
    .setExpirationTime(now + (options.expiresIn ?? 3600));
  if (options.tokenId !== null) jwt.setJti(options.tokenId ?? randomUUID());
  if (options.notBefore !== undefined) jwt.setNotBefore(now + options.notBefore);
  return jwt.sign(options.key ?? privateKey);
}

/** A token of exactly these claims, signed with the test key (ES256). */
export const signedClaims = (claims: JWTPayload): Promise<string> => new SignJWT(claims).setProtectedHeader({ alg: 'ES256', typ: 'JWT' }).sign(privateKey);

/** The token `client()` sends unless a request says otherwise. */
export const defaultToken = await testToken();

export const testVerifier = () => new TokenVerifier({ publicKey }, TEST_RULES);

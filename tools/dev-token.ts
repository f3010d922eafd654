/**
 * A token signed with the development key (dev-keys/signing-key.jwk), as the gateway's default
 * rules accept it: `npm run token`, the image smoke and the benches sign theirs here.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { importJWK, SignJWT, type JWK } from 'jose';
// The sources, run as they are.
import { DEV_AUDIENCE, DEV_ISSUER } from '../shared/src/platform/dev-auth.ts';

export const DEV_SIGNING_KEY_FILE = new URL('../dev-keys/signing-key.jwk', import.meta.url).pathname;

export interface DevTokenClaims {
  scopes: string[];
  subject: string;
  ttlSeconds: number;
  issuer?: string;
  audience?: string;
  keyFile?: string;
  /** Its `jti`, by which it can be revoked: a new UUID unless given. */
  tokenId?: string;
}

export async function signDevToken({ scopes, subject, ttlSeconds, issuer = DEV_ISSUER, audience = DEV_AUDIENCE, keyFile = DEV_SIGNING_KEY_FILE, tokenId = randomUUID() }: DevTokenClaims): Promise<string> {
  const jwk = JSON.parse(readFileSync(keyFile, 'utf8')) as JWK;
  const algorithm = jwk.alg ?? 'ES256';
  return new SignJWT({ scope: scopes.join(' ') })
    .setProtectedHeader({ alg: algorithm, kid: jwk.kid, typ: 'JWT' })
    .setSubject(subject)
    .setIssuer(issuer)
    .setAudience(audience)
    .setIssuedAt()
    .setJti(tokenId)
    .setExpirationTime(`${ttlSeconds}s`)
    .sign(await importJWK(jwk, algorithm));
}

/** The development key's public half (dev-keys/public-key.jwk), as AUTH_PUBLIC_KEY takes it. */
export function devPublicKey(): string {
  return readFileSync(new URL('../dev-keys/public-key.jwk', import.meta.url), 'utf8').trim();
}

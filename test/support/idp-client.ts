import { randomUUID } from 'node:crypto';
import { decodeJwt, decodeProtectedHeader, importJWK, SignJWT, type JWK } from 'jose';
import { IDP_AUDIENCE } from '../../scripts/idp.js';

/** POST /token by client credentials, the client authenticated with HTTP Basic (RFC 6749 §2.3.1, §4.4): the access token granted. */
export async function clientCredentialsToken(tokenEndpoint: string, { id, secret }: { id: string; secret: string }, scope: string, resource = IDP_AUDIENCE): Promise<string> {
  const response = await fetch(tokenEndpoint, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}` },
    body: new URLSearchParams({ grant_type: 'client_credentials', scope, resource }),
  });
  const body = (await response.json()) as Record<string, unknown>;
  expect([response.status, body.token_type, body.scope]).toEqual([200, 'Bearer', scope]);
  return body.access_token as string;
}

/**
 * A signer of tokens shaped exactly as `model` (a token the provider issued: its header and claims),
 * each with a new `jti`, signed by the private key `jwk` under the `kid` given: as the provider
 * would issue them with that key, and as many as a load needs while the provider is down.
 */
export async function signerLike(model: string, jwk: JWK): Promise<(kid: string) => Promise<string>> {
  const key = await importJWK(jwk, 'ES256');
  const header = decodeProtectedHeader(model);
  const claims = decodeJwt(model);
  return (kid) => new SignJWT({ ...claims, jti: randomUUID() }).setProtectedHeader({ ...header, alg: 'ES256', kid }).sign(key);
}

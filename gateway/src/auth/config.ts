import { createPublicKey, type JsonWebKey, KeyObject } from 'node:crypto';
import { isIP } from 'node:net';
import { count, flag, hasScheme, HTTP_SCHEMES, list, milliseconds, optionalUrl, seconds, unsetIfEmpty } from '@app/shared/platform/config';
import { DEV_AUDIENCE, DEV_ISSUER, DEV_PUBLIC_KEY_JWK } from '@app/shared/platform/dev-auth';
import { z } from 'zod';
import { CLAIM_PRESET_NAMES } from './claims.js';

/** Signature algorithms a token may use: public-key ones only, so no `none` and no HS/RS key confusion. */
export const ASYMMETRIC_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'] as const;

/** A key to verify tokens with: a PEM public key (SPKI) or a public JWK, as JSON. */
export type VerificationKey = KeyObject | { keys: object[] };

function parseVerificationKey(text: string): VerificationKey {
  const trimmed = text.trim();
  // A private key would be a secret in the gateway's environment: refuse it rather than derive its public half.
  if (!trimmed.startsWith('{')) {
    if (trimmed.includes('PRIVATE KEY')) throw new Error('a private key');
    return createPublicKey(trimmed);
  }
  const json = JSON.parse(trimmed) as { keys?: unknown; d?: unknown };
  if (Array.isArray(json.keys)) return { keys: json.keys as object[] };
  if (json.d !== undefined) throw new Error('a private key');
  return createPublicKey({ key: json as JsonWebKey, format: 'jwk' });
}

const verificationKey = z.preprocess(
  unsetIfEmpty,
  z
    .string()
    .optional()
    .transform((value, context) => {
      if (value === undefined) return undefined;
      try {
        const key = parseVerificationKey(value);
        if ('type' in key && key.type !== 'public') throw new Error('not a public key');
        return key;
      } catch {
        context.addIssue({ code: 'custom', message: 'must be a public key: PEM (SPKI), a JWK or a JWK Set, as JSON' });
        return z.NEVER;
      }
    }),
);

const isHttpUrl = (value: string) => hasScheme(value, HTTP_SCHEMES);

/** The environment the gateway reads (validated at start-up). */

/** The settings of authentication: where the keys come from, what a token must be, which reads are public, whether a trace names the subject. */
export const authConfig = {
  AUTH_ENABLED: flag(true),
  AUTH_PUBLIC_KEY: verificationKey,
  /** Whether the development key (dev-keys/, its private half published) may be trusted on an address other machines reach. */
  AUTH_ALLOW_DEV_KEY: flag(false),
  AUTH_JWKS_URL: optionalUrl(HTTP_SCHEMES),
  /** Read the JWKS URL from AUTH_ISSUER's discovery document (OpenID Connect Discovery) instead. */
  AUTH_DISCOVERY: flag(false),
  /**
   * The least time between two fetches of the key set (AUTH_JWKS_URL or discovery), however many
   * tokens name unknown keys. A token naming an unknown key waits at most this and
   * AUTH_JWKS_TIMEOUT_MS for a fetch: 0.5 s and 1 s keep that answer (the key, or a 503 with the
   * provider down) under 2 s, while costing the provider at most two fetches a second.
   */
  AUTH_JWKS_COOLDOWN_MS: milliseconds(500),
  /** The longest a fetch (discovery document and key set) may take: a provider's edge answers in far less. */
  AUTH_JWKS_TIMEOUT_MS: milliseconds(1_000),
  /** The key set is fetched again when it is this old, so a key the provider retired stops working. */
  AUTH_JWKS_MAX_AGE_SECONDS: seconds(600, 1),
  /** The most bytes a key set or discovery document may have, and the most keys a set may hold: providers publish a few kilobytes, a few keys. */
  AUTH_JWKS_MAX_BYTES: count(262_144, 1_024, 16_777_216),
  AUTH_JWKS_MAX_KEYS: count(100, 1, 10_000),
  /** The most requests that may wait for a key set fetch at once (a flood of unknown keys included); beyond them, 503. */
  AUTH_JWKS_MAX_WAITING: count(4_096, 1, 1_000_000),
  AUTH_ISSUER: z.preprocess(unsetIfEmpty, z.string().default(DEV_ISSUER)),
  AUTH_AUDIENCE: z.preprocess(unsetIfEmpty, z.string().default(DEV_AUDIENCE)),
  AUTH_ALGORITHMS: list('ES256,RS256,EdDSA', z.enum(ASYMMETRIC_ALGORITHMS), `must be a comma-separated list of ${ASYMMETRIC_ALGORITHMS.join(', ')}`),
  AUTH_CLOCK_TOLERANCE_SECONDS: seconds(30, 0),
  /** The longest life (`exp` − `iat`) a token may have; a revocation is kept this long in Redis and in memory. */
  AUTH_MAX_TOKEN_LIFETIME_SECONDS: seconds(86_400, 60),
  /** Where the identity provider puts a token's scopes, audience, subject and id (auth/claims.ts). */
  AUTH_CLAIMS: z.preprocess(unsetIfEmpty, z.enum(CLAIM_PRESET_NAMES, { error: `must be one of ${CLAIM_PRESET_NAMES.join(', ')}` }).default('generic')),
  /** Services whose reads need no token (a public catalogue): only those services.json allows it for. */
  AUTH_PUBLIC_READS: list('', z.string(), 'must be a comma-separated list of service names'),
  /** Whether a request's trace carries its verified subject (`enduser.id`): personal data, so off by default. */
  TRACE_RECORD_SUBJECT: flag(false),
};

/** The settings of authentication, as validated. */
export type AuthConfig = z.infer<z.ZodObject<typeof authConfig>>;

/**
 * With authentication on, the gateway needs exactly one source of keys: a key, a JWKS URL, or the
 * issuer's discovery document (which needs the issuer to be an http or https URL). Checked after
 * parsing (not in the schema) so that each variable keeps its own default and the deployment checks
 * read them.
 */
export function authConfigProblems(config: { AUTH_ENABLED: boolean; AUTH_PUBLIC_KEY?: unknown; AUTH_JWKS_URL?: string; AUTH_DISCOVERY: boolean; AUTH_ISSUER: string }): string[] {
  if (!config.AUTH_ENABLED) return [];
  const sources = [config.AUTH_PUBLIC_KEY !== undefined, config.AUTH_JWKS_URL !== undefined, config.AUTH_DISCOVERY].filter(Boolean).length;
  const problems = sources === 1 ? [] : ['AUTH_PUBLIC_KEY, AUTH_JWKS_URL, AUTH_DISCOVERY: set exactly one of them while AUTH_ENABLED is true (or AUTH_ENABLED=false)'];
  if (config.AUTH_DISCOVERY && !isHttpUrl(config.AUTH_ISSUER)) problems.push('AUTH_ISSUER: must be an http or https URL with AUTH_DISCOVERY=true (its discovery document is read from it)');
  return problems;
}

/** Whether `address` is one only this machine reaches: 127.0.0.0/8 or ::1 (an IPv4-mapped one too). */
export function isLoopback(address: string): boolean {
  const v4 = address.replace(/^::ffff:/i, '');
  if (isIP(v4) === 4) return v4.startsWith('127.');
  return isIP(address) === 6 && /^(0{0,4}:){2,7}0{0,3}1$/.test(address);
}

const devKey = createPublicKey({ key: DEV_PUBLIC_KEY_JWK, format: 'jwk' });

/** Whether `key` is, or (a JWK Set) holds, the development key. */
function isDevKey(key: VerificationKey): boolean {
  const keys = 'keys' in key ? key.keys : [key];
  return keys.some((one) => {
    try {
      return (one instanceof KeyObject ? one : createPublicKey({ key: one as JsonWebKey, format: 'jwk' })).equals(devKey);
    } catch {
      return false;
    }
  });
}

/**
 * The development key's private half is in the repository: anyone who reaches a gateway that
 * trusts it can sign any token. Refused unless the gateway listens on loopback only, or
 * AUTH_ALLOW_DEV_KEY says the operator means it (a local stack whose network is the boundary).
 */
export function devKeyProblems(config: { HOST: string; AUTH_ENABLED: boolean; AUTH_PUBLIC_KEY?: VerificationKey; AUTH_ALLOW_DEV_KEY: boolean }): string[] {
  if (!config.AUTH_ENABLED || config.AUTH_ALLOW_DEV_KEY || isLoopback(config.HOST) || config.AUTH_PUBLIC_KEY === undefined || !isDevKey(config.AUTH_PUBLIC_KEY)) return [];
  return [`AUTH_PUBLIC_KEY: the development key (dev-keys/), whose private half is published, on HOST=${config.HOST}, which other machines reach: use your own key, HOST=127.0.0.1, or AUTH_ALLOW_DEV_KEY=true`];
}


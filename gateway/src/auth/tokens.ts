import type { KeyObject } from 'node:crypto';
import { errors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import { LRUCache } from 'lru-cache';
import { encodeSubject } from '@app/shared/platform/subject';
import { type ClaimMapping, readClaims, requiredClaimsOf } from './claims.js';
import { keysFrom, type KeySource, KeysUnavailable } from './key-source.js';
import type { RevocableToken } from './revocations.js';

/** Who a verified token speaks for, and what it may do. */
export interface Principal extends RevocableToken {
  subject: string;
  /** `subject` as X-Auth-Subject carries it to the services: percent-encoded, so that any subject is a legal header value. */
  forwardedSubject: string;
  /** Who the rate limits and the fair share count it as (`sub:<subject>`), made once per token. */
  caller: string;
  scopes: ReadonlySet<string>;
}

/** The token is not acceptable: a 401 with `error="invalid_token"`; `message` says why, for the client. */
export class InvalidToken extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidToken';
  }
}

export interface TokenRules {
  issuer: string;
  audience: string;
  /** Public-key algorithms only (the config allows nothing else). */
  algorithms: string[];
  clockToleranceSeconds: number;
  /**
   * The longest a token may live (`exp` − `iat`). With `iat` no later than the clock (and the
   * tolerance), no token is valid later than this from now: a revocation kept this long (and twice
   * the tolerance) outlives every token it names (revocations.ts).
   */
  maxLifetimeSeconds: number;
  /** Where the token's audience, subject, id and scopes are (AUTH_CLAIMS). */
  claims: ClaimMapping;
}

/** How many verified tokens a TokenVerifier remembers at most (the least recently used are forgotten first). */
export const REMEMBERED_TOKENS = 10_000;

/**
 * How many bytes of remembered tokens a TokenVerifier holds at most, counted as each Authorization
 * header's length and REMEMBERED_ENTRY_BYTES: 10,000 tokens of up to 600 characters fit; larger
 * tokens (an identity provider's with many claims) are remembered fewer at a time rather than
 * growing the heap by the header's size, up to Node's 16 KiB, ten thousand times.
 */
export const REMEMBERED_TOKEN_BYTES = 16 * 2 ** 20;
/** What a remembered token costs beyond its header: its principal (a subject of up to 255 characters, in three forms, and the scopes) and the cache's own. */
const REMEMBERED_ENTRY_BYTES = 1_024;

/** Why jose refused a token, in words a client can act on (never the token's contents). */
function reason(error: unknown): string {
  if (error instanceof errors.JWTExpired) return 'The access token has expired';
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.claim === 'nbf') return 'The access token is not valid yet';
    return error.reason === 'missing' ? `The access token has no ${error.claim} claim` : `The access token's ${error.claim} claim is not accepted here`;
  }
  if (error instanceof errors.JOSEAlgNotAllowed) return "The access token's signature algorithm is not accepted";
  if (error instanceof errors.JWSSignatureVerificationFailed) return "The access token's signature is not valid";
  if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWKSMultipleMatchingKeys) return 'No key this gateway trusts signed the access token';
  return 'The access token is malformed';
}

/**
 * Whether a compact JWS's signature is spelled as base64url spells its bytes (RFC 7515 §2: no
 * padding, unused bits zero). The signature is the one part of a token that its signature does not
 * cover, and decoders take other spellings of it too: each would be another header for the same
 * token, verified and remembered apart. (An ECDSA signature's twin, S for n − S, is let in: see
 * docs/api.md.)
 */
function hasCanonicalSignature(token: string): boolean {
  const signature = token.slice(token.lastIndexOf('.') + 1);
  return Buffer.from(signature, 'base64url').toString('base64url') === signature;
}

// RFC 6750: `Bearer` and a b64token.
const BEARER = /^Bearer +([A-Za-z0-9._~+/-]+=*) *$/i;

/**
 * How much of the end of an Authorization header keys the memory of verified tokens: the end of a
 * JWT's signature, which no two tokens share by chance. The whole header is then compared.
 */
const FINGERPRINT_CHARS = 24;

/**
 * Verifies bearer tokens (JWTs) and remembers each verified one until it expires, so that a
 * token's later requests cost a lookup rather than a signature check. The memory is bounded
 * (least recently used tokens are forgotten first) and holds only tokens that passed.
 *
 * It is keyed by the Authorization header's last characters, not the whole header: a lookup hashes
 * its key, and every request brings a new string of some 300 characters, whose hashing (and the
 * Bearer pattern before it) cost more than the rest of the guard together. The header found is compared whole, so only the very header that was verified is let in.
 */
export class TokenVerifier {
  readonly #keys: KeyObject | JWTVerifyGetKey;
  // Each entry's expiry is its own, checked on lookup: lru-cache's ttl would read the clock through a
  // timer it sets anew every millisecond under load (its ttlResolution), on every cache hit's path.
  readonly #verified = new LRUCache<string, { authorization: string; principal: Principal; expiresAt: number; generation: number | undefined }>({
    max: REMEMBERED_TOKENS,
    maxSize: REMEMBERED_TOKEN_BYTES,
    sizeCalculation: (entry) => entry.authorization.length + REMEMBERED_ENTRY_BYTES,
  });
  /** The generation of the keys a token is verified under (key-source.ts): a configured key's never changes. */
  readonly #generation: () => number | undefined;

  constructor(
    source: KeySource,
    private readonly rules: TokenRules,
    /** The clock a remembered token's expiry is read by (ms since the epoch). */
    private readonly now: () => number = Date.now,
  ) {
    this.#keys = keysFrom(source);
    this.#generation = 'remote' in source ? () => source.remote.generation : () => 0;
  }

  /**
   * The principal of an Authorization header (exactly as sent) whose token was verified before,
   * under the keys still in use (an identity provider's set neither changed nor aged since), and has
   * not expired since: no parsing, no signature check.
   */
  remembered(authorization: string): Principal | undefined {
    const fingerprint = authorization.slice(-FINGERPRINT_CHARS);
    const known = this.#verified.get(fingerprint);
    if (known === undefined || known.authorization !== authorization) return undefined;
    if (known.generation === undefined || known.generation !== this.#generation()) return undefined;
    if (known.expiresAt > this.now()) return known.principal;
    this.#verified.delete(fingerprint);
    return undefined;
  }

  /**
   * The principal of an Authorization header's bearer token, verified; undefined when the header
   * holds no bearer token (another scheme: the request is anonymous). Rejects with InvalidToken or
   * KeysUnavailable.
   */
  async verify(authorization: string): Promise<Principal | undefined> {
    const token = BEARER.exec(authorization)?.[1];
    if (token === undefined) return undefined;
    const known = this.remembered(authorization);
    if (known) return known;
    const now = this.now();
    // Read before the keys are: a set that changes meanwhile leaves the token to be verified again.
    const generation = this.#generation();
    let payload;
    try {
      const options = {
        issuer: this.rules.issuer,
        audience: this.rules.claims.audience === 'aud' ? this.rules.audience : undefined,
        algorithms: this.rules.algorithms,
        clockTolerance: this.rules.clockToleranceSeconds,
        currentDate: new Date(now),
        requiredClaims: ['exp', 'iat', ...requiredClaimsOf(this.rules.claims)],
      };
      ({ payload } =
        typeof this.#keys === 'function' ? await jwtVerify(token, this.#keys, options) : await jwtVerify(token, this.#keys, options));
    } catch (error) {
      // Only the key source's failures are ours (keysFrom); anything else, a header naming an
      // algorithm the key is not for included (WebCrypto refuses it with a DOMException), is the token's.
      if (error instanceof KeysUnavailable) throw error;
      throw new InvalidToken(reason(error));
    }
    if (!hasCanonicalSignature(token)) throw new InvalidToken("The access token's signature is not in base64url's one spelling");
    const { issuedAt, expiresAt } = this.#lifetime(payload, now);
    const claims = readClaims(payload, this.rules.claims, this.rules.audience);
    if (typeof claims === 'string') throw new InvalidToken(claims);
    const { subject, tokenId, scopes } = claims;
    const principal: Principal = { subject, forwardedSubject: encodeSubject(subject), caller: `sub:${subject}`, scopes, tokenId, issuedAt };
    if (expiresAt > now) this.#verified.set(authorization.slice(-FINGERPRINT_CHARS), { authorization, principal, expiresAt, generation });
    return principal;
  }

  /**
   * A verified token's `iat` and `exp` (ms), bounded by the gateway's clock and not only by each
   * other: `iat` no later than now (and the tolerance), and `exp` − `iat` within the longest
   * lifetime, so that no token is valid further ahead than that lifetime and the tolerance.
   */
  #lifetime(payload: JWTPayload, now: number): { issuedAt: number; expiresAt: number } {
    // `exp` and `iat` are required claims, NumericDates: jose refused the token without them.
    const issuedAt = (payload.iat ?? 0) * 1000;
    const expiresAt = (payload.exp ?? 0) * 1000;
    if (issuedAt > now + this.rules.clockToleranceSeconds * 1000) throw new InvalidToken('The access token was issued in the future (its iat is later than now)');
    if (expiresAt - issuedAt > this.rules.maxLifetimeSeconds * 1000) throw new InvalidToken('The access token lives longer than this gateway accepts');
    return { issuedAt, expiresAt };
  }
}

import { subjectFlaw } from '@app/shared/platform/subject';
import type { JWTPayload } from 'jose';

/** How a claim lists scopes: one string of space-separated scopes (RFC 6749's `scope`), or a JSON array of strings. */
export type ScopeForm = 'space-separated' | 'array';

/**
 * Where an identity provider puts what the gateway reads from a verified token: the scopes (the
 * union of every listed claim present, each in its one form), the claim compared exactly with
 * AUTH_AUDIENCE (`aud`, one of its values; or `client_id`, a string), the subject (who owns
 * records) and the token's id (what a revocation names).
 */
export interface ClaimMapping {
  scopes: readonly { claim: string; form: ScopeForm }[];
  audience: 'aud' | 'client_id';
  subject: string;
  tokenId: string;
}

const SCOPE_STRING = [{ claim: 'scope', form: 'space-separated' }] as const;

/** The mapping of each provider AUTH_CLAIMS names (docs/api.md, "Access tokens"). */
export const CLAIM_PRESETS = {
  /** RFC 9068's JWT access token: `scope`, `aud`, `sub`, `jti`. */
  generic: { scopes: SCOPE_STRING, audience: 'aud', subject: 'sub', tokenId: 'jti' },
  // Keycloak's access tokens carry `scope` as a string; `aud` only once an audience mapper adds the API.
  keycloak: { scopes: SCOPE_STRING, audience: 'aud', subject: 'sub', tokenId: 'jti' },
  // Auth0's RFC 9068 token profile: `scope` a string, `aud` the API identifier (with `jti`, which its default profile lacks).
  auth0: { scopes: SCOPE_STRING, audience: 'aud', subject: 'sub', tokenId: 'jti' },
  // Okta's custom authorization servers list the granted scopes in `scp`, an array.
  okta: { scopes: [{ claim: 'scp', form: 'array' }], audience: 'aud', subject: 'sub', tokenId: 'jti' },
  // Entra ID: delegated scopes in `scp` (space-separated), app permissions in `roles` (an array), the token's id in `uti` (no `jti`).
  entra: {
    scopes: [
      { claim: 'scp', form: 'space-separated' },
      { claim: 'roles', form: 'array' },
    ],
    audience: 'aud',
    subject: 'sub',
    tokenId: 'uti',
  },
  // Cognito's access tokens have no `aud`: the app client is `client_id`; scopes are a `scope` string.
  cognito: { scopes: SCOPE_STRING, audience: 'client_id', subject: 'sub', tokenId: 'jti' },
} as const satisfies Record<string, ClaimMapping>;

export type ClaimPreset = keyof typeof CLAIM_PRESETS;
export const CLAIM_PRESET_NAMES = Object.keys(CLAIM_PRESETS) as [ClaimPreset, ...ClaimPreset[]];

/** The longest token id a token may have: what POST /admin/revocations takes, so that every token can be revoked by its id. */
export const MAX_TOKEN_ID_LENGTH = 255;

/** The claims that must be in every token the mapping reads (the audience's own, `aud`, jose requires). */
export const requiredClaimsOf = (mapping: ClaimMapping): string[] => [mapping.subject, mapping.tokenId, ...(mapping.audience === 'client_id' ? ['client_id'] : [])];

/** What a verified token speaks for, as the mapping reads it. */
export interface MappedClaims {
  subject: string;
  tokenId: string;
  scopes: Set<string>;
}

const isStringArray = (value: unknown): value is string[] => Array.isArray(value) && value.every((item) => typeof item === 'string');

const flawOf = (claim: string, what: string) => `The access token's ${claim} claim ${what}`;

/** Adds the scopes a claim lists, or says why it lists none: it is not in its form. */
function addScopes(scopes: Set<string>, claim: string, form: ScopeForm, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (form === 'array') {
    if (!isStringArray(value)) return flawOf(claim, 'must be an array of strings');
    for (const scope of value) scopes.add(scope);
    return undefined;
  }
  if (typeof value !== 'string') return flawOf(claim, 'must be a string of space-separated scopes');
  for (const scope of value.split(' ')) if (scope !== '') scopes.add(scope);
  return undefined;
}

/**
 * The subject, token id and scopes of a payload whose signature, issuer, times and required claims
 * jose has checked (and `aud`, when the mapping's audience is `aud`; `client_id` is compared here
 * with `audience`). Whatever JSON the claims hold, the answer is those, or why not: a sentence
 * for the client naming the claim.
 */
export function readClaims(payload: JWTPayload, mapping: ClaimMapping, audience: string): MappedClaims | string {
  if (mapping.audience === 'client_id') {
    if (typeof payload.client_id !== 'string') return flawOf('client_id', 'must be a string');
    if (payload.client_id !== audience) return flawOf('client_id', 'is not accepted here');
  }
  const subject = payload[mapping.subject];
  const subjectFlawFound = subjectFlaw(subject);
  if (subjectFlawFound !== undefined) return flawOf(mapping.subject, subjectFlawFound);
  const tokenId = payload[mapping.tokenId];
  if (typeof tokenId !== 'string' || tokenId === '' || tokenId.length > MAX_TOKEN_ID_LENGTH) return flawOf(mapping.tokenId, `is not a string of 1 to ${MAX_TOKEN_ID_LENGTH} characters`);
  const scopes = new Set<string>();
  for (const { claim, form } of mapping.scopes) {
    const flaw = addScopes(scopes, claim, form, payload[claim]);
    if (flaw !== undefined) return flaw;
  }
  return { subject: subject as string, tokenId, scopes };
}

import { randomUUID } from 'node:crypto';
import type { JWTPayload } from 'jose';
import { CLAIM_PRESETS, type ClaimPreset } from '../../gateway/src/auth/claims.js';

/**
 * Access tokens' claims shaped as each identity provider documents them (the sources are cited in
 * gateway/src/auth/claims.ts), with its kind of issuer and audience: what a gateway with that
 * AUTH_CLAIMS preset must accept, and the two ways a token of another shape differs from it (its
 * scope claim in the other form, or no audience), which it must refuse naming the claim.
 */
export interface ProviderShape {
  issuer: string;
  audience: string;
  /** The claims of a token for `subject` granting `scopes` (which the provider may spread over several claims), valid for an hour. */
  claims(subject: string, scopes: readonly string[]): JWTPayload;
}

const times = () => {
  const now = Math.floor(Date.now() / 1000);
  return { iat: now, nbf: now, exp: now + 3600 };
};

export const PROVIDER_SHAPES: Record<ClaimPreset, ProviderShape> = {
  generic: {
    issuer: 'https://issuer.example',
    audience: 'rest-microservices',
    claims: (sub, scopes) => ({ iss: 'https://issuer.example', aud: 'rest-microservices', sub, client_id: 'client', scope: scopes.join(' '), jti: randomUUID(), ...times() }),
  },
  keycloak: {
    issuer: 'https://keycloak.example/realms/shop',
    audience: 'rest-microservices',
    claims: (sub, scopes) => ({
      iss: 'https://keycloak.example/realms/shop',
      // The API's client id, added by an audience mapper, next to what Audience Resolve adds.
      aud: ['rest-microservices', 'account'],
      sub,
      typ: 'Bearer',
      azp: 'web-app',
      scope: ['profile', 'email', ...scopes].join(' '),
      preferred_username: 'service-account-web-app',
      jti: `onrtcc:${randomUUID()}`,
      ...times(),
    }),
  },
  auth0: {
    issuer: 'https://shop.eu.auth0.com/',
    audience: 'https://api.shop.example',
    claims: (sub, scopes) => ({
      iss: 'https://shop.eu.auth0.com/',
      sub,
      aud: ['https://api.shop.example', 'https://shop.eu.auth0.com/userinfo'],
      client_id: 'my_client_id',
      jti: '73WakrfVbNJBaAmhQtEeDv',
      scope: ['openid', 'profile', ...scopes].join(' '),
      ...times(),
    }),
  },
  okta: {
    issuer: 'https://shop.okta.com/oauth2/default',
    audience: 'api://default',
    claims: (sub, scopes) => ({
      ver: 1,
      jti: `AT.${randomUUID()}`,
      iss: 'https://shop.okta.com/oauth2/default',
      aud: 'api://default',
      sub,
      cid: '0oa1example',
      uid: '00u1example',
      scp: ['openid', ...scopes],
      auth_time: times().iat,
      ...times(),
    }),
  },
  entra: {
    issuer: 'https://login.microsoftonline.com/9122040d-6c67-4c5b-b112-36a304b66dad/v2.0',
    audience: '6e74172b-be56-4843-9ff4-e66a39bb12e3',
    // Delegated scopes in `scp`, app roles in `roles`: the first of the scopes goes in `roles`, to show both are read.
    claims: (sub, scopes) => ({
      aud: '6e74172b-be56-4843-9ff4-e66a39bb12e3',
      iss: 'https://login.microsoftonline.com/9122040d-6c67-4c5b-b112-36a304b66dad/v2.0',
      azp: '75b8f2a7-0c32-4c59-8a1d-4cfe0a1f5f4e',
      azpacr: '1',
      oid: '690222be-ff1a-4d56-abd1-7e4f7d38e474',
      tid: '9122040d-6c67-4c5b-b112-36a304b66dad',
      sub,
      roles: scopes.slice(0, 1),
      scp: scopes.slice(1).join(' '),
      uti: 'fqiBqXLPj0eQa82S-IYFAA',
      ver: '2.0',
      ...times(),
    }),
  },
  cognito: {
    issuer: 'https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_example',
    audience: '1example23456789',
    claims: (sub, scopes) => ({
      sub,
      token_use: 'access',
      scope: scopes.join(' '),
      auth_time: times().iat,
      iss: 'https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_example',
      version: 2,
      jti: randomUUID(),
      client_id: '1example23456789',
      username: sub,
      ...times(),
    }),
  },
};

/** The same claims with one of the preset's scope claims in the other form (a string for an array, and back); one case per scope claim. */
export function otherForms(preset: ClaimPreset, claims: JWTPayload): { claim: string; claims: JWTPayload }[] {
  return CLAIM_PRESETS[preset].scopes.map(({ claim, form }) => {
    const value = claims[claim];
    const other = form === 'array' ? (value as string[]).join(' ') : String(value).split(' ');
    return { claim, claims: { ...claims, [claim]: other } };
  });
}

/** The same claims without the one the preset reads the audience from. */
export function withoutAudience(preset: ClaimPreset, claims: JWTPayload): { claim: string; claims: JWTPayload } {
  const claim = CLAIM_PRESETS[preset].audience;
  return { claim, claims: Object.fromEntries(Object.entries(claims).filter(([name]) => name !== claim)) };
}

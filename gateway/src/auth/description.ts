import { header, problemResponse } from '@app/shared/api-description/openapi';
import { scopesOfService } from '@app/shared/platform/services';
import { z } from 'zod';
import type { FeatureDescription } from '../feature.js';
import { challenge, INSUFFICIENT_SCOPE, insufficientScope, unauthorized } from './problems.js';

/**
 * Each proxied operation's token and scope, as routing/service-routes.ts and the stages decide them:
 * its security requirement, 401, and 403 (but on OPTIONS, which takes no token).
 */
export const authDescription: FeatureDescription = {
  headers: {
    WWWAuthenticate: header(
      z.string().regex(/^Bearer /),
      'The bearer challenge (RFC 6750): `error="invalid_token"` for a token that is expired, badly signed or not for this API; no error when there was no token; `error="insufficient_scope"` with the `scope` needed on 403.',
      'Bearer realm="api", error="invalid_token", error_description="The access token has expired"',
    ),
    WWWAuthenticateOnScope: header(
      z.string().regex(/^Bearer /).optional(),
      'On a 403 for a scope the token lacks: `error="insufficient_scope"` with the `scope` needed. Absent on the service\'s own 403 (`not-owner`: a record of another owner).',
      'Bearer realm="api", error="insufficient_scope", scope="users:write"',
    ),
  },
  operation({ upstream, kind, route, operation }) {
    const scopes = scopesOfService(upstream.name);
    const scope = kind === 'options' ? undefined : scopes[kind];
    const expired = unauthorized('The access token has expired', challenge('error="invalid_token"'));
    const responses = { 401: problemResponse(401, { problem: expired, at: route }, { 'WWW-Authenticate': 'WWWAuthenticate' }) };
    if (!scope) return { responses };
    // A service that answers 403 itself (a record of another owner) sends no challenge.
    const ownerRefusal = operation.responses?.[403] !== undefined;
    const refused = problemResponse(
      403,
      { problem: insufficientScope(scope), at: route },
      { 'WWW-Authenticate': ownerRefusal ? 'WWWAuthenticateOnScope' : 'WWWAuthenticate' },
      [INSUFFICIENT_SCOPE, ...(ownerRefusal ? (['not-owner'] as const) : [])],
    );
    // The service's admin scope grants every operation of it, as its read or write scope does.
    return { responses: { ...responses, 403: refused }, security: [{ bearerAuth: [scope] }, { bearerAuth: [scopes.admin] }] };
  },
};

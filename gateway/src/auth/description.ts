import { header, problemResponse } from '@app/shared/api-description/openapi';
import { scopesOfService } from '@app/shared/platform/services';
import { z } from 'zod';
import type { FeatureDescription } from '../feature.js';
import type { Upstream } from '../upstream-model.js';
import { challenge, INSUFFICIENT_SCOPE, insufficientScope, unauthorized } from './problems.js';

/** The scopes of the upstreams (as routing/service-routes.ts requires them), as a Markdown list. */
const scopesOf = (upstreams: readonly Pick<Upstream, 'name'>[]) =>
  upstreams.flatMap(({ name }) => Object.values(scopesOfService(name)).map((scope) => `\`${scope}\``)).join(', ');

/**
 * Each proxied operation's token and scope, as routing/service-routes.ts and the stages decide them:
 * its security requirement, 401, and 403 (but on OPTIONS, which takes no token); the bearer scheme,
 * and what the overview says of tokens.
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
  overview: (upstreams) =>
    `**Access tokens**: every operation under \`/api\` but OPTIONS needs a bearer token (JWT) with one of the scopes it lists (${scopesOf(upstreams)}): a service's read or write scope, or its admin scope, which also sees and changes every owner's records; a deployment may make a service's reads public. No token or a bad one is a 401, a token without the scope a 403, both with \`WWW-Authenticate\`.`,
  securitySchemes: (upstreams) => ({
    bearerAuth: {
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'JWT',
      description: `An access token (JWT) from the identity provider the gateway trusts, with one of the scopes the operation lists (\`scope\` claim, space-separated): ${scopesOf(upstreams)}. Locally, \`npm run token\` makes one.`,
    },
  }),
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

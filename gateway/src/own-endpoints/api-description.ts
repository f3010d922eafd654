import http from 'node:http';
import { apiDocument, describe, documentationTag, documentEndpoint, DOCUMENT_PATH, header, headers, probeEndpoints, problemResponse, problemTypesTable, routerOf, type Endpoint, type OpenApiDocument } from '@app/shared/api-description/openapi';
import { BODY_LIMIT_BYTES, MAX_JSON_DEPTH } from '@app/shared/platform/http/bodies';
import { CACHE_OUTCOME_HEADER, RATE_LIMIT_HEADER, RATE_LIMIT_POLICY_HEADER, RETRY_AFTER_HEADER } from '@app/shared/platform/http/headers';
import { MAX_REQUEST_TARGET_BYTES } from '@app/shared/platform/http/malformed-requests';
import { kindOf } from '@app/shared/platform/http/method-kind';
import { HttpProblem, problems, type ProblemKind } from '@app/shared/platform/problem';
import { scopesOfService } from '@app/shared/platform/services';
import { DEFAULT_LIMIT, etagMatches, MAX_LIMIT } from '@app/shared/resource/rules';
import type { RequestHandler, Router } from 'express';
import { z } from 'zod';
import { negotiateCoding } from '../cache/compression.js';
import { revocationEndpoint } from '../auth/revocation-endpoint.js';
import { ASSETS, DOCS_FILES, sendDocsFile, sendDocsPage } from './docs-page.js';
import { KeptDescription } from './kept-description.js';
import type { oas31, ZodOpenApiPathsObject, ZodOpenApiResponseObject } from 'zod-openapi';
import type { FeatureDescription } from '../feature.js';
import { servesPath } from '../routing/service-routes.js';
import type { Deadlines } from '../proxy/upstream.js';
import type { Upstream } from '../upstream-model.js';

/**
 * The API description clients use, `GET /openapi.json`, and a page that shows it, `GET /docs`.
 *
 * Each service serves the description of its own routes (generated from the declarations its
 * router is made of); the gateway keeps the paths each upstream serves, adds what the gateway itself
 * does (its failures, its cache and rate-limit headers, its own endpoints) and renders them
 * together, once for each change of what the services describe (kept-description.ts).
 */

/** The scopes of the upstreams (as routing/service-routes.ts requires them), as a Markdown list. */
const scopesOf = (upstreams: readonly Pick<Upstream, 'name'>[]) =>
  upstreams.flatMap(({ name }) => Object.values(scopesOfService(name)).map((scope) => `\`${scope}\``)).join(', ');

const securitySchemes = (scopes: string): Record<string, oas31.SecuritySchemeObject> => ({
  bearerAuth: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
    description: `An access token (JWT) from the identity provider the gateway trusts, with one of the scopes the operation lists (\`scope\` claim, space-separated): ${scopes}. Locally, \`npm run token\` makes one.`,
  },
});
/** The headers the gateway adds to what the services describe. */
const GATEWAY_HEADERS = {
  XCache: header(
    z.enum(['HIT', 'MISS', 'BYPASS', 'STALE']).optional(),
    "What the gateway's response cache did: `HIT` (served from it), `MISS` (fetched and stored), `BYPASS` (not cacheable), `STALE` (served from it while the service is unavailable). Sent on every gateway response to GET and HEAD under `/api` (`BYPASS` on all of them when the cache is off); a service answering directly does not send it.",
  ),
  Age: header(z.int().min(0).optional(), 'Seconds since the cached response was fetched, on a `HIT` or `STALE`.'),
  RateLimitPolicy: header(z.string().regex(/^"(read|write)";q=\d+;w=\d+$/).optional(), 'The budget this request counts against (IETF RateLimit headers): `q` requests per `w` seconds, reads and writes apart. On every response under `/api` while rate limiting is on.', '"read";q=6000;w=60'),
  RateLimit: header(z.string().regex(/^"(read|write)";r=\d+;t=\d+$/).optional(), 'What is left of that budget: `r` requests, for `t` more seconds.', '"read";r=5999;t=60'),
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
};
const METHODS = ['get', 'head', 'post', 'put', 'patch', 'delete', 'options'] as const;

/**
 * A service's operation as the gateway answers it: its token and scope (401, 403, as routing/service-routes.ts and auth/stages.ts
 * decides them), its rate limits (429, RateLimit headers), 502/504, and the cache headers on GET and HEAD.
 */
function throughGateway(upstream: Upstream, method: (typeof METHODS)[number], operation: oas31.OperationObject, route: string, deadlines: Deadlines, descriptions: readonly FeatureDescription[]) {
  const kind = kindOf(method.toUpperCase());
  const cached = kind === 'read';
  const scopes = scopesOfService(upstream.name);
  const scope = kind === 'options' ? undefined : scopes[kind];
  const problem = (status: number, kind: ProblemKind | undefined, detail: string, extra = {}, kinds?: ProblemKind[]) =>
    problemResponse(status, kind && { problem: new HttpProblem(kind, detail), at: route }, extra, kinds);
  const ownerRefusal = operation.responses?.[403] !== undefined;
  const responses: Record<string, oas31.ResponseObject | ZodOpenApiResponseObject> = {
    ...(operation.responses as Record<string, oas31.ResponseObject>),
    401: problem(401, 'unauthorized', 'The access token has expired', { 'WWW-Authenticate': 'WWWAuthenticate' }),
    // A service that answers 403 itself (a record of another owner) sends no challenge.
    ...(scope && {
      403: problem(
        403,
        'insufficient-scope',
        `This request needs the ${scope} scope, which the access token does not grant`,
        { 'WWW-Authenticate': ownerRefusal ? 'WWWAuthenticateOnScope' : 'WWWAuthenticate' },
        ['insufficient-scope', ...(ownerRefusal ? (['not-owner'] as const) : [])],
      ),
    }),
    429: problem(429, 'rate-limited', 'Over the budget of read requests for this client; retry after 42 s', { [RETRY_AFTER_HEADER]: 'RetryAfter' }),
    ...(operation.requestBody && { 408: problem(408, 'request-timeout', `The request body did not arrive within ${deadlines.requestBodyMs} ms`) }),
    414: problem(414, undefined, ''),
    431: problem(431, undefined, ''),
    502: problem(502, 'bad-gateway', `The ${upstream.name} service could not be reached`),
    504: problem(504, 'gateway-timeout', `The ${upstream.name} service did not answer within ${deadlines.upstreamMs} ms`),
  };
  // What each feature adds (feature.ts: FeatureDescription), after what the gateway has always described.
  const fragments = descriptions.map((description) => description.operation?.({ upstream, method, kind, route, operation, deadlines }) ?? {});
  Object.assign(responses, ...fragments.map((fragment) => fragment.responses));
  const added = headers({ [RATE_LIMIT_POLICY_HEADER]: 'RateLimitPolicy', [RATE_LIMIT_HEADER]: 'RateLimit', ...(cached && { [CACHE_OUTCOME_HEADER]: 'XCache', Age: 'Age' }), ...Object.assign({}, ...fragments.map((fragment) => fragment.headers)) });
  return {
    ...operation,
    // The service's admin scope grants every operation of it, as its read or write scope does.
    ...(scope && { security: [{ bearerAuth: [scope] }, { bearerAuth: [scopes.admin] }] }),
    responses: Object.fromEntries(
      // HEAD answers carry no body, the gateway's own failures included.
      Object.entries(responses).map(([status, { content, ...response }]) => [status, { ...response, headers: { ...response.headers, ...added }, ...(content && method !== 'head' && { content }) }]),
    ),
  };
}

/** The paths `upstream` serves, from its own description, as the gateway answers them. */
export function proxiedPaths(upstream: Upstream, document: OpenApiDocument, deadlines: Deadlines, descriptions: readonly FeatureDescription[] = []): ZodOpenApiPathsObject {
  const paths: Record<string, oas31.PathItemObject> = {};
  for (const [route, item] of Object.entries(document.paths ?? {})) {
    if (!servesPath(upstream, route)) continue;
    paths[route] = { ...item, ...Object.fromEntries(METHODS.flatMap((method) => (item[method] ? [[method, throughGateway(upstream, method, item[method], route, deadlines, descriptions)]] : []))) };
  }
  return paths as ZodOpenApiPathsObject;
}

/** The gateway's own endpoints on its API port: the docs page and the document (`document` sends it). */
function gatewayEndpoints(firstUpstream: string, handlers: { document?: RequestHandler } = {}): Endpoint[] {
  const noCache = headers({ 'Cache-Control': 'CacheControlNoCache' });
  const text = (type: string) => ({ [type]: { schema: { type: 'string' as const } } });
  const get = (operationId: string, summary: string, more: Omit<Endpoint['operations']['GET'] & object, 'operationId' | 'summary'>) => ({ GET: { operationId, summary, ...more } });
  // Counted against the caller's read budget, like a read of the API (rate-limits/stage.ts).
  const overBudget = problemResponse(429, { problem: new HttpProblem('rate-limited', 'Over the budget of read requests for this client; retry after 42 s'), at: DOCUMENT_PATH }, { [RETRY_AFTER_HEADER]: 'RetryAfter' });
  return [
    documentEndpoint('This document: the parts every service describes, as the gateway answers them. Built once for each change of what they describe, and sent with an `ETag`.', handlers.document, {
      304: { description: 'Not modified since the copy the client has (`If-None-Match`).', headers: headers({ 'Cache-Control': 'CacheControlNoCache' }) },
      429: overBudget,
      500: problemResponse(500),
      503: problemResponse(503, { problem: problems.unavailable(`The API description of the ${firstUpstream} service is unavailable; try again shortly`), at: DOCUMENT_PATH }),
    }),
    {
      path: '/docs',
      tag: documentationTag,
      operations: get('getDocsPage', 'The documentation page', {
        description: `Swagger UI showing \`${DOCUMENT_PATH}\`. Everything it loads comes from this origin.`,
        responses: { 200: { description: 'The page.', headers: noCache, content: text('text/html') }, 429: overBudget },
        handlers: [sendDocsPage],
      }),
    },
    {
      path: '/docs/{file}',
      tag: documentationTag,
      parameters: [{ name: 'file', in: 'path', description: 'The file name.', required: true, schema: { type: 'string', enum: DOCS_FILES } }],
      operations: get('getDocsFile', 'A file of the documentation page', {
        responses: {
          200: { description: 'The file.', headers: noCache, content: Object.fromEntries([...new Set(Object.values(ASSETS))].map((type) => [type, { schema: { type: 'string', contentMediaType: type } }])) },
          304: { description: 'Not modified since the copy the client has (`If-Modified-Since`).', headers: noCache },
          404: problemResponse(404, { problem: problems.notFound('No file nope.js in /docs'), at: '/docs/nope.js' }),
          429: overBudget,
        },
        handlers: [sendDocsFile as RequestHandler],
      }),
    },
  ];
}

// The document ---------------------------------------------------------------------------------

const KIB = 1024;

const description = (upstreams: readonly Upstream[]) => `A REST API for ${upstreams.map(({ name }) => name).join(' and ')}, behind one gateway.

- **Lists** are keyset-paginated: \`?limit=\` (1 to ${MAX_LIMIT}, default ${DEFAULT_LIMIT}) and \`?cursor=\` (the \`nextCursor\` of the previous page, \`null\` on the last one).
- **Query parameters** an operation does not list are a 400 (\`validation\`, naming each in \`errors\`) on every operation, item reads and writes included.
- **Concurrency**: every resource has a strong \`ETag\`; send it in \`If-Match\` on PUT, PATCH and DELETE (412 when it no longer matches) and in \`If-None-Match\` on GET (304).
- **PATCH** takes an RFC 7396 merge patch (\`application/merge-patch+json\`, or \`application/json\` as the same).
- **Errors** are \`application/problem+json\` (RFC 9457). A path that does not exist is a 404; a method a path does not support is a 405 with \`Allow\`.
- **Request bodies** are JSON in UTF-8, at most ${BODY_LIMIT_BYTES / KIB} KiB (a larger \`Content-Length\` is a 413 at once), nested at most ${MAX_JSON_DEPTH} levels, never compressed (\`Content-Encoding\` other than \`identity\` is a 415 with \`Accept-Encoding: identity\`), and must arrive within the gateway's body deadline (408).
- **Requests the HTTP server cannot take** are problem+json too, and close the connection: a malformed request (400), a body too slow (408), a request target over ${MAX_REQUEST_TARGET_BYTES / KIB} KiB (414), header fields over ${http.maxHeaderSize / KIB} KiB (431).
- **\`X-Request-Id\`** is on every response; send your own to trace a request through every process.
- **Access tokens**: every operation under \`/api\` but OPTIONS needs a bearer token (JWT) with one of the scopes it lists (${scopesOf(upstreams)}): a service's read or write scope, or its admin scope, which also sees and changes every owner's records; a deployment may make a service's reads public. No token or a bad one is a 401, a token without the scope a 403, both with \`WWW-Authenticate\`.
- **Rate limits**: each caller (its token's subject, or its address without a token) has a budget of reads and one of writes per minute; \`RateLimit-Policy\` and \`RateLimit\` say where it stands, and over it the answer is 429 with \`Retry-After\`.

## Problem types

${problemTypesTable()}`;

/** The document clients use: the gateway's own endpoints, and each upstream's paths as the gateway answers them. */
export function gatewayDocument(parts: readonly { upstream: Upstream; document: OpenApiDocument }[], deadlines: Deadlines, descriptions: readonly FeatureDescription[] = []): OpenApiDocument {
  const upstreams = parts.map(({ upstream }) => upstream);
  const own = [...probeEndpoints, ...gatewayEndpoints(upstreams[0]?.name ?? ''), revocationEndpoint()];
  const schemas: Record<string, oas31.SchemaObject | oas31.ReferenceObject> = {};
  for (const [name, schema] of parts.flatMap(({ document }) => Object.entries(document.components?.schemas ?? {}))) {
    if (name in schemas && JSON.stringify(schemas[name]) !== JSON.stringify(schema)) throw new Error(`Two different definitions of components.schemas.${name}`);
    schemas[name] = schema;
  }
  const paths = Object.assign({}, ...parts.map(({ upstream, document }) => proxiedPaths(upstream, document, deadlines, descriptions)), describe(own)) as ZodOpenApiPathsObject;
  const used = new Set(Object.values(paths).flatMap((item) => METHODS.flatMap((method) => item[method]?.tags ?? [])));
  const tags = [...parts.flatMap(({ document }) => document.tags ?? []), ...own.map(({ tag }) => tag)].filter(({ name }) => used.has(name));
  const info = { title: 'REST microservices API', version: '1.0.0', description: description(upstreams) };
  return apiDocument(info, paths, tags, { schemas, headers: Object.assign({}, GATEWAY_HEADERS, ...descriptions.map((description) => description.headers)), securitySchemes: securitySchemes(scopesOf(upstreams)) });
}

/** `GET /openapi.json`, `GET /docs` and the page's files. */
export function openApiRoutes(options: { upstreams: readonly Upstream[]; deadlines: Deadlines; descriptions: readonly FeatureDescription[] }): Router {
  const kept = new KeptDescription(options.upstreams, options.deadlines, (parts) => gatewayDocument(parts, options.deadlines, options.descriptions));
  const document: RequestHandler = async (req, res) => {
    const built = await kept.current(res.locals.log, res.locals.requestId);
    const coding = negotiateCoding(req.headers['accept-encoding'], built.variants);
    const etag = coding === 'identity' ? built.etag : `W/${built.etag}`;
    res.setHeader('Cache-Control', 'no-cache');
    res.setHeader('Vary', 'Accept-Encoding');
    res.setHeader('ETag', etag);
    // Weak comparison (If-None-Match): either coding's tag matches the document it names.
    if (etagMatches(req.headers['if-none-match'], built.etag, 'weak')) {
      res.status(304).end();
      return;
    }
    if (coding !== 'identity') res.setHeader('Content-Encoding', coding);
    res.type('application/json').send(coding === 'identity' ? built.body : built.variants[coding]);
  };
  return routerOf(gatewayEndpoints(options.upstreams[0]?.name ?? '', { document }));
}

import { apiDocument, describe, documentationTag, documentEndpoint, documentOutline, DOCUMENT_PATH, header, headers, probeEndpoints, problemResponse, problemTypesTable, routerOf, type Endpoint, type OpenApiDocument } from '@app/shared/api-description/openapi';
import { HttpProblem, problems } from '@app/shared/platform/problem';
import type { RequestHandler, Response, Router } from 'express';
import { z } from 'zod';
import { ASSETS, DOCS_FILES, sendDocsFile, sendDocsPage } from './docs-page.js';
import type { oas31, ZodOpenApiPathsObject, ZodOpenApiResponseObject } from 'zod-openapi';
import { servesPath } from './routing.js';
import type { Deadlines, Upstream } from './upstream.js';

/**
 * The API description clients use, `GET /openapi.json`, and a page that shows it, `GET /docs`.
 *
 * Each service serves the description of its own routes (generated from the declarations its
 * router is made of); the gateway fetches them when the document is requested, keeps the paths each
 * upstream serves, adds what the gateway itself does (its failures, its cache and rate-limit
 * headers, its own endpoints) and renders them together. A service that cannot be asked is replaced
 * by the last description it gave; before it ever gave one, the document is a 503 with Retry-After.
 */

/** The scopes of the upstreams (as auth/policy.ts grants them), as a Markdown list. */
const scopesOf = (upstreams: readonly Pick<Upstream, 'name'>[]) => upstreams.flatMap(({ name }) => [`\`${name}:read\``, `\`${name}:write\``]).join(', ');

const securitySchemes = (scopes: string): Record<string, oas31.SecuritySchemeObject> => ({
  bearerAuth: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
    description: `An access token (JWT) from the identity provider the gateway trusts, with the scopes the operation lists (\`scope\` claim, space-separated): ${scopes}. Locally, \`npm run token\` makes one.`,
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
};
const METHODS = ['get', 'head', 'post', 'put', 'patch', 'delete', 'options'] as const;

/**
 * A service's operation as the gateway answers it: its token and scope (401, 403, as auth/policy.ts
 * decides them), its rate limits (429, RateLimit headers), 502/504, and the cache headers on GET and HEAD.
 */
function throughGateway(upstream: Upstream, method: (typeof METHODS)[number], operation: oas31.OperationObject, route: string, deadlines: Deadlines) {
  const cached = method === 'get' || method === 'head';
  const scope = method === 'options' ? undefined : `${upstream.name}:${cached ? 'read' : 'write'}`;
  const problem = (status: number, kind: ConstructorParameters<typeof HttpProblem>[0] | undefined, detail: string, extra = {}) =>
    problemResponse(status, kind && { problem: new HttpProblem(kind, detail), at: route }, extra);
  const responses: Record<string, oas31.ResponseObject | ZodOpenApiResponseObject> = {
    ...(operation.responses as Record<string, oas31.ResponseObject>),
    401: problem(401, 'unauthorized', 'The access token has expired', { 'WWW-Authenticate': 'WWWAuthenticate' }),
    ...(scope && { 403: problem(403, 'insufficient-scope', `This request needs the ${scope} scope, which the access token does not grant`, { 'WWW-Authenticate': 'WWWAuthenticate' }) }),
    429: problem(429, 'rate-limited', 'Over the budget of read requests for this client; retry after 42 s', { 'Retry-After': 'RetryAfter' }),
    ...(operation.requestBody && { 408: problem(408, 'request-timeout', `The request body did not arrive within ${deadlines.requestBodyMs} ms`) }),
    414: problem(414, undefined, ''),
    431: problem(431, undefined, ''),
    502: problem(502, 'bad-gateway', `The ${upstream.name} service could not be reached`),
    504: problem(504, 'gateway-timeout', `The ${upstream.name} service did not answer within ${deadlines.upstreamMs} ms`),
  };
  const added = headers({ 'RateLimit-Policy': 'RateLimitPolicy', RateLimit: 'RateLimit', ...(cached && { 'X-Cache': 'XCache', Age: 'Age' }) });
  return {
    ...operation,
    ...(scope && { security: [{ bearerAuth: [scope] }] }),
    responses: Object.fromEntries(
      // HEAD answers carry no body, the gateway's own failures included.
      Object.entries(responses).map(([status, { content, ...response }]) => [status, { ...response, headers: { ...response.headers, ...added }, ...(content && method !== 'head' && { content }) }]),
    ),
  };
}

/** The paths `upstream` serves, from its own description, as the gateway answers them. */
export function proxiedPaths(upstream: Upstream, document: OpenApiDocument, deadlines: Deadlines): ZodOpenApiPathsObject {
  const paths: Record<string, oas31.PathItemObject> = {};
  for (const [route, item] of Object.entries(document.paths ?? {})) {
    if (!servesPath(upstream, route)) continue;
    paths[route] = { ...item, ...Object.fromEntries(METHODS.flatMap((method) => (item[method] ? [[method, throughGateway(upstream, method, item[method], route, deadlines)]] : []))) };
  }
  return paths as ZodOpenApiPathsObject;
}

/** The gateway's own endpoints: the metrics (`metrics` serves them), the docs page and the document (`send`). */
function gatewayEndpoints(firstUpstream: string, handlers: { metrics?: RequestHandler; document?: RequestHandler } = {}): Endpoint[] {
  const noCache = headers({ 'Cache-Control': 'CacheControlNoCache' });
  const text = (type: string) => ({ [type]: { schema: { type: 'string' as const } } });
  const get = (operationId: string, summary: string, more: Omit<Endpoint['operations']['GET'] & object, 'operationId' | 'summary'>) => ({ GET: { operationId, summary, ...more } });
  return [
    {
      path: '/metrics',
      tag: { name: 'operations' },
      operations: get('getMetrics', 'Prometheus metrics', {
        description: 'Requests by route, method and status with a latency histogram, and GET/HEAD cache outcomes (hit, miss, bypass, stale, collapsed).',
        responses: { 200: { description: 'The metrics, in Prometheus text format.', headers: headers({}), content: text('text/plain') } },
        ...(handlers.metrics && { handlers: [handlers.metrics] }),
      }),
    },
    documentEndpoint('This document: the parts every service describes, as the gateway answers them.', handlers.document, {
      500: problemResponse(500),
      503: problemResponse(503, { problem: problems.unavailable(`The API description of the ${firstUpstream} service is unavailable; try again shortly`), at: DOCUMENT_PATH }),
    }),
    {
      path: '/docs',
      tag: documentationTag,
      operations: get('getDocsPage', 'The documentation page', {
        description: `Swagger UI showing \`${DOCUMENT_PATH}\`. Everything it loads comes from this origin.`,
        responses: { 200: { description: 'The page.', headers: noCache, content: text('text/html') } },
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
        },
        handlers: [sendDocsFile as RequestHandler],
      }),
    },
  ];
}

// The document ---------------------------------------------------------------------------------

const description = (upstreams: readonly Upstream[]) => `A REST API for ${upstreams.map(({ name }) => name).join(' and ')}, behind one gateway.

- **Lists** are keyset-paginated: \`?limit=\` (1 to 200, default 50) and \`?cursor=\` (the \`nextCursor\` of the previous page, \`null\` on the last one).
- **Query parameters** an operation does not list are a 400 (\`validation\`, naming each in \`errors\`) on every operation, item reads and writes included.
- **Concurrency**: every resource has a strong \`ETag\`; send it in \`If-Match\` on PUT, PATCH and DELETE (412 when it no longer matches) and in \`If-None-Match\` on GET (304).
- **PATCH** takes an RFC 7396 merge patch (\`application/merge-patch+json\`, or \`application/json\` as the same).
- **Errors** are \`application/problem+json\` (RFC 9457). A path that does not exist is a 404; a method a path does not support is a 405 with \`Allow\`.
- **Request bodies** are JSON in UTF-8, at most 100 KiB (a larger \`Content-Length\` is a 413 at once), nested at most 32 levels, never compressed (\`Content-Encoding\` other than \`identity\` is a 415 with \`Accept-Encoding: identity\`), and must arrive within the gateway's body deadline (408).
- **Requests the HTTP server cannot take** are problem+json too, and close the connection: a malformed request (400), a body too slow (408), a request target over 8 KiB (414), header fields over 16 KiB (431).
- **\`X-Request-Id\`** is on every response; send your own to trace a request through every process.
- **Access tokens**: every operation under \`/api\` but OPTIONS needs a bearer token (JWT) with the scope it lists (${scopesOf(upstreams)}); a deployment may make product reads public. No token or a bad one is a 401, a token without the scope a 403, both with \`WWW-Authenticate\`.
- **Rate limits**: each caller (its token's subject, or its address without a token) has a budget of reads and one of writes per minute; \`RateLimit-Policy\` and \`RateLimit\` say where it stands, and over it the answer is 429 with \`Retry-After\`.

## Problem types

${problemTypesTable()}`;

/** The document clients use: the gateway's own endpoints, and each upstream's paths as the gateway answers them. */
export function gatewayDocument(parts: readonly { upstream: Upstream; document: OpenApiDocument }[], deadlines: Deadlines): OpenApiDocument {
  const upstreams = parts.map(({ upstream }) => upstream);
  const own = [...probeEndpoints, ...gatewayEndpoints(upstreams[0]?.name ?? '')];
  const schemas: Record<string, oas31.SchemaObject | oas31.ReferenceObject> = {};
  for (const [name, schema] of parts.flatMap(({ document }) => Object.entries(document.components?.schemas ?? {}))) {
    if (name in schemas && JSON.stringify(schemas[name]) !== JSON.stringify(schema)) throw new Error(`Two different definitions of components.schemas.${name}`);
    schemas[name] = schema;
  }
  const paths = Object.assign({}, ...parts.map(({ upstream, document }) => proxiedPaths(upstream, document, deadlines)), describe(own)) as ZodOpenApiPathsObject;
  const used = new Set(Object.values(paths).flatMap((item) => METHODS.flatMap((method) => item[method]?.tags ?? [])));
  const tags = [...parts.flatMap(({ document }) => document.tags ?? []), ...own.map(({ tag }) => tag)].filter(({ name }) => used.has(name));
  const info = { title: 'REST microservices API', version: '1.0.0', description: description(upstreams) };
  return apiDocument(info, paths, tags, { schemas, headers: GATEWAY_HEADERS, securitySchemes: securitySchemes(scopesOf(upstreams)) });
}

/** `GET /openapi.json`, `GET /metrics`, `GET /docs` and the page's files. */
export function openApiRoutes(options: { upstreams: readonly Upstream[]; deadlines: Deadlines; metrics: RequestHandler }): Router {
  const lastGood = new Map<string, OpenApiDocument>();

  async function describeUpstream(upstream: Upstream, res: Response): Promise<OpenApiDocument> {
    try {
      const response = await fetch(new URL(DOCUMENT_PATH, upstream.url), {
        headers: { accept: 'application/json', 'x-request-id': res.locals.requestId },
        signal: AbortSignal.timeout(options.deadlines.upstreamMs),
      });
      if (!response.ok) throw new Error(`${DOCUMENT_PATH} answered ${response.status}`);
      const document: unknown = await response.json();
      if (!documentOutline.safeParse(document).success) throw new Error(`${DOCUMENT_PATH} is not an OpenAPI 3.1 document`);
      lastGood.set(upstream.name, document as OpenApiDocument);
      return document as OpenApiDocument;
    } catch (error) {
      const previous = lastGood.get(upstream.name);
      res.locals.log.warn({ upstream: upstream.name, err: error, usingPrevious: previous !== undefined }, 'could not fetch the API description of an upstream');
      if (previous) return previous;
      throw problems.unavailable(`The API description of the ${upstream.name} service is unavailable; try again shortly`, error);
    }
  }

  const document: RequestHandler = async (_req, res) => {
    const parts = await Promise.all(options.upstreams.map(async (upstream) => ({ upstream, document: await describeUpstream(upstream, res) })));
    res.setHeader('Cache-Control', 'no-cache');
    res.type('application/json').send(JSON.stringify(gatewayDocument(parts, options.deadlines)));
  };
  return routerOf(gatewayEndpoints(options.upstreams[0]?.name ?? '', { metrics: options.metrics, document }));
}

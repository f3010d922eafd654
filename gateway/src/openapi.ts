import { createRequire } from 'node:module';
import path from 'node:path';
import { allowOnly } from '@app/shared/platform/http';
import {
  assembleDocument,
  commonComponents,
  documentPart,
  DOCUMENT_PATH,
  HTTP_METHODS,
  LICENSE,
  probesPart,
  problemExample,
  problemResponse,
  problemTypesTable,
  ref,
  requestIdHeader,
  routeItem,
  type ApiPart,
  type Header,
  type OpenApiDocument,
  type Operation,
  type PathItem,
  type Response,
} from '@app/shared/api-description/openapi';
import { HttpProblem, problems } from '@app/shared/platform/problem';
import express, { type NextFunction, type Request, type Response as ExpressResponse, type Router } from 'express';
import { servesPath, type Upstream } from './upstream.js';

/**
 * The API description clients use, `GET /openapi.json`, and a page that shows it, `GET /docs`.
 *
 * Each service serves the description of its own routes (generated from the schemas that validate
 * its requests); the gateway fetches them when the document is requested, keeps the paths each
 * upstream serves, adds what the gateway itself does (its failures, its cache headers, its own
 * endpoints) and merges them. A service that cannot be asked is replaced by the last description
 * it gave; before it ever gave one, the document is a 503 with Retry-After.
 */

const SECURITY_SCHEME = 'bearerAuth';

/** Headers the gateway adds to what the services describe. */
const GATEWAY_HEADERS: Record<string, Header> = {
  RateLimitPolicy: {
    description: 'The budget this request counts against (IETF RateLimit headers): `q` requests per `w` seconds, reads and writes apart. On every response under `/api` while rate limiting is on.',
    required: false,
    schema: { type: 'string', pattern: '^"(read|write)";q=\\d+;w=\\d+$' },
    example: '"read";q=6000;w=60',
  },
  RateLimit: {
    description: 'What is left of that budget: `r` requests, for `t` more seconds.',
    required: false,
    schema: { type: 'string', pattern: '^"(read|write)";r=\\d+;t=\\d+$' },
    example: '"read";r=5999;t=60',
  },
  WWWAuthenticate: {
    description: 'The bearer challenge (RFC 6750): `error="invalid_token"` for a token that is expired, badly signed or not for this API; no error when there was no token; `error="insufficient_scope"` with the `scope` needed on 403.',
    required: true,
    schema: { type: 'string', pattern: '^Bearer ' },
    example: 'Bearer realm="api", error="invalid_token", error_description="The access token has expired"',
  },
};

const SECURITY_SCHEMES = {
  [SECURITY_SCHEME]: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
    description:
      'An access token (JWT) from the identity provider the gateway trusts, with the scopes the operation lists (`scope` claim, space-separated): `users:read`, `users:write`, `products:read`, `products:write`. Locally, `npm run token` makes one.',
  },
};

/** The scope an operation needs (as the gateway decides it, auth/policy.ts); none for OPTIONS. */
function scopeOf(upstream: Upstream, method: string): string | undefined {
  if (method === 'options') return undefined;
  return `${upstream.name}:${method === 'get' || method === 'head' ? 'read' : 'write'}`;
}

/**
 * A service's operation as the gateway answers it: its token and scope (401, 403), its rate limits
 * (429, RateLimit headers), 502/504, and the cache headers on GET and HEAD.
 */
function throughGateway(upstream: Upstream, method: string, operation: Operation, route: string): Operation {
  const cached = method === 'get' || method === 'head';
  const scope = scopeOf(upstream, method);
  const rateLimitHeaders = { 'RateLimit-Policy': ref('headers', 'RateLimitPolicy'), RateLimit: ref('headers', 'RateLimit') };
  const responses: Record<string, Response> = {
    ...operation.responses,
    401: problemResponse(401, {
      headers: { 'WWW-Authenticate': ref('headers', 'WWWAuthenticate') },
      example: problemExample(new HttpProblem('unauthorized', 'The access token has expired'), route),
    }),
    ...(scope && {
      403: problemResponse(403, {
        headers: { 'WWW-Authenticate': ref('headers', 'WWWAuthenticate') },
        example: problemExample(new HttpProblem('insufficient-scope', `This request needs the ${scope} scope, which the access token does not grant`), route),
      }),
    }),
    429: problemResponse(429, {
      headers: { 'Retry-After': ref('headers', 'RetryAfter') },
      example: problemExample(new HttpProblem('rate-limited', 'Over the budget of read requests for this client; retry after 42 s'), route),
    }),
    ...(operation.requestBody
      ? { 408: problemResponse(408, { example: problemExample(new HttpProblem('request-timeout', 'The request body did not arrive within 30000 ms'), route) }) }
      : {}),
    414: problemResponse(414),
    431: problemResponse(431),
    502: problemResponse(502, { example: problemExample(new HttpProblem('bad-gateway', `The ${upstream.name} service could not be reached`), route) }),
    504: problemResponse(504, {
      example: problemExample(new HttpProblem('gateway-timeout', `The ${upstream.name} service did not answer within 10000 ms`), route),
    }),
  };
  return {
    ...operation,
    ...(scope && { security: [{ [SECURITY_SCHEME]: [scope] }] }),
    responses: Object.fromEntries(
      Object.entries(responses).map(([status, { content, ...response }]) => [
        status,
        {
          ...response,
          headers: {
            ...response.headers,
            ...rateLimitHeaders,
            ...(cached ? { 'X-Cache': ref('headers', 'XCache'), Age: ref('headers', 'Age') } : {}),
          },
          // HEAD answers carry no body, the gateway's own failures included.
          ...(content && method !== 'head' ? { content } : {}),
        },
      ]),
    ),
  };
}

/** The paths `upstream` serves, from its own description, as the gateway answers them. */
export function proxiedPart(upstream: Upstream, document: OpenApiDocument): ApiPart {
  const paths: Record<string, PathItem> = {};
  for (const [route, item] of Object.entries(document.paths)) {
    if (!servesPath(upstream, route)) continue;
    const through: PathItem = { ...item };
    for (const method of HTTP_METHODS) {
      const operation = item[method];
      if (operation) through[method] = throughGateway(upstream, method, operation, route);
    }
    paths[route] = through;
  }
  const usedTags = new Set(Object.values(paths).flatMap((item) => HTTP_METHODS.flatMap((method) => item[method]?.tags ?? [])));
  const components = { ...document.components, headers: { ...document.components.headers, ...GATEWAY_HEADERS } };
  return { tags: document.tags.filter(({ name }) => usedTags.has(name)), paths, components };
}

// The docs page -------------------------------------------------------------------------------

const swaggerUi = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
/** The files of swagger-ui-dist the page loads, by their media type. */
const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css',
  'swagger-ui-bundle.js': 'text/javascript',
  'favicon-32x32.png': 'image/png',
  'favicon-16x16.png': 'image/png',
};
const INITIALIZER = 'swagger-initializer.js';
const DOCS_FILES = [...Object.keys(ASSETS), INITIALIZER];

/** Only this origin: the page works offline, and nothing it shows can load anything from elsewhere. */
const CONTENT_SECURITY_POLICY = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

const DOCS_PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>API documentation</title>
  <link rel="stylesheet" href="/docs/swagger-ui.css">
  <link rel="icon" type="image/png" href="/docs/favicon-32x32.png" sizes="32x32">
  <link rel="icon" type="image/png" href="/docs/favicon-16x16.png" sizes="16x16">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/swagger-ui-bundle.js"></script>
  <script src="/docs/${INITIALIZER}"></script>
</body>
</html>
`;

// validatorUrl: null, or Swagger UI sends the document to validator.swagger.io.
const INITIALIZER_SCRIPT = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({
    url: '${DOCUMENT_PATH}',
    dom_id: '#swagger-ui',
    deepLinking: true,
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis],
    layout: 'BaseLayout',
  });
});
`;

/** `GET /metrics`: Prometheus text (see metrics.ts). */
function metricsPart(): ApiPart {
  const tag = 'operations';
  return {
    tags: [],
    components: { schemas: {}, headers: {}, parameters: {} },
    paths: {
      '/metrics': routeItem(
        ['GET'],
        {
          GET: {
            operationId: 'getMetrics',
            summary: 'Prometheus metrics',
            description: 'Requests by route, method and status with a latency histogram, and GET/HEAD cache outcomes (hit, miss, bypass, stale, collapsed).',
            tags: [tag],
            parameters: [ref('parameters', 'RequestId')],
            responses: { 200: { description: 'The metrics, in Prometheus text format.', headers: requestIdHeader(), content: { 'text/plain': { schema: { type: 'string' } } } } },
          },
        },
        { optionsId: 'optionsMetrics', tag },
      ),
    },
  };
}

function docsPart(): ApiPart {
  const tag = 'documentation';
  const noCache = { ...requestIdHeader(), 'Cache-Control': ref('headers', 'CacheControlNoCache') };
  const mediaTypes = [...new Set(Object.values(ASSETS))];
  return {
    tags: [{ name: tag, description: 'This description, and a page that shows it.' }],
    paths: {
      '/docs': routeItem(
        ['GET'],
        {
          GET: {
            operationId: 'getDocsPage',
            summary: 'The documentation page',
            description: `Swagger UI showing \`${DOCUMENT_PATH}\`. Everything it loads comes from this origin.`,
            tags: [tag],
            parameters: [ref('parameters', 'RequestId')],
            responses: { 200: { description: 'The page.', headers: noCache, content: { 'text/html': { schema: { type: 'string' } } } } },
          },
        },
        { optionsId: 'optionsDocsPage', tag },
      ),
      '/docs/{file}': routeItem(
        ['GET'],
        {
          GET: {
            operationId: 'getDocsFile',
            summary: 'A file of the documentation page',
            tags: [tag],
            parameters: [ref('parameters', 'RequestId')],
            responses: {
              200: {
                description: 'The file.',
                headers: noCache,
                content: Object.fromEntries(mediaTypes.map((type) => [type, { schema: { type: 'string', contentMediaType: type } }])),
              },
              304: { description: 'Not modified since the copy the client has (`If-Modified-Since`).', headers: noCache },
              404: problemResponse(404, { example: problemExample(problems.notFound('No file nope.js in /docs'), '/docs/nope.js') }),
            },
          },
        },
        {
          optionsId: 'optionsDocsFile',
          tag,
          parameters: [{ name: 'file', in: 'path', description: 'The file name.', required: true, schema: { type: 'string', enum: DOCS_FILES } }],
        },
      ),
    },
    components: commonComponents(),
  };
}

function sendDocsFile(req: Request<{ file: string }>, res: ExpressResponse, next: NextFunction) {
  const { file } = req.params;
  res.setHeader('Cache-Control', 'no-cache');
  if (file === INITIALIZER) {
    res.type('text/javascript').send(INITIALIZER_SCRIPT);
    return;
  }
  if (!(file in ASSETS)) throw problems.notFound(`No file ${file} in /docs`);
  // Revalidated by Last-Modified (the app sends no ETags but the resources').
  res.sendFile(file, { root: swaggerUi, cacheControl: false }, (error) => {
    if (error) next(error);
  });
}

// The document ---------------------------------------------------------------------------------

const DESCRIPTION = `A REST API for users and products, behind one gateway.

- **Lists** are keyset-paginated: \`?limit=\` (1 to 200, default 50) and \`?cursor=\` (the \`nextCursor\` of the previous page, \`null\` on the last one).
- **Concurrency**: every resource has a strong \`ETag\`; send it in \`If-Match\` on PUT, PATCH and DELETE (412 when it no longer matches) and in \`If-None-Match\` on GET (304).
- **PATCH** takes an RFC 7396 merge patch (\`application/merge-patch+json\`, or \`application/json\` as the same).
- **Errors** are \`application/problem+json\` (RFC 9457). A path that does not exist is a 404; a method a path does not support is a 405 with \`Allow\`.
- **Request bodies** are JSON in UTF-8, at most 100 KiB (a larger \`Content-Length\` is a 413 at once), nested at most 32 levels, never compressed (\`Content-Encoding\` other than \`identity\` is a 415 with \`Accept-Encoding: identity\`), and must arrive within the gateway's body deadline (408).
- **Requests the HTTP server cannot take** are problem+json too, and close the connection: a malformed request (400), a body too slow (408), a request target over 8 KiB (414), header fields over 16 KiB (431).
- **\`X-Request-Id\`** is on every response; send your own to trace a request through every process.
- **Access tokens**: every operation under \`/api\` but OPTIONS needs a bearer token (JWT) with the scope it lists (\`users:read\`, \`users:write\`, \`products:read\`, \`products:write\`); a deployment may make product reads public. No token or a bad one is a 401, a token without the scope a 403, both with \`WWW-Authenticate\`.
- **Rate limits**: each caller (its token's subject, or its address without a token) has a budget of reads and one of writes per minute; \`RateLimit-Policy\` and \`RateLimit\` say where it stands, and over it the answer is 429 with \`Retry-After\`.

## Problem types

${problemTypesTable()}`;

/** The document clients use: the gateway's own endpoints, and each upstream's paths as the gateway answers them. */
export function gatewayDocument(parts: readonly { upstream: Upstream; document: OpenApiDocument }[]): OpenApiDocument {
  const info = { title: 'REST microservices API', version: '1.0.0', description: DESCRIPTION, license: LICENSE };
  const gatewayOwn = [
    probesPart(),
    metricsPart(),
    documentPart({
      description: 'This document: the parts every service describes, as the gateway answers them.',
      responses: {
        500: problemResponse(500),
        503: problemResponse(503, {
          example: problemExample(problems.unavailable('The API description of the users service is unavailable; try again shortly'), DOCUMENT_PATH),
        }),
      },
    }),
    docsPart(),
  ];
  const document = assembleDocument(info, [...parts.map(({ upstream, document }) => proxiedPart(upstream, document)), ...gatewayOwn]);
  return { ...document, components: { ...document.components, securitySchemes: SECURITY_SCHEMES } };
}

function isDocument(value: unknown): value is OpenApiDocument {
  const document = value as Partial<OpenApiDocument> | null;
  return (
    typeof document === 'object' &&
    document !== null &&
    typeof document.openapi === 'string' &&
    document.openapi.startsWith('3.1.') &&
    typeof document.paths === 'object' &&
    typeof document.components === 'object'
  );
}

/** `GET /openapi.json`, `GET /docs` and the page's files. */
export function openApiRoutes(options: { upstreams: readonly Upstream[]; timeoutMs: number }): Router {
  const lastGood = new Map<string, OpenApiDocument>();

  async function describe(upstream: Upstream, res: ExpressResponse): Promise<OpenApiDocument> {
    try {
      const response = await fetch(new URL(DOCUMENT_PATH, upstream.url), {
        headers: { accept: 'application/json', 'x-request-id': res.locals.requestId },
        signal: AbortSignal.timeout(options.timeoutMs),
      });
      if (!response.ok) throw new Error(`${DOCUMENT_PATH} answered ${response.status}`);
      const document: unknown = await response.json();
      if (!isDocument(document)) throw new Error(`${DOCUMENT_PATH} is not an OpenAPI 3.1 document`);
      lastGood.set(upstream.name, document);
      return document;
    } catch (error) {
      const previous = lastGood.get(upstream.name);
      res.locals.log.warn({ upstream: upstream.name, err: error, usingPrevious: previous !== undefined }, 'could not fetch the API description of an upstream');
      if (previous) return previous;
      throw problems.unavailable(`The API description of the ${upstream.name} service is unavailable; try again shortly`, error);
    }
  }

  const router = express.Router();
  router.get(DOCUMENT_PATH, async (_req, res) => {
    const parts = await Promise.all(options.upstreams.map(async (upstream) => ({ upstream, document: await describe(upstream, res) })));
    const document = gatewayDocument(parts);
    res.setHeader('Cache-Control', 'no-cache');
    res.type('application/json').send(JSON.stringify(document));
  });
  router.get('/docs', (_req, res) => {
    res.setHeader('Cache-Control', 'no-cache');
    res.setHeader('Content-Security-Policy', CONTENT_SECURITY_POLICY);
    res.type('html').send(DOCS_PAGE);
  });
  router.get('/docs/:file', sendDocsFile);
  router.all([DOCUMENT_PATH, '/docs', '/docs/:file'], allowOnly(['GET']));
  return router;
}

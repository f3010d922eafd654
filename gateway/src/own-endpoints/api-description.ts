import http from 'node:http';
import { apiDocument, describe, problemSchemaNamed, documentationTag, documentEndpoint, DOCUMENT_PATH, headers, probeEndpoints, problemResponse, problemTypesTable, routerOf, type Endpoint, type OpenApiDocument } from '@app/shared/api-description/openapi';
import { BODY_LIMIT_BYTES, MAX_JSON_DEPTH } from '@app/shared/platform/http/bodies';
import { MAX_REQUEST_TARGET_BYTES } from '@app/shared/platform/http/malformed-requests';
import { kindOf } from '@app/shared/platform/http/method-kind';
import { problems } from '@app/shared/platform/problem';
import { DEFAULT_LIMIT, etagMatches, MAX_LIMIT } from '@app/shared/resource/rules';
import type { RequestHandler, Router } from 'express';
import type { z } from 'zod';
import { negotiateCoding } from '../cache/compression.js';
import { revocationEndpoint } from '../auth/revocation-endpoint.js';
import { ASSETS, DOCS_FILES, sendDocsFile, sendDocsPage } from './docs-page.js';
import { KeptDescription } from './kept-description.js';
import type { oas31, ZodOpenApiPathsObject, ZodOpenApiResponseObject } from 'zod-openapi';
import type { FeatureDescription } from '../feature.js';
import { overBudgetResponse } from '../rate-limits/description.js';
import { servesPath } from '../routing/service-routes.js';
import type { Deadlines } from '../proxy/upstream.js';
import type { Upstream } from '../upstream-model.js';

/**
 * The API description clients use, `GET /openapi.json`, and a page that shows it, `GET /docs`.
 *
 * Each service serves the description of its own routes (generated from the declarations its
 * router is made of); the gateway keeps the paths each upstream serves, adds what each of its
 * features describes (feature.ts: FeatureDescription, from the feature's folder) and its own
 * endpoints, and renders them together, once for each change of what the services describe
 * (kept-description.ts). This file is the frame: the overview, what the HTTP server refuses.
 */

const METHODS = ['get', 'head', 'post', 'put', 'patch', 'delete', 'options'] as const;

/**
 * A service's operation as the gateway answers it: what its HTTP server refuses before any feature
 * (414, 431), then what each feature adds (feature.ts: FeatureDescription), in the list's order.
 */
function throughGateway(upstream: Upstream, method: (typeof METHODS)[number], operation: oas31.OperationObject, route: string, deadlines: Deadlines, descriptions: readonly FeatureDescription[]) {
  const kind = kindOf(method.toUpperCase());
  const fragments = descriptions.map((description) => description.operation?.({ upstream, method, kind, route, operation, deadlines }) ?? {});
  const responses: Record<string, oas31.ResponseObject | ZodOpenApiResponseObject> = Object.assign(
    { ...(operation.responses as Record<string, oas31.ResponseObject>), 414: problemResponse(414), 431: problemResponse(431) },
    ...fragments.map((fragment) => fragment.responses),
  );
  const added = headers(Object.assign({}, ...fragments.map((fragment) => fragment.headers)));
  const security = fragments.flatMap((fragment) => fragment.security ?? []);
  return {
    ...operation,
    ...(security.length > 0 && { security }),
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
  const overBudget = overBudgetResponse(DOCUMENT_PATH);
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

/** What the features say in the overview (feature.ts: `overview`), in the list's order, a bullet each. */
const featureBullets = (upstreams: readonly Upstream[], descriptions: readonly FeatureDescription[]) =>
  descriptions.flatMap((description) => description.overview?.(upstreams) ?? []).map((bullet) => `\n- ${bullet}`).join('');

const description = (upstreams: readonly Upstream[], descriptions: readonly FeatureDescription[]) => `A REST API for ${upstreams.map(({ name }) => name).join(' and ')}, behind one gateway.

- **Lists** are keyset-paginated: \`?limit=\` (1 to ${MAX_LIMIT}, default ${DEFAULT_LIMIT}) and \`?cursor=\` (the \`nextCursor\` of the previous page, \`null\` on the last one).
- **Query parameters** an operation does not list are a 400 (\`validation\`, naming each in \`errors\`) on every operation, item reads and writes included.
- **Concurrency**: every resource has a strong \`ETag\`; send it in \`If-Match\` on PUT, PATCH and DELETE (412 when it no longer matches) and in \`If-None-Match\` on GET (304).
- **PATCH** takes an RFC 7396 merge patch (\`application/merge-patch+json\`, or \`application/json\` as the same).
- **Errors** are \`application/problem+json\` (RFC 9457). A path that does not exist is a 404; a method a path does not support is a 405 with \`Allow\`.
- **Request bodies** are JSON in UTF-8, at most ${BODY_LIMIT_BYTES / KIB} KiB by default, or the limit a service sets for its own (its 413 names it; a larger \`Content-Length\` is a 413 at once), nested at most ${MAX_JSON_DEPTH} levels, never compressed (\`Content-Encoding\` other than \`identity\` is a 415 with \`Accept-Encoding: identity\`), and must arrive within the gateway's body deadline (408).
- **Requests the HTTP server cannot take** are problem+json too, and close the connection: a malformed request (400), a body too slow (408), a request target over ${MAX_REQUEST_TARGET_BYTES / KIB} KiB (414), header fields over ${http.maxHeaderSize / KIB} KiB (431).
- **\`X-Request-Id\`** is on every response; send your own to trace a request through every process.${featureBullets(upstreams, descriptions)}

## Problem types

${problemTypesTable()}`;

/** The document clients use: the gateway's own endpoints, and each upstream's paths as the gateway answers them. */
export function gatewayDocument(parts: readonly { upstream: Upstream; document: OpenApiDocument }[], deadlines: Deadlines, descriptions: readonly FeatureDescription[] = []): OpenApiDocument {
  const upstreams = parts.map(({ upstream }) => upstream);
  const own = [...probeEndpoints, ...gatewayEndpoints(upstreams[0]?.name ?? ''), revocationEndpoint()];
  const schemas: Record<string, z.ZodType | oas31.SchemaObject | oas31.ReferenceObject> = {};
  for (const [name, schema] of parts.flatMap(({ document }) => Object.entries(document.components?.schemas ?? {}))) {
    const problemSchema = problemSchemaNamed(name);
    if (problemSchema) {
      schemas[name] = problemSchema;
      continue;
    }
    if (name in schemas && JSON.stringify(schemas[name]) !== JSON.stringify(schema)) throw new Error(`Two different definitions of components.schemas.${name}`);
    schemas[name] = schema;
  }
  const paths = Object.assign({}, ...parts.map(({ upstream, document }) => proxiedPaths(upstream, document, deadlines, descriptions)), describe(own)) as ZodOpenApiPathsObject;
  const used = new Set(Object.values(paths).flatMap((item) => METHODS.flatMap((method) => item[method]?.tags ?? [])));
  const tags = [...parts.flatMap(({ document }) => document.tags ?? []), ...own.map(({ tag }) => tag)].filter(({ name }) => used.has(name));
  const info = { title: 'REST microservices API', version: '1.0.0', description: description(upstreams, descriptions) };
  return apiDocument(info, paths, tags, { schemas, headers: Object.assign({}, ...descriptions.map((description) => description.headers)), securitySchemes: Object.assign({}, ...descriptions.map((description) => description.securitySchemes?.(upstreams))) });
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

import express, { type RequestHandler, type Router } from 'express';
import { z } from 'zod';
import { createDocument, type oas31, type ZodOpenApiOperationObject, type ZodOpenApiPathItemObject, type ZodOpenApiPathsObject, type ZodOpenApiResponseObject } from 'zod-openapi';
import { BODY_LIMIT_BYTES, jsonBody } from '../platform/http/bodies.js';
import { IDEMPOTENCY_KEY_HEADER, REQUEST_ID_HEADER, RETRY_AFTER_HEADER } from '../platform/http/headers.js';
import { REQUEST_ID } from '../platform/http/observation.js';
import { allowOnly, answeredMethods } from '../platform/http/routing.js';
import { HttpProblem, PROBLEM_BASE, problemKinds, problemTypes, RETRY_AFTER_SECONDS, type ProblemKind } from '../platform/problem.js';
import { parseOrThrow } from '../platform/validation.js';

/**
 * The API description (OpenAPI 3.1, rendered by zod-openapi): each endpoint is declared once, as an
 * `Endpoint` — its operations with their zod schemas, responses and handlers — and `mount` routes it
 * (query validated by the declared schema) while `describe` documents it; HEAD and OPTIONS come
 * with them. Field rules are never written here: they are the zod schemas that validate requests.
 */

export type OpenApiDocument = oas31.OpenAPIObject;
export const DOCUMENT_PATH = '/openapi.json';

// Read anew each time (problemKinds): a gateway feature may add problem types after this module is
// loaded (addProblemType), and every enum below is listed again when a document is rendered.
const kindsWith = (status: number) => problemKinds().filter((kind) => problemTypes[kind].status === status);
const typesOf = (kinds: readonly ProblemKind[]) => kinds.map((kind) => PROBLEM_BASE + kind);
const titlesOf = (kinds: readonly ProblemKind[]) => kinds.map((kind) => problemTypes[kind].title);
const statusDescription = (status: number) => `A problem with status ${status}: ${kindsWith(status).map((kind) => `\`${kind}\``).join(', ')}.`;

/** The problem types as a Markdown table. */
export function problemTypesTable(): string {
  const rows = problemKinds().map((kind) => `| \`${PROBLEM_BASE}${kind}\` | ${problemTypes[kind].status} | ${problemTypes[kind].title} |`);
  return ['| `type` | Status | Title |', '|---|---|---|', ...rows].join('\n');
}

const problemTypeDescription = () => `A stable identifier of the kind of problem:\n\n${problemTypesTable()}`;
const problemType = z.enum(typesOf(problemKinds())).meta({
  id: 'ProblemType',
  description: problemTypeDescription(),
  override: ({ jsonSchema }) => {
    jsonSchema.enum = typesOf(problemKinds());
    jsonSchema.description = problemTypeDescription();
  },
});
const fieldError = z
  .strictObject({
    path: z.string().meta({ description: 'The field, dot-separated for nested fields (`price.amount`); `body` for the body as a whole.' }),
    message: z.string().meta({ description: 'What is wrong with it.' }),
  })
  .meta({ id: 'FieldError', description: 'One invalid field of a request.' });
const problem = z
  .strictObject({
    type: problemType,
    title: z.string().meta({ description: 'The title of the problem type.' }),
    status: z.int().min(400).max(599).meta({ description: 'The HTTP status code.' }),
    detail: z.string().meta({ description: 'What went wrong in this occurrence.' }),
    instance: z.string().meta({ description: 'The path of the request.' }),
    errors: z.array(fieldError).optional().meta({ description: 'Each invalid field (validation problems) or the field that is taken (conflicts).' }),
  })
  .meta({ id: 'Problem', description: 'An error (RFC 9457 problem details). Never a stack trace, SQL text or internal host name.' });
/** The problem schema of one status: its types and titles listed when a document is rendered. */
function statusProblem(status: number): z.ZodType {
  const kinds = kindsWith(status);
  const typed = z.intersection(
    problem,
    z.looseObject({
      type: z.enum(typesOf(kinds)).meta({ override: ({ jsonSchema }) => void (jsonSchema.enum = typesOf(kindsWith(status))) }),
      title: z.enum(titlesOf(kinds)).meta({ override: ({ jsonSchema }) => void (jsonSchema.enum = titlesOf(kindsWith(status))) }),
      status: z.literal(status),
    }),
  );
  return typed.meta({ id: `Problem${status}`, description: statusDescription(status), override: ({ jsonSchema }) => void (jsonSchema.description = statusDescription(status)) });
}
const problemOf = new Map<number, z.ZodType>();
/** The problem schema of `status`, made on first use (a status only an added problem type has, too); undefined when no type has it. */
const problemSchemaOf = (status: number): z.ZodType | undefined => {
  if (!problemOf.has(status) && kindsWith(status).length > 0) problemOf.set(status, statusProblem(status));
  return problemOf.get(status);
};

/**
 * The problem schema a document names `name` (`Problem`, `ProblemType`, `Problem<status>`), as this
 * process renders it: a document merging others' (the gateway's) renders theirs anew, with the
 * problem types it knows and they do not (its features').
 */
export function problemSchemaNamed(name: string): z.ZodType | undefined {
  if (name === 'Problem') return problem;
  if (name === 'ProblemType') return problemType;
  const status = /^Problem(\d{3})$/.exec(name)?.[1];
  return status === undefined ? undefined : problemSchemaOf(Number(status));
}

/** A response header's schema, description and example, for `components.headers`. */
export const header = (schema: z.ZodType, description: string, example?: unknown) => schema.meta({ description, ...(example !== undefined && { header: { example } }) });
const HEADERS = {
  XRequestId: header(z.string().regex(REQUEST_ID), 'The request id: the one the request carried when it is 1 to 128 of `A-Za-z0-9._-`, a new one otherwise. On every response and every log line.'),
  ETag: header(z.string().regex(/^"[!#-~]*"$/), 'The strong entity tag of the resource version: send it in `If-Match` (writes) or `If-None-Match` (reads).', '"1"'),
  Location: header(z.string(), 'The path of the new resource.'),
  CacheControlNoCache: header(z.literal('no-cache'), 'Caches must revalidate (with the ETag) before reusing the response.'),
  CacheControlNoStore: header(z.literal('no-store'), 'Never cached.'),
  CacheControlPage: header(z.enum(['no-cache', 'no-store']), '`no-cache` (caches must revalidate before reusing the response), or `no-store` (never cached) when `cursor` names no item the caller can see: an item deleted since, or a cursor this API never issued.'),
  AcceptEncoding: header(z.literal('identity').optional(), 'On a 415 caused by `Content-Encoding`: the content codings a request body may have (only `identity`: bodies are not compressed).'),
  IdempotentReplayed: header(z.literal('true').optional(), '`true` on a response replayed for a retry with the same `Idempotency-Key`: the request did not run again.'),
  RetryAfter: header(z.int().min(0), 'Seconds to wait before retrying.', RETRY_AFTER_SECONDS),
  RetryAfterInFlight: header(z.int().min(1).optional(), 'On an `idempotency-in-flight` problem: seconds until the claim of the request in progress with the same key lapses, at the latest.', 6),
};
/** Response headers, by their names in `components.headers` (the shared ones, and those a document adds). */
export const headers = (names: Record<string, string>): oas31.HeadersObject =>
  Object.fromEntries(Object.entries({ [REQUEST_ID_HEADER]: 'XRequestId', ...names }).map(([name, id]) => [name, { $ref: `#/components/headers/${id}` }]));

const parameter = (name: string, description: string, example: string, schema: z.ZodType = z.string()) =>
  schema.optional().meta({ description, param: { in: 'header', name, example } });
const PARAMETERS = {
  RequestId: parameter(REQUEST_ID_HEADER, 'An id for this request, echoed on the response and logged by every process it passes (used when 1 to 128 of `A-Za-z0-9._-`; replaced otherwise).', 'checkout-42'),
  IfMatch: parameter('If-Match', 'Proceed only if the resource still has one of these ETags (strong comparison: a `W/` tag never matches), or `*` (it exists); 412 otherwise, and nothing changes. A collection has no ETag: only `*` holds on it. A value that is neither `*` nor a list of entity tags is a 400.', '"1"'),
  IdempotencyKey: parameter(
    IDEMPOTENCY_KEY_HEADER,
    'Makes a retry safe (IETF draft-ietf-httpapi-idempotency-key-header): 1 to 255 visible ASCII characters (400 otherwise), unique per request, e.g. a UUID. The first request with a key runs; a retry with the same key and the same request (method, path, body) gets the stored response — same status, body, `Location` and `ETag`, with `Idempotent-Replayed: true` — without running again, on any replica, for 24 hours (or until the stored responses of the caller pass its budget, when its oldest keys go first). The same key with a different request is a 422; while the first is still in progress, a 409 with `Retry-After` (the seconds until its claim lapses, at the latest). A request that fails changes nothing and does not use its key up. Keys are scoped to the resource collection and to the subject of the bearer token.',
    '0193a5c2-7b1e-7c4d-9a61-2f0c1b9e8d40',
    z.string().regex(/^[!-~]{1,255}$/),
  ),
  IfNoneMatch: parameter('If-None-Match', 'Answer 304 without a body when the resource still has one of these ETags (weak comparison), or for `*`. A malformed value is ignored.', '"1"'),
  IfNoneMatchWrite: parameter('If-None-Match', 'Proceed only if the resource has none of these ETags (weak comparison); `*` proceeds only where nothing exists, so on an existing item, and on a collection, it is a 412 and nothing changes. A value that is neither `*` nor a list of entity tags is a 400.', '*'),
};
/** Request parameters, by their names in `components.parameters` (`describe` adds X-Request-Id to every operation). */
export const parameters = (...names: (keyof typeof PARAMETERS)[]): oas31.ReferenceObject[] => names.map((name) => ({ $ref: `#/components/parameters/${name}` }));

/**
 * A problem+json response of `status` (Retry-After on 503, Accept-Encoding on 415), with a problem as
 * its example; described by the titles of `kinds`, the problem types the operation may answer with
 * (every type of that status unless it says).
 */
export function problemResponse(
  status: number,
  example?: { problem: HttpProblem; at: string },
  extraHeaders: Record<string, string> = {},
  kinds: readonly ProblemKind[] = kindsWith(status),
): ZodOpenApiResponseObject {
  const schema = problemSchemaOf(status);
  if (!schema) throw new Error(`No problem type has status ${status}`);
  return {
    description: kinds.map((kind) => problemTypes[kind].title).join('; '),
    headers: headers({ ...(status === 503 && { [RETRY_AFTER_HEADER]: 'RetryAfter' }), ...(status === 415 && { 'Accept-Encoding': 'AcceptEncoding' }), ...extraHeaders }),
    content: { 'application/problem+json': { schema, ...(example && { example: example.problem.toJSON(example.at) }) } },
  };
}

export const json = (schema: z.ZodType | oas31.SchemaObject, example?: unknown) => ({ 'application/json': { schema, ...(example === undefined ? {} : { example }) } });

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
/**
 * One operation: what the document says of it, and the handlers the router runs after what the
 * declaration validates: the query (parsed into `res.locals.query`; a parameter it does not declare
 * is a 400) and the body's media type.
 */
export interface Operation extends Omit<ZodOpenApiOperationObject, 'tags'> {
  handlers?: RequestHandler[];
}
/** A path, declared once: its operations and the tag they are listed under. */
export interface Endpoint {
  path: string;
  tag: oas31.TagObject;
  parameters?: ZodOpenApiPathItemObject['parameters'];
  operations: Partial<Record<Method, Operation>>;
}

const NO_QUERY = z.strictObject({});

/**
 * Routes `endpoints` on `router`: each operation's handlers, and `allowOnly` for the other methods;
 * request bodies of at most `bodyLimitBytes`.
 */
export function mount(router: Router, endpoints: readonly Endpoint[], bodyLimitBytes = BODY_LIMIT_BYTES): Router {
  for (const { path, operations } of endpoints) {
    const route = router.route(path.replace(/\{(\w+)\}/g, ':$1'));
    for (const [method, { requestParams, requestBody, handlers = [] }] of Object.entries(operations)) {
      // An operation that declares no query takes none: a query string never varies its answer.
      const query = (requestParams?.query ?? NO_QUERY) as z.ZodType;
      const validated: RequestHandler = (req, res, next) => ((res.locals.query = parseOrThrow(query, req.query)), next());
      route[method.toLowerCase() as 'get'](validated, ...(requestBody ? jsonBody(Object.keys(requestBody.content), bodyLimitBytes) : []), ...handlers);
    }
    route.all(allowOnly(Object.keys(operations)));
  }
  return router;
}

/** An express router of `endpoints`, with exact paths only, as request-target.ts spells them, taking bodies of at most `bodyLimitBytes`. */
export const routerOf = (endpoints: readonly Endpoint[], bodyLimitBytes = BODY_LIMIT_BYTES) => mount(express.Router({ strict: true, caseSensitive: true }), endpoints, bodyLimitBytes);

/**
 * The path items of `endpoints`: each operation with X-Request-Id, HEAD as GET without bodies (where
 * there is a GET), and OPTIONS as `allowOnly` answers it (its id from GET's, or else the first
 * operation's: `getUser` → `optionsUser`, `createRevocation` → `optionsRevocation`).
 */
export function describe(endpoints: readonly Endpoint[]): ZodOpenApiPathsObject {
  const paths: ZodOpenApiPathsObject = {};
  for (const { path, tag, parameters: pathParameters, operations } of endpoints) {
    const item: ZodOpenApiPathItemObject = pathParameters ? { parameters: pathParameters } : {};
    const tagged = (operation: Operation) => ({ ...operation, tags: [tag.name], parameters: [...parameters('RequestId'), ...(operation.parameters ?? [])] });
    for (const [method, operation] of Object.entries(operations)) {
      const described = tagged(operation);
      delete described.handlers;
      item[method.toLowerCase() as 'get'] = described;
    }
    const { get } = item;
    const first = get ?? item[Object.keys(operations)[0]?.toLowerCase() as 'post'];
    if (!first?.operationId) throw new Error(`${path} has no operation with an operationId`);
    if (get) {
      const responses = Object.fromEntries(Object.entries(get.responses).map(([status, { content: _body, ...response }]) => [status, response]));
      item.head = { ...get, operationId: `head${first.operationId.replace(/^./, (letter: string) => letter.toUpperCase())}`, summary: `${get.summary} (headers only)`, description: 'As GET, without a body.', responses };
    }
    item.options = tagged({
      operationId: first.operationId.replace(/^(get|list|create)/, 'options'),
      summary: 'List the allowed methods',
      description: 'Any other method is answered 405 with the same `Allow` header (without `OPTIONS`).',
      responses: {
        204: {
          description: 'The allowed methods.',
          headers: { ...headers({}), Allow: { description: 'The methods this path answers.', required: true, schema: { type: 'string', const: [...answeredMethods(Object.keys(operations)), 'OPTIONS'].join(', ') } } },
        },
        404: problemResponse(404),
      },
    });
    paths[path] = item;
  }
  return paths;
}

const status = (value: string) => z.strictObject({ status: z.literal(value) });
const noStore = headers({ 'Cache-Control': 'CacheControlNoStore' });
const operationsTag = { name: 'operations', description: 'Probes for orchestrators: every process answers its own; the gateway does not proxy them.' };
export const documentationTag = { name: 'documentation', description: 'This description, and a page that shows it.' };

/** The probes every process answers itself (`healthRoutes` serves them). */
export const probeEndpoints: Endpoint[] = [
  {
    path: '/healthz',
    tag: operationsTag,
    operations: {
      GET: { operationId: 'getHealth', summary: 'Liveness', description: '200 while the process runs; no dependency is checked.', responses: { 200: { description: 'The process runs.', headers: noStore, content: json(status('ok'), { status: 'ok' }) } } },
    },
  },
  {
    path: '/readyz',
    tag: operationsTag,
    operations: {
      GET: {
        operationId: 'getReadiness',
        summary: 'Readiness',
        description: 'A service is ready when its database answers; no process is ready once its shutdown has begun.',
        responses: {
          200: { description: 'Ready to serve.', headers: noStore, content: json(status('ready'), { status: 'ready' }) },
          503: problemResponse(503, { problem: new HttpProblem('service-unavailable', 'The process is shutting down'), at: '/readyz' }, { 'Cache-Control': 'CacheControlNoStore' }),
        },
      },
    },
  },
];

/** A description as a response body: only its outline, the linter checks the rest. */
export const documentOutline = z.looseObject({ openapi: z.string().regex(/^3\.1\.\d+$/), info: z.looseObject({}), paths: z.looseObject({}), components: z.looseObject({}) }).meta({ description: 'An OpenAPI 3.1 document.' });

/** `GET /openapi.json`: the process's description of itself, sent by `send`; `responses` adds failures. */
export function documentEndpoint(description: string, send?: RequestHandler, responses: ZodOpenApiOperationObject['responses'] = {}): Endpoint {
  return {
    path: DOCUMENT_PATH,
    tag: documentationTag,
    operations: {
      GET: {
        operationId: 'getOpenApiDocument',
        summary: 'The API description',
        description,
        responses: { 200: { description: 'The OpenAPI 3.1 document.', headers: headers({ 'Cache-Control': 'CacheControlNoCache' }), content: json(documentOutline) }, ...responses },
        ...(send && { handlers: [send] }),
      },
    },
  };
}

/**
 * A whole document: `paths` (declared endpoints, or operations another process described) with the
 * shared components and `schemas`. Its server is the origin that serves it.
 */
export function apiDocument(info: oas31.InfoObject, paths: ZodOpenApiPathsObject, tags: oas31.TagObject[], more: { schemas?: Record<string, z.ZodType | oas31.SchemaObject | oas31.ReferenceObject>; headers?: Record<string, z.ZodType>; securitySchemes?: Record<string, oas31.SecuritySchemeObject> } = {}): OpenApiDocument {
  const unique = tags.filter((tag, i) => tags.findIndex(({ name }) => name === tag.name) === i);
  // zod-openapi's types allow OpenAPI 3.2 too; the document is 3.1.
  return createDocument({
    openapi: '3.1.0',
    info: { ...info, license: { name: 'MIT', identifier: 'MIT' } },
    servers: [{ url: '/', description: 'The origin that serves this document' }],
    security: [],
    tags: unique,
    paths,
    components: { schemas: { ...more.schemas, Problem: problem }, headers: { ...HEADERS, ...more.headers }, parameters: PARAMETERS, ...(more.securitySchemes && { securitySchemes: more.securitySchemes }) },
  }) as OpenApiDocument;
}

/** The file form: two-space indentation, keys in generation order (deterministic), a final newline. */
export const serializeDocument = (document: OpenApiDocument) => `${JSON.stringify(document, null, 2)}\n`;

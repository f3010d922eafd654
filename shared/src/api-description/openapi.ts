import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import { answeredMethods, REQUEST_ID } from '../platform/http.js';
import { HttpProblem, PROBLEM_BASE, problemTypes, RETRY_AFTER_SECONDS, type ProblemKind } from '../platform/problem.js';

/**
 * The API description (OpenAPI 3.1): the types, the shared components (problems, headers), the
 * operations every process has (probes, its own document) and the helpers that put parts together.
 * Field rules are never written here: they come from the zod schemas that validate requests.
 */

export const OPENAPI_VERSION = '3.1.0';

export type Schema = { [keyword: string]: unknown };
export interface Reference {
  $ref: string;
}
export interface Header {
  description: string;
  required: boolean;
  schema: Schema;
  example?: unknown;
}
export interface Parameter {
  name: string;
  in: 'query' | 'header' | 'path';
  description: string;
  required: boolean;
  schema: Schema;
  example?: unknown;
}
export interface MediaType {
  schema: Schema | Reference;
  example?: unknown;
}
export interface Response {
  description: string;
  headers?: Record<string, Header | Reference>;
  content?: Record<string, MediaType>;
}
export interface RequestBody {
  description: string;
  required: boolean;
  content: Record<string, MediaType>;
}
export interface Operation {
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  parameters?: (Parameter | Reference)[];
  requestBody?: RequestBody;
  responses: Record<string, Response>;
  /** Who may call it: each entry names a security scheme and the scopes it needs. */
  security?: Record<string, string[]>[];
}
export const HTTP_METHODS = ['get', 'head', 'post', 'put', 'patch', 'delete', 'options'] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];
export type PathItem = { parameters?: (Parameter | Reference)[] } & { [M in HttpMethod]?: Operation };
export interface Components {
  schemas: Record<string, Schema>;
  headers: Record<string, Header>;
  parameters: Record<string, Parameter>;
  securitySchemes?: Record<string, Schema>;
}
export interface Tag {
  name: string;
  description: string;
}
/** What a process contributes to the description: its paths, the tags they use, the components they reference. */
export interface ApiPart {
  tags: Tag[];
  paths: Record<string, PathItem>;
  components: Components;
}
export interface OpenApiDocument extends ApiPart {
  openapi: string;
  info: { title: string; version: string; description: string; license: { name: string; identifier: string } };
  servers: { url: string; description: string }[];
  security: Record<string, string[]>[];
}

export const ref = (kind: keyof Components, name: string): Reference => ({ $ref: `#/components/${kind}/${name}` });

/** `object` without `keys`. */
export function omit<T extends object>(object: T, ...keys: string[]): T {
  return Object.fromEntries(Object.entries(object).filter(([key]) => !keys.includes(key))) as T;
}

/** The JSON Schema of what `schema` accepts (`input`) or produces (`output`); throws when zod cannot represent it. */
export function jsonSchemaOf(schema: z.ZodType, io: 'input' | 'output'): Schema {
  // The document's dialect is already JSON Schema 2020-12.
  return omit(z.toJSONSchema(schema, { io, target: 'draft-2020-12' }) as Schema, '$schema');
}

// Problems -------------------------------------------------------------------------------------

const problemKinds = Object.keys(problemTypes) as ProblemKind[];
export const problemStatuses = [...new Set(problemKinds.map((kind) => problemTypes[kind].status))].sort((a, b) => a - b);
const kindsWith = (status: number) => problemKinds.filter((kind) => problemTypes[kind].status === status);

/** The problem types as a Markdown table. */
export function problemTypesTable(): string {
  const rows = problemKinds.map((kind) => `| \`${PROBLEM_BASE}${kind}\` | ${problemTypes[kind].status} | ${problemTypes[kind].title} |`);
  return ['| `type` | Status | Title |', '|---|---|---|', ...rows].join('\n');
}

/** A problem's JSON body, for examples: what the services send for it. */
export function problemExample(problem: HttpProblem, instance: string): Record<string, unknown> {
  return problem.toJSON(instance);
}

/** Every component a part may reference; `withUsedComponents` keeps the referenced ones. */
export function commonComponents(): Components {
  const schemas: Record<string, Schema> = {
    ProblemType: {
      type: 'string',
      description: `A stable identifier of the kind of problem:\n\n${problemTypesTable()}`,
      enum: problemKinds.map((kind) => PROBLEM_BASE + kind),
    },
    FieldError: {
      type: 'object',
      description: 'One invalid field of a request.',
      properties: {
        path: { type: 'string', description: 'The field, dot-separated for nested fields (`price.amount`); `body` for the body as a whole.' },
        message: { type: 'string', description: 'What is wrong with it.' },
      },
      required: ['path', 'message'],
      additionalProperties: false,
    },
    Problem: {
      type: 'object',
      description: 'An error (RFC 9457 problem details). Never a stack trace, SQL text or internal host name.',
      properties: {
        type: ref('schemas', 'ProblemType'),
        title: { type: 'string', description: 'The title of the problem type.' },
        status: { type: 'integer', minimum: 400, maximum: 599, description: 'The HTTP status code.' },
        detail: { type: 'string', description: 'What went wrong in this occurrence.' },
        instance: { type: 'string', description: 'The path of the request.' },
        errors: {
          type: 'array',
          description: 'Each invalid field (validation problems) or the field that is taken (conflicts).',
          items: ref('schemas', 'FieldError'),
        },
      },
      required: ['type', 'title', 'status', 'detail', 'instance'],
      additionalProperties: false,
    },
  };
  for (const status of problemStatuses) {
    const kinds = kindsWith(status);
    schemas[`Problem${status}`] = {
      description: `A problem with status ${status}: ${kinds.map((kind) => `\`${kind}\``).join(', ')}.`,
      allOf: [ref('schemas', 'Problem')],
      properties: {
        type: { enum: kinds.map((kind) => PROBLEM_BASE + kind) },
        title: { enum: kinds.map((kind) => problemTypes[kind].title) },
        status: { const: status },
      },
    };
  }
  return {
    schemas,
    headers: {
      XRequestId: {
        description: 'The request id: the one the request carried when it is 1 to 128 of `A-Za-z0-9._-`, a new one otherwise. On every response and every log line.',
        required: true,
        schema: { type: 'string', pattern: REQUEST_ID.source },
      },
      ETag: {
        description: 'The strong entity tag of the resource version: send it in `If-Match` (writes) or `If-None-Match` (reads).',
        required: true,
        schema: { type: 'string', pattern: '^"[!#-~]*"$' },
        example: '"1"',
      },
      Location: {
        description: 'The path of the new resource.',
        required: true,
        schema: { type: 'string' },
      },
      CacheControlNoCache: {
        description: 'Caches must revalidate (with the ETag) before reusing the response.',
        required: true,
        schema: { type: 'string', const: 'no-cache' },
      },
      CacheControlNoStore: {
        description: 'Never cached.',
        required: true,
        schema: { type: 'string', const: 'no-store' },
      },
      AcceptEncoding: {
        description: 'On a 415 caused by `Content-Encoding`: the content codings a request body may have (only `identity`: bodies are not compressed).',
        required: false,
        schema: { type: 'string', const: 'identity' },
      },
      RetryAfter: {
        description: 'Seconds to wait before retrying.',
        required: true,
        schema: { type: 'integer', minimum: 0 },
        example: RETRY_AFTER_SECONDS,
      },
      XCache: {
        description:
          "What the gateway's response cache did: `HIT` (served from it), `MISS` (fetched and stored), `BYPASS` (not cacheable), `STALE` (served from it while the service is unavailable). Sent on every gateway response to GET and HEAD under `/api` (`BYPASS` on all of them when the cache is off); a service answering directly does not send it.",
        required: false,
        schema: { type: 'string', enum: ['HIT', 'MISS', 'BYPASS', 'STALE'] },
      },
      IdempotentReplayed: {
        description: '`true` on a response replayed for a retry with the same `Idempotency-Key`: the request did not run again.',
        required: false,
        schema: { type: 'string', const: 'true' },
      },
      Age: {
        description: 'Seconds since the cached response was fetched, on a `HIT` or `STALE`.',
        required: false,
        schema: { type: 'integer', minimum: 0 },
      },
    },
    parameters: {
      RequestId: {
        name: 'X-Request-Id',
        in: 'header',
        description: 'An id for this request, echoed on the response and logged by every process it passes (used when 1 to 128 of `A-Za-z0-9._-`; replaced otherwise).',
        required: false,
        schema: { type: 'string' },
        example: 'checkout-42',
      },
      IfMatch: {
        name: 'If-Match',
        in: 'header',
        description:
          'Proceed only if the resource still has one of these ETags (strong comparison: a `W/` tag never matches), or `*` (it exists); 412 otherwise, and nothing changes. A collection has no ETag: only `*` holds on it. A value that is neither `*` nor a list of entity tags is a 400.',
        required: false,
        schema: { type: 'string' },
        example: '"1"',
      },
      IdempotencyKey: {
        name: 'Idempotency-Key',
        in: 'header',
        description:
          'Makes a retry safe (IETF draft-ietf-httpapi-idempotency-key-header): 1 to 255 visible ASCII characters (400 otherwise), unique per request, e.g. a UUID. The first request with a key runs; a retry with the same key and the same request (method, path, body) gets the stored response — same status, body, `Location` and `ETag`, with `Idempotent-Replayed: true` — without running again, on any replica, for 24 hours. The same key with a different request is a 422; while the first is still in progress, a 409 (retry later). A request that fails changes nothing and does not use its key up. Keys are scoped to the resource collection and to the subject of the bearer token.',
        required: false,
        schema: { type: 'string', pattern: '^[!-~]{1,255}$' },
        example: '0193a5c2-7b1e-7c4d-9a61-2f0c1b9e8d40',
      },
      IfNoneMatch: {
        name: 'If-None-Match',
        in: 'header',
        description: 'Answer 304 without a body when the resource still has one of these ETags (weak comparison), or for `*`. A malformed value is ignored.',
        required: false,
        schema: { type: 'string' },
        example: '"1"',
      },
      IfNoneMatchWrite: {
        name: 'If-None-Match',
        in: 'header',
        description:
          'Proceed only if the resource has none of these ETags (weak comparison); `*` proceeds only where nothing exists, so on an existing item, and on a collection, it is a 412 and nothing changes. A value that is neither `*` nor a list of entity tags is a 400.',
        required: false,
        schema: { type: 'string' },
        example: '*',
      },
    },
  };
}

// Responses and operations ---------------------------------------------------------------------

export const requestIdHeader = () => ({ 'X-Request-Id': ref('headers', 'XRequestId') });

/** A problem+json response of `status`, with `Retry-After` on 503. */
export function problemResponse(status: number, options: { example?: Record<string, unknown>; headers?: Record<string, Header | Reference> } = {}): Response {
  const kinds = kindsWith(status);
  if (kinds.length === 0) throw new Error(`No problem type has status ${status}`);
  return {
    description: kinds.map((kind) => problemTypes[kind].title).join('; '),
    headers: {
      ...requestIdHeader(),
      ...(status === 503 ? { 'Retry-After': ref('headers', 'RetryAfter') } : {}),
      ...(status === 415 ? { 'Accept-Encoding': ref('headers', 'AcceptEncoding') } : {}),
      ...options.headers,
    },
    content: {
      'application/problem+json': { schema: ref('schemas', `Problem${status}`), ...(options.example ? { example: options.example } : {}) },
    },
  };
}

export const jsonContent = (schema: Schema | Reference, example?: unknown): Record<string, MediaType> => ({
  'application/json': { schema, ...(example === undefined ? {} : { example }) },
});

const capitalized = (word: string) => word.charAt(0).toUpperCase() + word.slice(1);

/** HEAD: GET's parameters and responses without bodies. */
export function headOf(get: Operation): Operation {
  const responses = Object.fromEntries(
    Object.entries(get.responses).map(([status, { content: _body, ...response }]) => [status, response]),
  );
  return {
    ...get,
    operationId: `head${capitalized(get.operationId)}`,
    summary: `${get.summary} (headers only)`,
    description: 'As GET, without a body.',
    responses,
  };
}

/** OPTIONS, as `allowOnly` answers it: 204 with the methods in `Allow`. */
export function optionsOperation(methods: readonly string[], operationId: string, tag: string): Operation {
  return {
    operationId,
    summary: 'List the allowed methods',
    description: 'Any other method is answered 405 with the same `Allow` header (without `OPTIONS`).',
    tags: [tag],
    parameters: [ref('parameters', 'RequestId')],
    responses: {
      204: {
        description: 'The allowed methods.',
        headers: {
          ...requestIdHeader(),
          Allow: { description: 'The methods this path answers.', required: true, schema: { type: 'string', const: [...answeredMethods(methods), 'OPTIONS'].join(', ') } },
        },
      },
      404: problemResponse(404),
    },
  };
}

/**
 * The path item of a route that implements `methods` and ends with `allowOnly(methods)`: one
 * operation per method, HEAD derived from GET, and OPTIONS.
 */
export function routeItem(
  methods: readonly string[],
  operations: Partial<Record<string, Operation>>,
  options: { optionsId: string; tag: string; parameters?: (Parameter | Reference)[] },
): PathItem {
  const described = Object.keys(operations).sort();
  if (!isDeepStrictEqual(described, [...methods].sort())) throw new Error(`Described ${described.join(', ')}, but the route answers ${methods.join(', ')}`);
  const item: PathItem = options.parameters ? { parameters: options.parameters } : {};
  for (const method of answeredMethods(methods)) {
    const operation = method === 'HEAD' ? operations.GET && headOf(operations.GET) : operations[method];
    item[method.toLowerCase() as HttpMethod] = operation;
  }
  item.options = optionsOperation(methods, options.optionsId, options.tag);
  return item;
}

/** The probes every process answers itself (healthRoutes). */
export function probesPart(): ApiPart {
  const tag = 'operations';
  const status = (value: string): Schema => ({
    type: 'object',
    properties: { status: { type: 'string', const: value } },
    required: ['status'],
    additionalProperties: false,
  });
  const noStore = { ...requestIdHeader(), 'Cache-Control': ref('headers', 'CacheControlNoStore') };
  return {
    tags: [{ name: tag, description: 'Probes for orchestrators: every process answers its own; the gateway does not proxy them.' }],
    paths: {
      '/healthz': routeItem(
        ['GET'],
        {
          GET: {
            operationId: 'getHealth',
            summary: 'Liveness',
            description: '200 while the process runs; no dependency is checked.',
            tags: [tag],
            parameters: [ref('parameters', 'RequestId')],
            responses: { 200: { description: 'The process runs.', headers: noStore, content: jsonContent(status('ok'), { status: 'ok' }) } },
          },
        },
        { optionsId: 'optionsHealth', tag },
      ),
      '/readyz': routeItem(
        ['GET'],
        {
          GET: {
            operationId: 'getReadiness',
            summary: 'Readiness',
            description: 'A service is ready when its database answers; no process is ready once its shutdown has begun.',
            tags: [tag],
            parameters: [ref('parameters', 'RequestId')],
            responses: {
              200: { description: 'Ready to serve.', headers: noStore, content: jsonContent(status('ready'), { status: 'ready' }) },
              503: problemResponse(503, {
                headers: { 'Cache-Control': ref('headers', 'CacheControlNoStore') },
                example: problemExample(new HttpProblem('service-unavailable', 'The process is shutting down'), '/readyz'),
              }),
            },
          },
        },
        { optionsId: 'optionsReadiness', tag },
      ),
    },
    components: commonComponents(),
  };
}

export const DOCUMENT_PATH = '/openapi.json';

/** The document as a response body: only its outline, the linter checks the rest. */
const documentSchema: Schema = {
  type: 'object',
  description: 'An OpenAPI 3.1 document.',
  properties: { openapi: { type: 'string', pattern: '^3\\.1\\.\\d+$' }, info: { type: 'object' }, paths: { type: 'object' } },
  required: ['openapi', 'info', 'paths'],
};

/** `GET /openapi.json`: the process's description of itself. `responses` adds failure responses. */
export function documentPart(options: { description: string; responses?: Record<string, Response> }): ApiPart {
  const tag = 'documentation';
  return {
    tags: [{ name: tag, description: 'This description, and a page that shows it.' }],
    paths: {
      [DOCUMENT_PATH]: routeItem(
        ['GET'],
        {
          GET: {
            operationId: 'getOpenApiDocument',
            summary: 'The API description',
            description: options.description,
            tags: [tag],
            parameters: [ref('parameters', 'RequestId')],
            responses: {
              200: {
                description: 'The OpenAPI 3.1 document.',
                headers: { ...requestIdHeader(), 'Cache-Control': ref('headers', 'CacheControlNoCache') },
                content: jsonContent(documentSchema),
              },
              ...options.responses,
            },
          },
        },
        { optionsId: 'optionsOpenApiDocument', tag },
      ),
    },
    components: commonComponents(),
  };
}

// Putting parts together -----------------------------------------------------------------------

/** Equal as JSON values: unlike isDeepStrictEqual, blind to which realm made them (JSON from fetch is the main realm's). */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null || Array.isArray(a) !== Array.isArray(b)) return false;
  const [left, right] = [a as Record<string, unknown>, b as Record<string, unknown>];
  const keys = Object.keys(left);
  return keys.length === Object.keys(right).length && keys.every((key) => Object.hasOwn(right, key) && sameJson(left[key], right[key]));
}

/** Parts side by side. A path described twice, or a component with two different definitions, is an error. */
export function mergeParts(parts: readonly ApiPart[]): ApiPart {
  const merged: ApiPart = { tags: [], paths: {}, components: { schemas: {}, headers: {}, parameters: {} } };
  for (const part of parts) {
    for (const tag of part.tags) if (!merged.tags.some(({ name }) => name === tag.name)) merged.tags.push(tag);
    for (const [path, item] of Object.entries(part.paths)) {
      if (path in merged.paths) throw new Error(`${path} is described twice`);
      merged.paths[path] = item;
    }
    for (const kind of ['schemas', 'headers', 'parameters'] as const) {
      const into: Record<string, unknown> = merged.components[kind];
      for (const [name, definition] of Object.entries(part.components[kind] ?? {})) {
        if (name in into && !sameJson(into[name], definition)) throw new Error(`Two different definitions of components.${kind}.${name}`);
        into[name] = definition;
      }
    }
  }
  return merged;
}

/** The document without the components nothing references (directly or through other components). */
export function withUsedComponents(document: OpenApiDocument): OpenApiDocument {
  const used = new Set<string>();
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) node.forEach(visit);
    else if (typeof node === 'object' && node !== null) {
      const target = (node as Partial<Reference>).$ref;
      if (typeof target === 'string' && !used.has(target)) {
        used.add(target);
        const [, , kind, name] = target.split('/') as [string, string, keyof Components, string];
        visit(document.components[kind]?.[name]);
      }
      Object.values(node).forEach(visit);
    }
  };
  visit({ ...document, components: undefined });
  const keep = <T>(kind: keyof Components, entries: Record<string, T>) =>
    Object.fromEntries(Object.entries(entries).filter(([name]) => used.has(`#/components/${kind}/${name}`)));
  return {
    ...document,
    components: {
      schemas: keep('schemas', document.components.schemas),
      headers: keep('headers', document.components.headers),
      parameters: keep('parameters', document.components.parameters),
    },
  };
}

/**
 * A whole document from parts, with only the components it uses. Its server is the origin that
 * serves it, and no operation requires authentication.
 */
export function assembleDocument(info: OpenApiDocument['info'], parts: readonly ApiPart[]): OpenApiDocument {
  const { tags, paths, components } = mergeParts(parts);
  return withUsedComponents({
    openapi: OPENAPI_VERSION,
    info,
    servers: [{ url: '/', description: 'The origin that serves this document' }],
    security: [],
    tags,
    paths,
    components,
  });
}

export const LICENSE = { name: 'MIT', identifier: 'MIT' };

/** The file form: two-space indentation, keys in generation order (deterministic), a final newline. */
export function serializeDocument(document: OpenApiDocument): string {
  return `${JSON.stringify(document, null, 2)}\n`;
}

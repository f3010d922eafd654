import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request, RequestHandler, Response, Router } from 'express';
import { headers, json, parameters, problemResponse, routerOf, type Endpoint, type Operation } from '../api-description/openapi.js';
import { EXAMPLE_ID, resourceSchemas, validationExample } from './description.js';
import { BODY_LIMIT_BYTES, bodyTooLarge } from '../platform/http/bodies.js';
import { REPLAYED_HEADER, REQUEST_ID_HEADER, RETRY_AFTER_HEADER } from '../platform/http/headers.js';
import { JSON_CONTENT_TYPE, NOSNIFF, sendJson } from '../platform/http/responses.js';
import { idempotencyProblems, idempotent, type IdempotencyStore, type StoredResponse } from './idempotency.js';
import { HttpProblem, problems } from '../platform/problem.js';
import { conditionsOf, DEFAULT_LIMIT, etagOf, evaluatePreconditions, listQuerySchema, representation, type ResourceDefinition, type ResourceService, type Stored } from './rules.js';
import { accessOf, readAccessOf } from './ownership.js';
import { ownershipPolicy, refusesOthersChanges, type Ownership } from '../platform/ownership-policy.js';
import { scopesOfService } from '../platform/services.js';
import { z } from 'zod';

/** PATCH takes an RFC 7396 merge patch; plain JSON is accepted as the same. */
export const PATCH_MEDIA_TYPES = ['application/merge-patch+json', 'application/json'] as const;

/** A resource's HTTP mapping: its express router, and its item read for callers before express. */
export interface ResourceRoutes {
  /** The collection path, e.g. `/api/products`. */
  path: string;
  /** `path` (list, create) and `path/:id` (read, replace, patch, delete). */
  router: Router;
  /** GET/HEAD `path/{id}`: what the router runs for it, as a plain node:http handler; the response echoes `requestId`. */
  readItem(req: IncomingMessage, res: ServerResponse, id: string, requestId: string): Promise<void>;
}

function sendResource<F>(res: ServerResponse, stored: Stored<F>, withOwner: boolean, status = 200) {
  res.setHeader('ETag', etagOf(stored.version));
  sendJson(res, status, representation(stored, withOwner));
}

/** `?owner=`: a subject, as the gateway accepts them. */
const ownerParameter = z.string().min(1).max(255);

/**
 * GET/HEAD of an item, as a plain node:http handler. Its response is written whole by one
 * `writeHead` with every header, X-Request-Id included: with no `setHeader` before it, Node writes
 * the headers without building its header map.
 */
function itemReader<F extends Record<string, unknown>>(service: ResourceService<F, unknown>, ownership: Ownership) {
  const { owned } = ownershipPolicy(ownership);
  return async (req: IncomingMessage, res: ServerResponse, id: string, requestId: string) => {
    const stored = await service.get(id, readAccessOf(req.headers, ownership));
    const etag = etagOf(stored.version);
    if (evaluatePreconditions(conditionsOf(req.headers), etag, 'read') === 'not-modified') {
      res.writeHead(304, ['ETag', etag, 'Cache-Control', 'no-cache', REQUEST_ID_HEADER, requestId, ...NOSNIFF]).end();
      return;
    }
    const body = JSON.stringify(representation(stored, owned));
    res
      .writeHead(200, ['Content-Type', JSON_CONTENT_TYPE, 'Content-Length', Buffer.byteLength(body), 'ETag', etag, 'Cache-Control', 'no-cache', REQUEST_ID_HEADER, requestId, ...NOSNIFF])
      .end(body);
  };
}

/** What the handlers run on; absent when only the description is wanted. */
interface Runtime<F extends Record<string, unknown>> {
  service: ResourceService<F, unknown>;
  idempotency: IdempotencyStore;
  /** Who may see and change its records (services.json). */
  ownership: Ownership;
}

/** The names, paths, schemas and examples a resource's operations are described with, and the largest body they take. */
function describedResource<F extends Record<string, unknown>>(path: string, definition: ResourceDefinition<F>, ownership: Ownership, bodyLimitBytes: number) {
  const plural = path.slice(path.lastIndexOf('/') + 1);
  const Plural = plural.charAt(0).toUpperCase() + plural.slice(1);
  const { owned } = ownershipPolicy(ownership);
  const schemas = resourceSchemas(plural, definition, ownership);
  const listQuery = listQuerySchema(definition.filter, definition.example);
  const item = `${path}/{id}`;
  return {
    ...schemas,
    path,
    definition,
    plural,
    Plural,
    item,
    at: `${path}/${EXAMPLE_ID}`,
    tag: { name: plural, description: `${Plural}: list and create at \`${path}\`; read, replace, patch and delete at \`${item}\`.` },
    firstField: Object.keys(definition.example)[0] ?? 'id',
    ownership,
    owned,
    bodyLimitBytes,
    query: owned ? listQuery.extend({ owner: ownerParameter.optional().meta({ description: `Only the ${plural} of this owner (the subject that created them).` }) }) : listQuery,
    createQuery: owned ? z.strictObject({ owner: ownerParameter.optional().meta({ description: `The owner of the new ${definition.name}, other than the caller: only with the \`${scopesOfService(plural).admin}\` scope.` }) }) : undefined,
  };
}

/** The responses and request bodies a resource's operations share, with its examples. */
function sharedResponses<F extends Record<string, unknown>>({ at, definition, firstField, resource, exampleResource, input, ownership, bodyLimitBytes }: ReturnType<typeof describedResource<F>>) {
  const problem = (status: number, example?: HttpProblem, where = at, extraHeaders: Record<string, string> = {}) => problemResponse(status, example && { problem: example, at: where }, extraHeaders);
  const failures = (where: string) => ({ 500: problem(500), 503: problem(503, problems.unavailable('The database is unavailable; try again shortly'), where) });
  const notFound = problem(404, problems.notFound(`No ${definition.name} with id ${EXAMPLE_ID}`));
  const bodyProblems = (where: string) => ({
    413: problem(413, bodyTooLarge(bodyLimitBytes), where),
    415: problem(415, new HttpProblem('unsupported-media-type', 'The request body must be application/json, not text/plain'), where),
  });
  const withResource = (description: string, more: Record<string, string> = {}) => ({ description, headers: headers({ ETag: 'ETag', ...more }), content: json(resource, exampleResource) });
  // Where a caller sees another owner's record but may not change it, its change is a 403.
  const notOwner = refusesOthersChanges(ownershipPolicy(ownership)) ? { 403: problem(403, new HttpProblem('not-owner', `This ${definition.name} belongs to another caller: only its owner (or an admin) may change it`)) } : {};
  return {
    problem,
    /** A write with an Idempotency-Key may meet its key in flight: a 409 with Retry-After. */
    conflictOrInFlight: (where = at) => problem(409, problems.conflict(firstField, 'is already taken'), where, { [RETRY_AFTER_HEADER]: 'RetryAfterInFlight' }),
    failures,
    notFound,
    malformedCondition: problem(400, problems.validation([{ path: 'If-Match', message: 'must be * or a list of entity tags ("…" or W/"…")' }])),
    bodyProblems,
    withResource,
    notOwner,
    writeBody: (description: string) => ({ description, required: true, content: json(input, definition.example) }),
    updateResponses: (description: string, more: Record<string, string> = {}) => ({
      200: withResource(description, more),
      400: problemResponse(400, validationExample(definition.fields, {}, at)),
      ...notOwner,
      404: notFound,
      409: problem(409, problems.conflict(firstField, 'is already taken')),
      412: problem(412, problems.preconditionFailed()),
      ...bodyProblems(at),
      ...failures(at),
    }),
  };
}

/** What an operation of a resource is declared from: its description, the shared responses, and its handler when there is a runtime. */
type OperationKit<F extends Record<string, unknown>> = ReturnType<typeof describedResource<F>> &
  ReturnType<typeof sharedResponses<F>> & {
    /** An operation's handler, made on the runtime when there is one. */
    handled: (make: (on: Runtime<F>) => RequestHandler) => { handlers?: RequestHandler[] };
  };

/** The response to a write as it is sent, and stored for a retry with the same Idempotency-Key. */
const written = <F>(stored: Stored<F>, withOwner: boolean, status: number, more: Record<string, string> = {}): StoredResponse => ({
  status,
  headers: { ...more, 'Content-Type': JSON_CONTENT_TYPE, ETag: etagOf(stored.version) },
  body: JSON.stringify(representation(stored, withOwner)),
});

/** GET `path`: a page of the collection. */
function listOperation<F extends Record<string, unknown>>({ path, plural, Plural, query, page, examplePage, problem, failures, handled, owned }: OperationKit<F>): Operation {
  return {
    operationId: `list${Plural}`,
    summary: `List ${plural}`,
    description: `A page of ${plural} in id order (creation order), at most \`limit\` (default ${DEFAULT_LIMIT}). Walk the pages with \`cursor\` = the previous page's \`nextCursor\` until it is \`null\`: every item is seen exactly once, even while items are created or deleted.`,
    parameters: parameters('IfMatch'),
    requestParams: { query },
    responses: {
      200: { description: `A page of ${plural}.`, headers: headers({ 'Cache-Control': 'CacheControlPage' }), content: json(page, examplePage) },
      400: problemResponse(400, validationExample(query, { limit: '0' }, path)),
      412: problem(412, problems.preconditionFailed(), path),
      ...failures(path),
    },
    ...handled(({ service, ownership }) => async (req: Request, res: Response) => {
      evaluatePreconditions({ ifMatch: req.headers['if-match'] }, undefined, 'read');
      const found = await service.list(res.locals.query, readAccessOf(req.headers, ownership));
      res.setHeader('Cache-Control', found.storable ? 'no-cache' : 'no-store');
      sendJson(res, 200, { items: found.items.map((item) => representation(item, owned)), nextCursor: found.nextCursor });
    }),
  };
}

/** POST `path`: a new item, idempotent with an Idempotency-Key. */
function createOperation<F extends Record<string, unknown>>(kit: OperationKit<F>): Operation {
  const { path, Name, definition, problem, handled, owned, createQuery } = kit;
  return {
    operationId: `create${Name}`,
    summary: `Create a ${definition.name}`,
    parameters: parameters('IfMatch', 'IfNoneMatchWrite', 'IdempotencyKey'),
    ...(createQuery && { requestParams: { query: createQuery } }),
    requestBody: kit.writeBody(`The new ${definition.name}.`),
    responses: {
      201: kit.withResource(`Created: the ${definition.name} as stored (or, for a retry with the same \`Idempotency-Key\`, the response to the first request).`, { Location: 'Location', [REPLAYED_HEADER]: 'IdempotentReplayed' }),
      400: problemResponse(400, validationExample(definition.fields, {}, path)),
      ...(owned && { 403: problem(403, new HttpProblem('not-owner', `Only an admin may create a ${definition.name} for another owner`), path) }),
      409: kit.conflictOrInFlight(path),
      412: problem(412, problems.preconditionFailed(), path),
      422: problem(422, idempotencyProblems.reused(), path),
      ...kit.bodyProblems(path),
      ...kit.failures(path),
    },
    ...handled(({ service, idempotency, ownership }) =>
      idempotent(idempotency, path, async (req, res) => {
        evaluatePreconditions(conditionsOf(req.headers), undefined, 'write');
        // The query as createQuery parsed it (res.locals.query): undefined where the resource has no owners.
        const created = await service.create(req.body, accessOf(req.headers, ownership), (res.locals.query as { owner?: string }).owner);
        return written(created, owned, 201, { Location: `${path}/${created.id}` });
      }),
    ),
  };
}

/** GET `path/{id}`: the item, or 304 when it has not changed. */
function readOperation<F extends Record<string, unknown>>({ Name, definition, at, problem, failures, notFound, malformedCondition, withResource, handled }: OperationKit<F>): Operation {
  return {
    operationId: `get${Name}`,
    summary: `Read a ${definition.name}`,
    parameters: parameters('IfMatch', 'IfNoneMatch'),
    responses: {
      200: withResource(`The ${definition.name}.`, { 'Cache-Control': 'CacheControlNoCache' }),
      304: { description: 'Not modified: `If-None-Match` matches the current ETag.', headers: headers({ ETag: 'ETag', 'Cache-Control': 'CacheControlNoCache' }) },
      400: malformedCondition,
      404: notFound,
      412: problem(412, problems.preconditionFailed()),
      ...failures(at),
    },
    ...handled(({ service, ownership }) => {
      const read = itemReader(service, ownership);
      return (req: Request, res: Response) => read(req, res, req.params.id as string, res.locals.requestId);
    }),
  };
}

/** PUT `path/{id}`: a full replacement of an existing item. */
function replaceOperation<F extends Record<string, unknown>>({ Name, definition, writeBody, updateResponses, handled, owned }: OperationKit<F>): Operation {
  return {
    operationId: `replace${Name}`,
    summary: `Replace a ${definition.name}`,
    description: 'Full replacement: every writable field is required (absent ones take their defaults). Never creates: 404 for an unknown id.',
    parameters: parameters('IfMatch', 'IfNoneMatchWrite'),
    requestBody: writeBody(`The new state of the ${definition.name}.`),
    responses: updateResponses(`Replaced: the ${definition.name} as stored, with its new ETag.`),
    ...handled(({ service, ownership }) => async (req: Request, res: Response) =>
      sendResource(res, await service.replace(req.params.id as string, req.body, conditionsOf(req.headers), accessOf(req.headers, ownership)), owned),
    ),
  };
}

/** PATCH `path/{id}`: an RFC 7396 merge patch, idempotent with an Idempotency-Key. */
function patchOperation<F extends Record<string, unknown>>({ path, Name, definition, firstField, patch, problem, conflictOrInFlight, updateResponses, handled, owned }: OperationKit<F>): Operation {
  return {
    operationId: `patch${Name}`,
    summary: `Change some fields of a ${definition.name}`,
    description: 'An RFC 7396 JSON merge patch: members replace, nested objects merge, `null` removes a member (an optional field takes its default again). The result must be a valid resource.',
    parameters: parameters('IfMatch', 'IfNoneMatchWrite', 'IdempotencyKey'),
    requestBody: {
      description: `The changes. ${PATCH_MEDIA_TYPES.map((type) => `\`${type}\``).join(' and ')} are accepted as the same.`,
      required: true,
      content: Object.fromEntries(PATCH_MEDIA_TYPES.map((type) => [type, { schema: patch, example: { [firstField]: definition.example[firstField] } }])),
    },
    responses: {
      ...updateResponses(`Patched: the ${definition.name} as stored, with its new ETag (or, for a retry with the same \`Idempotency-Key\`, the response to the first request).`, { [REPLAYED_HEADER]: 'IdempotentReplayed' }),
      409: conflictOrInFlight(),
      422: problem(422, idempotencyProblems.reused()),
    },
    ...handled(({ service, idempotency, ownership }) =>
      idempotent(idempotency, path, async (req) => written(await service.patch(req.params.id as string, req.body, conditionsOf(req.headers), accessOf(req.headers, ownership)), owned, 200)),
    ),
  };
}

/** DELETE `path/{id}`. */
function deleteOperation<F extends Record<string, unknown>>({ Name, definition, at, problem, failures, notFound, notOwner, malformedCondition, handled }: OperationKit<F>): Operation {
  return {
    operationId: `delete${Name}`,
    summary: `Delete a ${definition.name}`,
    parameters: parameters('IfMatch', 'IfNoneMatchWrite'),
    responses: { 204: { description: 'Deleted.', headers: headers({}) }, 400: malformedCondition, ...notOwner, 404: notFound, 412: problem(412, problems.preconditionFailed()), ...failures(at) },
    ...handled(({ service, ownership }) => async (req: Request, res: Response) => {
      await service.delete(req.params.id as string, conditionsOf(req.headers), accessOf(req.headers, ownership));
      res.status(204).end();
    }),
  };
}

/**
 * The endpoints of a resource, declared once: `path` (list, create) and `path/{id}` (read, replace,
 * patch, delete), each operation with its parameters, bodies and every response it can give, and
 * the handlers that give them (with `runtime`), as its `ownership` (services.json) decides who sees
 * and changes its records, taking bodies of at most `bodyLimitBytes` (services.json; BODY_LIMIT_BYTES
 * where it sets none). POST and PATCH honour `Idempotency-Key`, with keys
 * scoped to `path`. Conditional requests follow RFC 9110 §13 on every method: an item's validator
 * is its ETag; a collection exists but has none, so on it `If-Match: *` holds, any other If-Match
 * fails (412), and `If-None-Match: *` on POST fails (412); If-None-Match on a list read is not
 * evaluated (no validator to compare, and the gateway's cache answers the same).
 */
export function resourceEndpoints<F extends Record<string, unknown>>(
  path: string,
  definition: ResourceDefinition<F>,
  ownership: Ownership,
  bodyLimitBytes = BODY_LIMIT_BYTES,
  runtime?: Omit<Runtime<F>, 'ownership'>,
): Endpoint[] {
  const described = describedResource(path, definition, ownership, bodyLimitBytes);
  const handlers = runtime && { ...runtime, ownership };
  const kit: OperationKit<F> = { ...described, ...sharedResponses(described), handled: (make) => (handlers ? { handlers: [make(handlers)] } : {}) };
  return [
    { path, tag: kit.tag, operations: { GET: listOperation(kit), POST: createOperation(kit) } },
    {
      path: kit.item,
      tag: kit.tag,
      parameters: [{ name: 'id', in: 'path', description: `The id of the ${definition.name}. One that is malformed or unknown is a 404.`, required: true, schema: { type: 'string' }, example: EXAMPLE_ID }],
      operations: { GET: readOperation(kit), PUT: replaceOperation(kit), PATCH: patchOperation(kit), DELETE: deleteOperation(kit) },
    },
  ];
}

/** The routes of a resource at `path`, from its declaration, with the ownership and body limit its service's entry in services.json gives it. */
export function resourceRoutes<F extends Record<string, unknown>, Filter>(
  path: string,
  service: ResourceService<F, Filter>,
  idempotency: IdempotencyStore,
  ownership: Ownership,
  bodyLimitBytes = BODY_LIMIT_BYTES,
): ResourceRoutes {
  const runtime = { service: service as ResourceService<F, unknown>, idempotency };
  const endpoints = resourceEndpoints(path, service.definition, ownership, bodyLimitBytes, runtime);
  return { path, router: routerOf(endpoints, bodyLimitBytes), readItem: itemReader(runtime.service, ownership) };
}

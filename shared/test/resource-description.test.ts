import { z } from 'zod';
import type { oas31 } from 'zod-openapi';
import { apiDocument, describe as describePaths, type OpenApiDocument } from '@app/shared/api-description/openapi';
import type { HttpProblem } from '@app/shared/platform/problem';
import { UUID_V7 } from '@app/shared/platform/request-target';
import { EXAMPLE_ID, resourceSchemas, validationExample } from '@app/shared/resource/description';
import { filters } from '@app/shared/resource/filters';
import { resourceEndpoints } from '@app/shared/resource/routes';
import { encodeCursor } from '@app/shared/resource/rules';

/**
 * What the API description says of a resource, as a client reading it (or generating a client from
 * it) sees it: each operation's parameters, bodies, responses and examples, and the schemas of the
 * resource, of a request body, of a merge patch and of a page.
 */

const fields = z.strictObject({
  name: z.string().min(1),
  stock: z.int().min(0).default(0),
  note: z.string().optional(),
  size: z.strictObject({ width: z.number(), unit: z.string().default('mm') }),
});
const definition = { name: 'widget', fields, filter: { name: filters.exact('name', z.string()) }, example: { name: 'Gear', stock: 3, size: { width: 2 } } };
const AT = `/api/widgets/${EXAMPLE_ID}`;
const EXAMPLE_TIME = '2026-11-21T10:00:00.000Z';

function documentOf(path: string, resource: Parameters<typeof resourceEndpoints>[1]): OpenApiDocument {
  const endpoints = resourceEndpoints(path, resource, 'none');
  return JSON.parse(JSON.stringify(apiDocument({ title: 'widgets', version: '1' }, describePaths(endpoints), endpoints.map(({ tag }) => tag)))) as OpenApiDocument;
}
/** The widgets' document, made anew by each test that reads it (so that what it runs counts as that test's). */
const widgetsDocument = () => documentOf('/api/widgets', definition);

/**
 * Each operation of the document (HEAD and OPTIONS aside: openapi.ts derives them) in short: its
 * parameters, and each response as `status [header: component] description` and, for a problem,
 * its example's detail, instance and errors.
 */
function outline(of: OpenApiDocument) {
  const refName = (ref: { $ref?: string; name?: string }) => ref.$ref?.replace(/^#\/components\/\w+\//, '') ?? `${ref.name} (query)`;
  const operations: Record<string, unknown> = {};
  for (const [path, item] of Object.entries(of.paths ?? {})) {
    for (const method of ['get', 'post', 'put', 'patch', 'delete'] as const) {
      const operation = item[method];
      if (!operation) continue;
      const responses = Object.entries(operation.responses ?? {}).map(([status, response]) => {
        const { description, headers = {}, content = {} } = response as oas31.ResponseObject;
        const named = Object.entries(headers).map(([name, header]) => `${name}: ${refName(header as { $ref: string })}`);
        const example = Object.values(content)[0]?.example as Record<string, unknown> | undefined;
        const problem = example && 'detail' in example ? ` — ${example.detail as string} at ${example.instance as string}${example.errors ? ` ${JSON.stringify(example.errors)}` : ''}` : '';
        return `${status} [${named.join(', ')}] ${description}${problem}`;
      });
      operations[`${method.toUpperCase()} ${path}`] = {
        id: operation.operationId,
        summary: operation.summary,
        ...(operation.description && { description: operation.description }),
        parameters: (operation.parameters ?? []).map(refName),
        responses,
      };
    }
  }
  return operations;
}

/** The responses every operation at `where` has. */
const failures = (where: string) => ['500 [X-Request-Id: XRequestId] Internal server error', `503 [X-Request-Id: XRequestId, Retry-After: RetryAfter] Service unavailable — The database is unavailable; try again shortly at ${where}`];
const bodyProblems = (where: string) => [
  `413 [X-Request-Id: XRequestId] Request body too large — The request body is larger than 100kb at ${where}`,
  `415 [X-Request-Id: XRequestId, Accept-Encoding: AcceptEncoding] Unsupported media type; Unsupported content encoding — The request body must be application/json, not text/plain at ${where}`,
];
const VALIDATION = '400 [X-Request-Id: XRequestId] Request validation failed; Malformed JSON body; Malformed HTTP request —';
const missingFields = (where: string) => `${VALIDATION} 2 fields are invalid at ${where} [{"path":"name","message":"is required"},{"path":"size","message":"is required"}]`;
const malformedIfMatch = `${VALIDATION} 1 field is invalid at ${AT} [{"path":"If-Match","message":"must be * or a list of entity tags (\\"…\\" or W/\\"…\\")"}]`;
const conflict = (where: string, retryAfter: boolean) =>
  `409 [X-Request-Id: XRequestId${retryAfter ? ', Retry-After: RetryAfterInFlight' : ''}] Resource already exists; Resource is being modified concurrently; A request with this Idempotency-Key is in progress — name is already taken at ${where} [{"path":"name","message":"is already taken"}]`;
const preconditionFailed = (where: string) => `412 [X-Request-Id: XRequestId] Precondition failed — If-Match does not match the current ETag of the resource at ${where}`;
const reused = (where: string) => `422 [X-Request-Id: XRequestId] Idempotency-Key reused for a different request — This Idempotency-Key was used for a different request at ${where}`;
const notFound = `404 [X-Request-Id: XRequestId] Resource not found — No widget with id ${EXAMPLE_ID} at ${AT}`;

describe("a resource's operations", () => {
  it('lists and creates at the collection, with the problems each can answer and their examples', () => {
    const operations = outline(widgetsDocument());
    expect(operations['GET /api/widgets']).toEqual({
      id: 'listWidgets',
      summary: 'List widgets',
      description:
        "A page of widgets in id order (creation order), at most `limit` (default 50). Walk the pages with `cursor` = the previous page's `nextCursor` until it is `null`: every item is seen exactly once, even while items are created or deleted.",
      parameters: ['limit (query)', 'cursor (query)', 'name (query)', 'RequestId', 'IfMatch'],
      responses: [
        '200 [X-Request-Id: XRequestId, Cache-Control: CacheControlPage] A page of widgets.',
        `${VALIDATION} 1 field is invalid at /api/widgets [{"path":"limit","message":"must be a whole number from 1 to 200"}]`,
        preconditionFailed('/api/widgets'),
        ...failures('/api/widgets'),
      ],
    });
    expect(operations['POST /api/widgets']).toEqual({
      id: 'createWidget',
      summary: 'Create a widget',
      parameters: ['RequestId', 'IfMatch', 'IfNoneMatchWrite', 'IdempotencyKey'],
      responses: [
        '201 [X-Request-Id: XRequestId, ETag: ETag, Location: Location, Idempotent-Replayed: IdempotentReplayed] Created: the widget as stored (or, for a retry with the same `Idempotency-Key`, the response to the first request).',
        missingFields('/api/widgets'),
        conflict('/api/widgets', true),
        preconditionFailed('/api/widgets'),
        reused('/api/widgets'),
        ...bodyProblems('/api/widgets'),
        ...failures('/api/widgets'),
      ].sort(byStatus),
    });
  });

  it('reads, replaces, patches and deletes at the item, with the problems each can answer and their examples', () => {
    const operations = outline(widgetsDocument());
    expect(operations['GET /api/widgets/{id}']).toEqual({
      id: 'getWidget',
      summary: 'Read a widget',
      parameters: ['RequestId', 'IfMatch', 'IfNoneMatch'],
      responses: [
        '200 [X-Request-Id: XRequestId, ETag: ETag, Cache-Control: CacheControlNoCache] The widget.',
        '304 [X-Request-Id: XRequestId, ETag: ETag, Cache-Control: CacheControlNoCache] Not modified: `If-None-Match` matches the current ETag.',
        malformedIfMatch,
        notFound,
        preconditionFailed(AT),
        ...failures(AT),
      ],
    });
    const updateResponses = (ok: string, retryAfter: boolean) => [ok, missingFields(AT), notFound, conflict(AT, retryAfter), preconditionFailed(AT), ...bodyProblems(AT), ...failures(AT)];
    expect(operations['PUT /api/widgets/{id}']).toEqual({
      id: 'replaceWidget',
      summary: 'Replace a widget',
      description: 'Full replacement: every writable field is required (absent ones take their defaults). Never creates: 404 for an unknown id.',
      parameters: ['RequestId', 'IfMatch', 'IfNoneMatchWrite'],
      responses: updateResponses('200 [X-Request-Id: XRequestId, ETag: ETag] Replaced: the widget as stored, with its new ETag.', false),
    });
    expect(operations['PATCH /api/widgets/{id}']).toEqual({
      id: 'patchWidget',
      summary: 'Change some fields of a widget',
      description:
        'An RFC 7396 JSON merge patch: members replace, nested objects merge, `null` removes a member (an optional field takes its default again). The result must be a valid resource.',
      parameters: ['RequestId', 'IfMatch', 'IfNoneMatchWrite', 'IdempotencyKey'],
      responses: [
        ...updateResponses(
          '200 [X-Request-Id: XRequestId, ETag: ETag, Idempotent-Replayed: IdempotentReplayed] Patched: the widget as stored, with its new ETag (or, for a retry with the same `Idempotency-Key`, the response to the first request).',
          true,
        ),
        reused(AT),
      ].sort(byStatus),
    });
    expect(operations['DELETE /api/widgets/{id}']).toEqual({
      id: 'deleteWidget',
      summary: 'Delete a widget',
      parameters: ['RequestId', 'IfMatch', 'IfNoneMatchWrite'],
      responses: ['204 [X-Request-Id: XRequestId] Deleted.', malformedIfMatch, notFound, preconditionFailed(AT), ...failures(AT)],
    });
  });

  it('tags both paths with the collection, and describes the id of the item path', () => {
    const document = widgetsDocument();
    expect(document.tags).toEqual([{ name: 'widgets', description: 'Widgets: list and create at `/api/widgets`; read, replace, patch and delete at `/api/widgets/{id}`.' }]);
    expect(document.paths?.['/api/widgets/{id}']?.parameters).toEqual([
      { name: 'id', in: 'path', description: 'The id of the widget. One that is malformed or unknown is a 404.', required: true, schema: { type: 'string' }, example: EXAMPLE_ID },
    ]);
    expect(Object.keys(document.paths ?? {})).toEqual(['/api/widgets', '/api/widgets/{id}']);
  });

  it("gives each list filter the definition's example, and each body and response the resource's", () => {
    const document = widgetsDocument();
    const collection = document.paths!['/api/widgets']!;
    expect(collection.get!.parameters).toContainEqual({ in: 'query', name: 'name', schema: { type: 'string', description: 'Only items whose `name` is this.' }, example: 'Gear' });
    const widget = { id: EXAMPLE_ID, name: 'Gear', stock: 3, size: { width: 2, unit: 'mm' }, createdAt: EXAMPLE_TIME, updatedAt: EXAMPLE_TIME };
    expect(collection.get!.responses!['200']).toMatchObject({ content: { 'application/json': { schema: { $ref: '#/components/schemas/WidgetPage' }, example: { items: [widget], nextCursor: encodeCursor(EXAMPLE_ID) } } } });
    expect(collection.post!.requestBody).toEqual({
      description: 'The new widget.',
      required: true,
      content: { 'application/json': { schema: { $ref: '#/components/schemas/WidgetInput' }, example: definition.example } },
    });
    expect(collection.post!.responses!['201']).toMatchObject({ content: { 'application/json': { schema: { $ref: '#/components/schemas/Widget' }, example: widget } } });
    const item = document.paths!['/api/widgets/{id}']!;
    expect(item.put!.requestBody).toEqual({
      description: 'The new state of the widget.',
      required: true,
      content: { 'application/json': { schema: { $ref: '#/components/schemas/WidgetInput' }, example: definition.example } },
    });
    for (const method of ['get', 'put', 'patch'] as const) {
      expect(item[method]!.responses!['200']).toMatchObject({ content: { 'application/json': { schema: { $ref: '#/components/schemas/Widget' }, example: widget } } });
    }
    const patchContent = { schema: { $ref: '#/components/schemas/WidgetPatch' }, example: { name: 'Gear' } };
    expect(item.patch!.requestBody).toEqual({
      description: 'The changes. `application/merge-patch+json` and `application/json` are accepted as the same.',
      required: true,
      content: { 'application/merge-patch+json': patchContent, 'application/json': patchContent },
    });
  });

  it('names a conflict after the first field of the example, and the operations after the last segment of the path', () => {
    const notes = documentOf('/v2/notes', { name: 'note', fields: z.strictObject({ text: z.string() }), filter: {}, example: { text: 'Hello' } });
    const conflicts = outline(notes)['POST /v2/notes'] as { responses: string[] };
    expect(conflicts.responses.find((line) => line.startsWith('409'))).toContain('— text is already taken at /v2/notes [{"path":"text","message":"is already taken"}]');
    expect(notes.tags).toEqual([{ name: 'notes', description: 'Notes: list and create at `/v2/notes`; read, replace, patch and delete at `/v2/notes/{id}`.' }]);
    expect(notes.paths?.['/v2/notes']?.get?.operationId).toBe('listNotes');
  });
});

describe("a resource's schemas", () => {
  const schemasOf = () => widgetsDocument().components!.schemas!;
  const timestamp = (what: string) => ({
    type: 'string',
    format: 'date-time',
    pattern: String.raw`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$`,
    readOnly: true,
    description: `${what}: RFC 3339 UTC with milliseconds, set by the service.`,
  });
  const ignored = { readOnly: true, description: 'Read-only: ignored in requests.' };

  it('describes the resource as responses have it: id and times read-only, every field present, no defaults at its top', () => {
    expect(schemasOf().Widget).toEqual({
      type: 'object',
      description: 'A widget.',
      properties: {
        id: {
          type: 'string',
          format: 'uuid',
          pattern: '^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$',
          readOnly: true,
          description: 'Assigned by the service: a UUID version 7, lower case.',
        },
        name: { type: 'string', minLength: 1 },
        stock: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
        note: { type: 'string' },
        size: { type: 'object', properties: { width: { type: 'number' }, unit: { type: 'string', default: 'mm' } }, required: ['width', 'unit'], additionalProperties: false },
        createdAt: timestamp('Creation time'),
        updatedAt: timestamp('Time of the last change'),
      },
      required: ['id', 'name', 'stock', 'size', 'createdAt', 'updatedAt'],
      additionalProperties: false,
    });
  });

  it('describes a request body: the writable fields, with the read-only ones ignored and unknown ones refused', () => {
    expect(schemasOf().WidgetInput).toMatchObject({
      type: 'object',
      description: 'A widget as a request sends it: every writable field (absent ones take their defaults). Unknown fields are a 400.',
      properties: { name: { type: 'string', minLength: 1 }, note: { type: 'string' }, id: ignored, createdAt: ignored, updatedAt: ignored },
      required: ['name', 'size'],
      additionalProperties: false,
    });
  });

  it('describes a merge patch: nothing required, null for an optional field (its default again), nested objects merged', () => {
    const nullable = (schema: object, description: string) => ({ anyOf: [schema, { type: 'null' }], description });
    expect(schemasOf().WidgetPatch).toEqual({
      type: 'object',
      description: 'Changes to a widget (RFC 7396 merge patch).',
      properties: {
        name: { type: 'string', minLength: 1 },
        stock: nullable({ type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER }, '`null` sets it to its default, 0.'),
        note: nullable({ type: 'string' }, '`null` removes it.'),
        size: { type: 'object', properties: { width: { type: 'number' }, unit: nullable({ type: 'string' }, '`null` sets it to its default, "mm".') }, additionalProperties: false },
        id: ignored,
        createdAt: ignored,
        updatedAt: ignored,
      },
      additionalProperties: false,
    });
  });

  it('describes a page: its items, and the cursor of the next page', () => {
    expect(schemasOf().WidgetPage).toEqual({
      type: 'object',
      description: 'A page of widgets.',
      properties: {
        items: { type: 'array', items: { $ref: '#/components/schemas/Widget' } },
        nextCursor: { type: ['string', 'null'], description: 'The `cursor` of the next page; `null` on the last page.' },
      },
      required: ['items', 'nextCursor'],
      additionalProperties: false,
    });
  });

  it('validates as it describes: a request body, and the example resource and page', () => {
    const described = resourceSchemas('widgets', definition, 'none');
    expect(described.Name).toBe('Widget');
    expect(described.input.parse({ id: 'x', createdAt: 1, name: 'a', size: { width: 1 } })).toEqual({ id: 'x', createdAt: 1, name: 'a', stock: 0, size: { width: 1, unit: 'mm' } });
    expect(described.input.safeParse({ name: 'a', size: { width: 1 }, colour: 'red' }).success).toBe(false);
    expect(described.resource.parse(described.exampleResource)).toEqual(described.exampleResource);
    // What the schema says of an id: the example's is one.
    expect(described.exampleResource.id).toMatch(UUID_V7);
    expect(described.page.parse(described.examplePage)).toEqual({ items: [described.exampleResource], nextCursor: encodeCursor(EXAMPLE_ID) });
  });

  it.each([
    ['writes', 'may change it (every reader sees it).'],
    ['all', 'may see or change it.'],
  ] as const)('shows the owner of a record whose service is declared "%s": read-only, saying what only it may do', (ownership, says) => {
    const described = resourceSchemas('widgets', definition, ownership);
    const owner = (described.resource.shape as Record<string, z.ZodType>).owner!;
    expect(owner.safeParse(null).success && owner.safeParse('auth0|ada').success && !owner.safeParse(1).success).toBe(true);
    expect(owner.meta()).toMatchObject({ readOnly: true });
    expect(owner.meta()?.description).toMatch(/^The subject of the access token that created it .*`widgets:admin` scope, /);
    expect(String(owner.meta()?.description).endsWith(says)).toBe(true);
    expect(described.resource.parse(described.exampleResource)).toMatchObject({ owner: 'auth0|ada' });
    // A request may send it back: ignored, as every read-only field is.
    expect(described.input.parse({ owner: 'someone', name: 'a', size: { width: 1 } })).toMatchObject({ owner: 'someone', name: 'a' });
    expect(described.input.safeParse({ name: 'a', size: { width: 1 }, colour: 'red' }).success).toBe(false);
  });

  it('shows no owner where the service declares none', () => {
    const described = resourceSchemas('widgets', definition, 'none');
    expect(described.resource.safeParse({ ...described.exampleResource, owner: 'auth0|ada' }).success).toBe(false);
    expect(described.exampleResource).not.toHaveProperty('owner');
    expect(described.input.safeParse({ owner: 'someone', name: 'a', size: { width: 1 } }).success).toBe(false);
  });
});

describe("a resource's body limit (services.json)", () => {
  it("is named by every 413 of a resource that sets its own, in place of the default's", () => {
    const endpoints = resourceEndpoints('/api/widgets', definition, 'none', 256 * 1024);
    const own = JSON.parse(JSON.stringify(apiDocument({ title: 'widgets', version: '1' }, describePaths(endpoints), []))) as OpenApiDocument;
    const tooLarge = Object.values(outline(own)).flatMap((operation) => (operation as { responses: string[] }).responses.filter((response) => response.startsWith('413')));
    const larger = (where: string) => `413 [X-Request-Id: XRequestId] Request body too large — The request body is larger than 256kb at ${where}`;
    // POST to the collection, PUT and PATCH of an item.
    expect(tooLarge).toEqual([larger('/api/widgets'), larger(AT), larger(AT)]);
  });
});

describe('validationExample', () => {
  it('is the 400 problem the schema answers for the input, at the given path', () => {
    const { problem, at } = validationExample(fields, { name: '' }, '/api/widgets');
    expect(at).toBe('/api/widgets');
    expect((problem as HttpProblem).toJSON(at)).toMatchObject({ status: 400, detail: '2 fields are invalid', errors: [{ path: 'name' }, { path: 'size', message: 'is required' }] });
  });

  it('refuses an input the schema accepts: it cannot be the example of a 400', () => {
    expect(() => validationExample(fields, { name: 'a', size: { width: 1 } }, '/api/widgets')).toThrow('{"name":"a","size":{"width":1}} is valid: it cannot be the example of a 400');
  });
});

/** Responses in the order the document lists them: by status. */
function byStatus(a: string, b: string): number {
  return a.slice(0, 3).localeCompare(b.slice(0, 3));
}

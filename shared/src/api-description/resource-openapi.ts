import { BODY_LIMIT } from '../platform/http.js';
import {
  commonComponents,
  jsonContent,
  jsonSchemaOf,
  omit,
  problemExample,
  problemResponse,
  ref,
  requestIdHeader,
  routeItem,
  type ApiPart,
  type Parameter,
  type Reference,
  type Response,
  type Schema,
} from './openapi.js';
import { idempotencyProblems } from '../resource/idempotency.js';
import { HttpProblem, problems } from '../platform/problem.js';
import { COLLECTION_METHODS, ITEM_METHODS, PATCH_MEDIA_TYPES } from '../resource/routes.js';
import { UUID_V7 } from '../platform/request-target.js';
import { DEFAULT_LIMIT, encodeCursor, listQuerySchema, type ResourceDefinition } from '../resource/rules.js';
import { parseOrThrow } from '../platform/validation.js';

/**
 * The description of a resource at `path`, as `resourceRoutes(path, …)` serves it: the operations
 * and statuses of the router, the field schemas of the definition (request bodies as zod accepts
 * them, responses as it produces them), examples computed from the definition's example.
 */

const READ_ONLY = ['id', 'createdAt', 'updatedAt'];
const TIMESTAMP = '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}Z$';
const EXAMPLE_ID = '0193a5c2-7b1e-7c4d-9a61-2f0c1b9e8d40';
const EXAMPLE_TIME = '2026-11-21T10:00:00.000Z';

const pascal = (word: string) => word.charAt(0).toUpperCase() + word.slice(1);

interface ObjectSchema extends Schema {
  type: 'object';
  properties: Record<string, Schema>;
  required?: string[];
}

function objectSchema(schema: Schema, what: string): ObjectSchema {
  if (schema.type !== 'object' || typeof schema.properties !== 'object') throw new Error(`${what} must be a JSON object schema`);
  return schema as ObjectSchema;
}

/** `schema` without `default`s: a response always carries every field, so they would only mislead. */
function withoutDefaults(schema: Schema): Schema {
  const rest = omit(schema, 'default');
  if (rest.type !== 'object' || typeof rest.properties !== 'object') return rest;
  const properties = Object.entries(rest.properties as Record<string, Schema>).map(([field, property]) => [field, withoutDefaults(property)]);
  return { ...rest, properties: Object.fromEntries(properties) };
}

/** The representation: id, the fields as stored, the timestamps (see `representation`). */
function representationSchema(fields: ObjectSchema, name: string): Schema {
  const timestamp = (what: string): Schema => ({ type: 'string', format: 'date-time', pattern: TIMESTAMP, readOnly: true, description: `${what}: RFC 3339 UTC with milliseconds, set by the service.` });
  return {
    type: 'object',
    description: `A ${name}.`,
    properties: {
      id: { type: 'string', format: 'uuid', pattern: UUID_V7.source, readOnly: true, description: 'Assigned by the service: a UUID version 7, lower case.' },
      ...(withoutDefaults(fields) as ObjectSchema).properties,
      createdAt: timestamp('Creation time'),
      updatedAt: timestamp('Time of the last change'),
    },
    required: ['id', ...(fields.required ?? []), 'createdAt', 'updatedAt'],
    additionalProperties: false,
  };
}

/** The read-only fields a request body may carry: ignored, whatever their value. */
const ignoredReadOnly = Object.fromEntries(READ_ONLY.map((field) => [field, { readOnly: true, description: 'Read-only: ignored in requests.' }]));

/** A request body for POST and PUT: every writable field (defaults apply to absent ones). */
function inputSchema(fields: ObjectSchema, name: string): Schema {
  return {
    ...fields,
    description: `A ${name} as a request sends it: every writable field (absent ones take their defaults). Unknown fields are a 400.`,
    properties: { ...fields.properties, ...ignoredReadOnly },
  };
}

/**
 * An RFC 7396 merge patch of `fields`: every member optional; `null` removes a member, which is
 * allowed only where the field is optional (it takes its default again). Nested objects merge.
 */
function mergePatchSchema(fields: ObjectSchema): ObjectSchema {
  const required = new Set(fields.required ?? []);
  const properties = Object.fromEntries(
    Object.entries(fields.properties).map(([field, schema]) => {
      const fallback = schema.default;
      const rest = omit(schema, 'default');
      const patched = rest.type === 'object' && rest.properties ? mergePatchSchema(rest as ObjectSchema) : rest;
      if (required.has(field)) return [field, patched];
      const reset = fallback === undefined ? 'removes it' : `sets it to its default, ${JSON.stringify(fallback)}`;
      return [field, { anyOf: [patched, { type: 'null' }], description: `\`null\` ${reset}.` }];
    }),
  );
  return { ...omit(fields, 'required'), properties };
}

/** The problem a schema gives for `input`, as its example. */
function validationExample(schema: Parameters<typeof parseOrThrow>[0], input: unknown, instance: string) {
  try {
    parseOrThrow(schema, input);
  } catch (error) {
    if (error instanceof HttpProblem) return problemExample(error, instance);
    throw error;
  }
  throw new Error(`${JSON.stringify(input)} is valid: it cannot be the example of a 400`);
}

/** Query parameters from the list query schema: what they parse to when JSON Schema can say it (limit: an integer), else their text. */
function queryParameters(definition: ResourceDefinition<Record<string, unknown>>): Parameter[] {
  return Object.entries(listQuerySchema(definition.filter).shape).map(([name, schema]) => {
    let json: Schema;
    try {
      json = jsonSchemaOf(schema, 'output');
    } catch {
      json = jsonSchemaOf(schema, 'input');
    }
    const { description, ...rest } = json;
    const example = definition.example[name];
    return {
      name,
      in: 'query',
      description: typeof description === 'string' ? description : `Only the items whose \`${name}\` is this value.`,
      required: !schema.safeParse(undefined).success,
      schema: rest,
      ...(typeof example === 'string' ? { example } : {}),
    };
  });
}

export function resourceApi<F extends Record<string, unknown>>(path: string, definition: ResourceDefinition<F>): ApiPart {
  const plural = path.slice(path.lastIndexOf('/') + 1);
  const Name = pascal(definition.name);
  const Plural = pascal(plural);
  const names = { resource: Name, input: `${Name}Input`, patch: `${Name}Patch`, page: `${Name}Page` };
  const item = `${path}/{id}`;
  const exampleItem = `${path}/${EXAMPLE_ID}`;

  const input = objectSchema(jsonSchemaOf(definition.fields, 'input'), `The fields of ${definition.name}`);
  const output = objectSchema(jsonSchemaOf(definition.fields, 'output'), `The fields of ${definition.name}`);

  // Examples: the definition's example as a request, and what the service makes of it.
  const exampleInput = definition.example;
  const exampleResource = { id: EXAMPLE_ID, ...definition.fields.parse(exampleInput), createdAt: EXAMPLE_TIME, updatedAt: EXAMPLE_TIME };
  const examplePage = { items: [exampleResource], nextCursor: encodeCursor(EXAMPLE_ID) };
  const firstField = Object.keys(exampleInput)[0] ?? 'id';

  const parameters = (...names: string[]): Reference[] => ['RequestId', ...names].map((name) => ref('parameters', name));
  const problem = (status: number, example?: Record<string, unknown>) => problemResponse(status, example ? { example } : {});
  const notFound = problem(404, problemExample(problems.notFound(`No ${definition.name} with id ${EXAMPLE_ID}`), exampleItem));
  const unavailable = (instance: string) => problem(503, problemExample(problems.unavailable('The database is unavailable; try again shortly'), instance));
  const internal = problem(500);
  const preconditionFailed = (instance: string) => problem(412, problemExample(problems.preconditionFailed(), instance));
  const malformedCondition = (instance: string) =>
    problem(400, problemExample(problems.validation([{ path: 'If-Match', message: 'must be * or a list of entity tags ("…" or W/"…")' }]), instance));
  const bodyProblems = (instance: string): Record<string, Response> => ({
    413: problem(413, problemExample(new HttpProblem('payload-too-large', `The request body is larger than ${BODY_LIMIT}`), instance)),
    415: problem(415, problemExample(new HttpProblem('unsupported-media-type', 'The request body must be application/json, not text/plain'), instance)),
  });
  /** What POST and PATCH answer about their Idempotency-Key. */
  const idempotencyProblemsAt = (instance: string): Record<string, Response> => ({
    422: problem(422, problemExample(idempotencyProblems.reused(), instance)),
  });
  const replayed = { 'Idempotent-Replayed': ref('headers', 'IdempotentReplayed') };
  const withResource = (description: string, status: string, headers: Response['headers'] = {}): Record<string, Response> => ({
    [status]: {
      description,
      headers: { ...requestIdHeader(), ETag: ref('headers', 'ETag'), ...headers },
      content: jsonContent(ref('schemas', names.resource), exampleResource),
    },
  });
  /** PUT and PATCH: the same outcomes. */
  const updateResponses = (description: string): Record<string, Response> => ({
    ...withResource(description, '200'),
    400: problem(400, validationExample(definition.fields, {}, exampleItem)),
    404: notFound,
    409: problem(409, problemExample(problems.conflict(firstField, 'is already taken'), exampleItem)),
    412: preconditionFailed(exampleItem),
    ...bodyProblems(exampleItem),
    500: internal,
    503: unavailable(exampleItem),
  });
  const writeBody = (description: string) => ({
    description,
    required: true,
    content: jsonContent(ref('schemas', names.input), exampleInput),
  });
  const tag = plural;

  return {
    tags: [{ name: tag, description: `${Plural}: list and create at \`${path}\`; read, replace, patch and delete at \`${item}\`.` }],
    paths: {
      [path]: routeItem(
        COLLECTION_METHODS,
        {
          GET: {
            operationId: `list${Plural}`,
            summary: `List ${plural}`,
            description: `A page of ${plural} in id order (creation order), at most \`limit\` (default ${DEFAULT_LIMIT}). Walk the pages with \`cursor\` = the previous page's \`nextCursor\` until it is \`null\`: every item is seen exactly once, even while items are created or deleted. An unknown query parameter is a 400.`,
            tags: [tag],
            parameters: [...parameters('IfMatch'), ...queryParameters(definition)],
            responses: {
              200: {
                description: `A page of ${plural}.`,
                headers: { ...requestIdHeader(), 'Cache-Control': ref('headers', 'CacheControlNoCache') },
                content: jsonContent(ref('schemas', names.page), examplePage),
              },
              400: problem(400, validationExample(listQuerySchema(definition.filter), { limit: '0' }, path)),
              412: preconditionFailed(path),
              500: internal,
              503: unavailable(path),
            },
          },
          POST: {
            operationId: `create${Name}`,
            summary: `Create a ${definition.name}`,
            tags: [tag],
            parameters: parameters('IfMatch', 'IfNoneMatchWrite', 'IdempotencyKey'),
            requestBody: writeBody(`The new ${definition.name}.`),
            responses: {
              ...withResource(`Created: the ${definition.name} as stored (or, for a retry with the same \`Idempotency-Key\`, the response to the first request).`, '201', {
                Location: ref('headers', 'Location'),
                ...replayed,
              }),
              400: problem(400, validationExample(definition.fields, {}, path)),
              409: problem(409, problemExample(problems.conflict(firstField, 'is already taken'), path)),
              412: preconditionFailed(path),
              ...idempotencyProblemsAt(path),
              ...bodyProblems(path),
              500: internal,
              503: unavailable(path),
            },
          },
        },
        { optionsId: `options${Plural}`, tag },
      ),
      [item]: routeItem(
        ITEM_METHODS,
        {
          GET: {
            operationId: `get${Name}`,
            summary: `Read a ${definition.name}`,
            tags: [tag],
            parameters: parameters('IfMatch', 'IfNoneMatch'),
            responses: {
              ...withResource(`The ${definition.name}.`, '200', { 'Cache-Control': ref('headers', 'CacheControlNoCache') }),
              304: {
                description: 'Not modified: `If-None-Match` matches the current ETag.',
                headers: { ...requestIdHeader(), ETag: ref('headers', 'ETag'), 'Cache-Control': ref('headers', 'CacheControlNoCache') },
              },
              400: malformedCondition(exampleItem),
              404: notFound,
              412: preconditionFailed(exampleItem),
              500: internal,
              503: unavailable(exampleItem),
            },
          },
          PUT: {
            operationId: `replace${Name}`,
            summary: `Replace a ${definition.name}`,
            description: `Full replacement: every writable field is required (absent ones take their defaults). Never creates: 404 for an unknown id.`,
            tags: [tag],
            parameters: parameters('IfMatch', 'IfNoneMatchWrite'),
            requestBody: writeBody(`The new state of the ${definition.name}.`),
            responses: updateResponses(`Replaced: the ${definition.name} as stored, with its new ETag.`),
          },
          PATCH: {
            operationId: `patch${Name}`,
            summary: `Change some fields of a ${definition.name}`,
            description: 'An RFC 7396 JSON merge patch: members replace, nested objects merge, `null` removes a member (an optional field takes its default again). The result must be a valid resource.',
            tags: [tag],
            parameters: parameters('IfMatch', 'IfNoneMatchWrite', 'IdempotencyKey'),
            requestBody: {
              description: `The changes. ${PATCH_MEDIA_TYPES.map((type) => `\`${type}\``).join(' and ')} are accepted as the same.`,
              required: true,
              content: Object.fromEntries(
                PATCH_MEDIA_TYPES.map((type) => [type, { schema: ref('schemas', names.patch), example: { [firstField]: exampleInput[firstField] } }]),
              ),
            },
            responses: {
              ...updateResponses(`Patched: the ${definition.name} as stored, with its new ETag.`),
              ...withResource(`Patched: the ${definition.name} as stored, with its new ETag (or, for a retry with the same \`Idempotency-Key\`, the response to the first request).`, '200', replayed),
              ...idempotencyProblemsAt(exampleItem),
            },
          },
          DELETE: {
            operationId: `delete${Name}`,
            summary: `Delete a ${definition.name}`,
            tags: [tag],
            parameters: parameters('IfMatch', 'IfNoneMatchWrite'),
            responses: {
              204: { description: 'Deleted.', headers: requestIdHeader() },
              400: malformedCondition(exampleItem),
              404: notFound,
              412: preconditionFailed(exampleItem),
              500: internal,
              503: unavailable(exampleItem),
            },
          },
        },
        {
          optionsId: `options${Name}`,
          tag,
          parameters: [
            {
              name: 'id',
              in: 'path',
              description: `The id of the ${definition.name}. One that is malformed or unknown is a 404.`,
              required: true,
              schema: { type: 'string' },
              example: EXAMPLE_ID,
            },
          ],
        },
      ),
    },
    components: {
      ...commonComponents(),
      schemas: {
        ...commonComponents().schemas,
        [names.resource]: representationSchema(output, definition.name),
        [names.input]: inputSchema(input, definition.name),
        [names.patch]: { ...mergePatchSchema(input), description: `Changes to a ${definition.name} (RFC 7396 merge patch).`, properties: { ...mergePatchSchema(input).properties, ...ignoredReadOnly } },
        [names.page]: {
          type: 'object',
          description: `A page of ${plural}.`,
          properties: {
            items: { type: 'array', items: ref('schemas', names.resource) },
            nextCursor: { type: ['string', 'null'], description: 'The `cursor` of the next page; `null` on the last page.' },
          },
          required: ['items', 'nextCursor'],
          additionalProperties: false,
        },
      },
    },
  };
}

import { z } from 'zod';
import type { oas31 } from 'zod-openapi';
import type { HttpProblem } from '../platform/problem.js';
import { ownershipPolicy, type Ownership } from '../platform/ownership-policy.js';
import { scopesOfService } from '../platform/services.js';
import { UUID_V7 } from '../platform/request-target.js';
import { encodeCursor, type ResourceDefinition } from './rules.js';
import { parseOrThrow } from '../platform/validation.js';

/**
 * The schemas and examples of a resource's description, from its definition: responses as zod
 * produces the fields, request bodies as it accepts them, a merge patch of them, and a page.
 */

export const EXAMPLE_ID = '0193a5c2-7b1e-7c4d-9a61-2f0c1b9e8d40';
const EXAMPLE_TIME = '2026-11-21T10:00:00.000Z';
const pascal = (word: string) => word.charAt(0).toUpperCase() + word.slice(1);

const timestamp = (what: string) =>
  z.string().meta({ format: 'date-time', pattern: '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}Z$', readOnly: true, description: `${what}: RFC 3339 UTC with milliseconds, set by the service.` });
const ignored = z.unknown().optional().meta({ readOnly: true, description: 'Read-only: ignored in requests.' });

/**
 * An RFC 7396 merge patch of the JSON Schema `fields`: every member optional; `null` removes a
 * member, which is allowed only where the field is optional (it takes its default again). Nested objects merge.
 */
function toMergePatch(fields: oas31.SchemaObject): void {
  const required = new Set(fields.required ?? []);
  delete fields.required;
  const properties = (fields.properties ??= {});
  for (const [field, schema] of Object.entries(properties) as [string, oas31.SchemaObject][]) {
    if (schema.readOnly) continue;
    const fallback = schema.default;
    delete schema.default;
    if (schema.type === 'object') toMergePatch(schema);
    if (required.has(field)) continue;
    const reset = fallback === undefined ? 'removes it' : `sets it to its default, ${JSON.stringify(fallback)}`;
    properties[field] = { anyOf: [schema, { type: 'null' }], description: `\`null\` ${reset}.` };
  }
}

/** The problem `schema` gives for `input`, as an example. */
export function validationExample(schema: z.ZodType, input: unknown, at: string): { problem: HttpProblem; at: string } {
  try {
    parseOrThrow(schema, input);
  } catch (problem) {
    return { problem: problem as HttpProblem, at }; // parseOrThrow throws only validation problems
  }
  throw new Error(`${JSON.stringify(input)} is valid: it cannot be the example of a 400`);
}

/**
 * The schemas of a resource; where its `ownership` gives records owners who decide who sees or
 * changes them (services.json), its representation shows the owner.
 */
export function resourceSchemas<F extends Record<string, unknown>>(plural: string, definition: ResourceDefinition<F>, ownership: Ownership) {
  const Name = pascal(definition.name);
  const { shape } = definition.fields;
  const { owned: hasOwners, ownerAlone } = ownershipPolicy(ownership);
  const owner = hasOwners
    ? z.string().nullable().meta({
        readOnly: true,
        description: `The subject of the access token that created it (\`null\` for one created before records had owners): only it, and a caller with the \`${scopesOfService(plural).admin}\` scope, may ${ownerAlone}.`,
      })
    : undefined;
  const owned = owner !== undefined;
  const resource = z
    .strictObject({
      id: z.string().meta({ format: 'uuid', pattern: UUID_V7.source, readOnly: true, description: 'Assigned by the service: a UUID version 7, lower case.' }),
      ...shape,
      ...(owner && { owner }),
      createdAt: timestamp('Creation time'),
      updatedAt: timestamp('Time of the last change'),
    })
    .meta({ id: Name, description: `A ${definition.name}.`, override: ({ jsonSchema }) => Object.values(jsonSchema.properties ?? {}).forEach((field) => delete (field as oas31.SchemaObject).default) });
  const exampleResource = { id: EXAMPLE_ID, ...definition.fields.parse(definition.example), ...(owned && { owner: 'auth0|ada' }), createdAt: EXAMPLE_TIME, updatedAt: EXAMPLE_TIME };
  const readOnly = { id: ignored, ...(owned && { owner: ignored }), createdAt: ignored, updatedAt: ignored };
  return {
    Name,
    resource,
    exampleResource,
    input: z.strictObject({ ...shape, ...readOnly }).meta({ id: `${Name}Input`, description: `A ${definition.name} as a request sends it: every writable field (absent ones take their defaults). Unknown fields are a 400.` }),
    patch: z.strictObject({ ...shape, ...readOnly }).meta({
      id: `${Name}Patch`,
      description: `Changes to a ${definition.name} (RFC 7396 merge patch).`,
      override: ({ jsonSchema }) => toMergePatch(jsonSchema as oas31.SchemaObject),
    }),
    page: z
      .strictObject({
        items: z.array(resource),
        nextCursor: z.string().nullable().meta({ description: 'The `cursor` of the next page; `null` on the last page.' }),
      })
      .meta({ id: `${Name}Page`, description: `A page of ${plural}.` }),
    examplePage: { items: [exampleResource], nextCursor: encodeCursor(EXAMPLE_ID) },
  };
}

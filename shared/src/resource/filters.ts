import { z } from 'zod';

/**
 * A resource's list filters: each is one query parameter comparing one field with the value it
 * carries. Its zod schema parses the parameter's text (a bad value is a 400 naming it) and is what
 * the API description shows; the engine's store turns it into a condition on the field's column.
 */

/** How a stored value must compare with the parameter's for an item to be listed. */
export type Comparison = '=' | '>=' | '<=';

export interface Filter<T = unknown> {
  /** The field it compares: a dotted path for a nested one (`price.currency`). */
  field: string;
  comparison: Comparison;
  /** From the query string's text to the value compared. */
  schema: z.ZodType<T>;
}

/** A resource's filters, by query parameter. */
export type FilterSet = Record<string, Filter>;

/** What a list receives of `Filters` once the query is parsed: z.infer of each declared schema. */
export type FilterValues<Filters extends FilterSet> = { [K in keyof Filters]?: z.output<Filters[K]['schema']> };

/** The value at a dotted `path` in `fields`: undefined when a step is missing. */
export function valueAt(fields: unknown, path: string): unknown {
  let value = fields;
  for (const key of path.split('.')) value = (value as Record<string, unknown> | undefined)?.[key];
  return value;
}

const filterOf = <T>(field: string, comparison: Comparison, schema: z.ZodType<T>, description: string): Filter<T> => ({
  field,
  comparison,
  // A description the declaration gave its schema wins over the one said for every filter of the kind.
  schema: schema.description === undefined ? schema.meta({ description }) : schema,
});

const only = (field: string, what: string) => `Only items whose \`${field}\` is ${what}.`;

/** The bounds JSON Schema gives an integer schema: what the description of its parameter states. */
function boundsOf(schema: z.ZodType<number, number>): { minimum?: number; maximum?: number } {
  const { minimum, maximum } = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as { minimum?: number; maximum?: number };
  return { ...(minimum === undefined ? {} : { minimum }), ...(maximum === undefined ? {} : { maximum }) };
}

/**
 * An integer parameter held to the field's own rule (its bounds and messages): decimal digits only,
 * so `1e3`, `0x10`, ` 7` or an empty value are a 400 rather than a number JavaScript would read; at
 * most 15 of them, so that every number read is exact.
 */
function integerParameter(schema: z.ZodType<number, number>): z.ZodType<number> {
  const bounds = boundsOf(schema);
  return z
    .string()
    .regex(/^-?\d{1,15}$/, 'must be a whole number')
    .transform(Number)
    .pipe(schema)
    .meta({
      // Described as what it parses to, so a generated client sends a number.
      override: ({ jsonSchema }) => {
        Object.assign(jsonSchema, { type: 'integer', ...bounds });
        delete jsonSchema.pattern;
      },
    });
}

const capitalized = <N extends string>(name: N) => (name.charAt(0).toUpperCase() + name.slice(1)) as Capitalize<N>;

/** The kinds of filter a resource declares, each from the field it compares. */
export const filters = {
  /** `?field=value`: the field equals the value, which `schema` (a string rule, often the field's own) must accept. */
  exact: <T extends string>(field: string, schema: z.ZodType<T>): Filter<T> => filterOf(field, '=', schema, only(field, 'this')),
  /** `?field=<uuid>`: the field, a UUID, equals the value. */
  uuid: (field: string): Filter<string> => filterOf(field, '=', z.uuid('must be a UUID'), only(field, 'this UUID')),
  /** `?field=<one of values>`. */
  oneOf: <const V extends readonly [string, ...string[]]>(field: string, values: V): Filter<V[number]> =>
    filterOf(field, '=', z.enum(values, `must be one of ${values.join(', ')}`), only(field, 'this')),
  /** `?field=<n>`: the field equals a whole number that `schema` (the field's own rule) accepts. */
  integer: (field: string, schema: z.ZodType<number, number>): Filter<number> => filterOf(field, '=', integerParameter(schema), only(field, 'this')),
  /**
   * `?minField=<n>&maxField=<n>`: the field from one bound to the other, both included, either one
   * optional. For a column with an index, so that a range reads only the rows it lists.
   */
  range: <N extends string>(field: N, schema: z.ZodType<number, number>) =>
    ({
      [`min${capitalized(field)}`]: filterOf(field, '>=', integerParameter(schema), only(field, 'at least this')),
      [`max${capitalized(field)}`]: filterOf(field, '<=', integerParameter(schema), only(field, 'at most this')),
    }) as Record<`min${Capitalize<N>}` | `max${Capitalize<N>}`, Filter<number>>,
};

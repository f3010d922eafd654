import { z } from 'zod';
import { apiDocument, describe as describePaths } from '@app/shared/api-description/openapi';
import { HttpProblem } from '@app/shared/platform/problem';
import { parseOrThrow } from '@app/shared/platform/validation';
import { filters, valueAt } from '@app/shared/resource/filters';
import { resourceEndpoints } from '@app/shared/resource/routes';
import { listQuerySchema } from '@app/shared/resource/rules';

/**
 * Each kind of list filter as a client meets it: the query parameters it reads, what a bad value
 * answers (a 400 naming the parameter, never a 500), and what the API description says of it.
 */

const rating = z.int('must be a whole number').min(1, 'must be from 1 to 5').max(5, 'must be from 1 to 5');
const fields = z.strictObject({ productId: z.uuid(), rating, status: z.enum(['draft', 'published']), code: z.string(), price: z.strictObject({ currency: z.string() }) });
const filter = {
  productId: filters.uuid('productId'),
  rating: filters.integer('rating', rating),
  ...filters.range('rating', rating),
  status: filters.oneOf('status', ['draft', 'published']),
  code: filters.exact('code', z.string().max(8).meta({ description: 'Only the one with this code.' })),
  currency: filters.exact('price.currency', z.string()),
};
const example = { productId: '0193a5c2-7b1e-7c4d-9a61-2f0c1b9e8d40', rating: 4, status: 'published', code: 'C-1', price: { currency: 'EUR' } };
const query = listQuerySchema(filter);

/** The errors of the 400 a query gets, or its parsed value. */
function parsed(input: Record<string, unknown>): unknown {
  try {
    return parseOrThrow(query, input);
  } catch (error) {
    expect(error).toBeInstanceOf(HttpProblem);
    return { status: (error as HttpProblem).status, errors: (error as HttpProblem).extras.errors };
  }
}
const refused = (path: string, message: string) => ({ status: 400, errors: [{ path, message }] });

describe('filters', () => {
  it('compares each field as declared: = for one value, >= and <= for the bounds of a range', () => {
    expect(Object.entries(filter).map(([name, { field, comparison }]) => [name, field, comparison])).toEqual([
      ['productId', 'productId', '='],
      ['rating', 'rating', '='],
      ['minRating', 'rating', '>='],
      ['maxRating', 'rating', '<='],
      ['status', 'status', '='],
      ['code', 'code', '='],
      ['currency', 'price.currency', '='],
    ]);
  });

  it('parses each parameter from its text to the value compared', () => {
    expect(parsed({ productId: example.productId.toUpperCase(), rating: '3', minRating: '1', maxRating: '5', status: 'draft', code: 'C-1', currency: 'EUR' })).toEqual({
      productId: example.productId.toUpperCase(),
      rating: 3,
      minRating: 1,
      maxRating: 5,
      status: 'draft',
      code: 'C-1',
      currency: 'EUR',
    });
    expect(parsed({})).toEqual({});
  });

  it.each(['abc', '', ' 3', '3 ', '1e0', '0x3', '3.0', '+3', '12345678901234567'])('refuses %j for an integer: a whole number in decimal digits only', (text) => {
    expect(parsed({ rating: text })).toEqual(refused('rating', 'must be a whole number'));
    expect(parsed({ minRating: text })).toEqual(refused('minRating', 'must be a whole number'));
  });

  it("holds an integer to the field's own rule", () => {
    expect(parsed({ rating: '0' })).toEqual(refused('rating', 'must be from 1 to 5'));
    expect(parsed({ maxRating: '6' })).toEqual(refused('maxRating', 'must be from 1 to 5'));
    expect(parsed({ rating: '-1' })).toEqual(refused('rating', 'must be from 1 to 5'));
    expect(parsed({ rating: '10' })).toEqual(refused('rating', 'must be from 1 to 5'));
    expect(parsed({ rating: '9007199254740993' })).toEqual(refused('rating', 'must be a whole number'));
  });

  it('refuses a value that is not a UUID, not one of the enum, or against its schema, and a repeated parameter', () => {
    expect(parsed({ productId: 'not-a-uuid' })).toEqual(refused('productId', 'must be a UUID'));
    expect(parsed({ status: 'Draft' })).toEqual(refused('status', 'must be one of draft, published'));
    expect(parsed({ code: 'x'.repeat(9) })).toMatchObject({ status: 400, errors: [{ path: 'code' }] });
    expect(parsed({ rating: ['1', '2'] })).toMatchObject({ status: 400, errors: [{ path: 'rating' }] });
  });

  it('reads a nested field by its dotted path', () => {
    expect(valueAt(example, 'price.currency')).toBe('EUR');
    expect(valueAt(example, 'price.amount')).toBeUndefined();
    expect(valueAt(example, 'missing.currency')).toBeUndefined();
  });
});

describe('the description of the filters', () => {
  const endpoints = resourceEndpoints('/api/reviews', { name: 'review', fields, filter, example }, 'none');
  const document = JSON.parse(JSON.stringify(apiDocument({ title: 'reviews', version: '1' }, describePaths(endpoints), endpoints.map(({ tag }) => tag))));
  const parameter = (name: string) => document.paths['/api/reviews'].get.parameters.find((described: { name?: string }) => described.name === name);

  it('states each type: integer with its bounds, format uuid, the enum, a string', () => {
    expect(parameter('productId')).toEqual({ in: 'query', name: 'productId', example: example.productId, schema: expect.objectContaining({ type: 'string', format: 'uuid', description: 'Only items whose `productId` is this UUID.' }) });
    expect(parameter('rating')).toEqual({ in: 'query', name: 'rating', example: 4, schema: { type: 'integer', minimum: 1, maximum: 5, description: 'Only items whose `rating` is this.' } });
    expect(parameter('minRating')).toEqual({ in: 'query', name: 'minRating', example: 4, schema: { type: 'integer', minimum: 1, maximum: 5, description: 'Only items whose `rating` is at least this.' } });
    expect(parameter('maxRating')).toEqual({ in: 'query', name: 'maxRating', example: 4, schema: { type: 'integer', minimum: 1, maximum: 5, description: 'Only items whose `rating` is at most this.' } });
    expect(parameter('status')).toEqual({ in: 'query', name: 'status', example: 'published', schema: { type: 'string', enum: ['draft', 'published'], description: 'Only items whose `status` is this.' } });
  });

  it('states only the bounds the field has', () => {
    const unbounded = resourceEndpoints('/api/counts', { name: 'count', fields: z.strictObject({ n: z.int() }), filter: { n: filters.integer('n', z.number().min(0)) }, example: { n: 1 } }, 'none');
    const described = JSON.parse(JSON.stringify(apiDocument({ title: 'counts', version: '1' }, describePaths(unbounded), [])));
    expect(described.paths['/api/counts'].get.parameters.find((one: { name?: string }) => one.name === 'n').schema).toEqual({ type: 'integer', minimum: 0, description: 'Only items whose `n` is this.' });
  });

  it("keeps a description the declaration gave, and takes a nested field's example", () => {
    expect(parameter('code')).toEqual({ in: 'query', name: 'code', example: 'C-1', schema: { type: 'string', maxLength: 8, description: 'Only the one with this code.' } });
    expect(parameter('currency')).toEqual({ in: 'query', name: 'currency', example: 'EUR', schema: { type: 'string', description: 'Only items whose `price.currency` is this.' } });
  });
});

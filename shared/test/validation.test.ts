import { bodyShapeErrors, MAX_JSON_VALUES, nestsDeeperThan } from '@app/shared/platform/http/bodies';
import { HttpProblem, MAX_LISTED_FIELD_ERRORS } from '@app/shared/platform/problem';
import { mergePatch, parseOrThrow, text } from '@app/shared/platform/validation';
import { z } from 'zod';

/** The field errors of the 400 problem `parse` throws. */
function fieldErrorsOf(parse: () => unknown) {
  try {
    parse();
  } catch (error) {
    expect(error).toBeInstanceOf(HttpProblem);
    const problem = error as HttpProblem;
    expect({ status: problem.status, type: problem.type }).toEqual({ status: 400, type: 'https://problems.example/validation' });
    return problem.extras.errors;
  }
  throw new Error('expected a validation problem, but parsing succeeded');
}

describe('mergePatch (RFC 7396)', () => {
  // RFC 7396, appendix A: original, patch, result.
  const appendixA: [unknown, unknown, unknown][] = [
    [{ a: 'b' }, { a: 'c' }, { a: 'c' }],
    [{ a: 'b' }, { b: 'c' }, { a: 'b', b: 'c' }],
    [{ a: 'b' }, { a: null }, {}],
    [{ a: 'b', b: 'c' }, { a: null }, { b: 'c' }],
    [{ a: ['b'] }, { a: 'c' }, { a: 'c' }],
    [{ a: 'c' }, { a: ['b'] }, { a: ['b'] }],
    [{ a: { b: 'c' } }, { a: { b: 'd', c: null } }, { a: { b: 'd' } }],
    [{ a: [{ b: 'c' }] }, { a: [1] }, { a: [1] }],
    [['a', 'b'], ['c', 'd'], ['c', 'd']],
    [{ a: 'b' }, ['c'], ['c']],
    [{ a: 'foo' }, null, null],
    [{ a: 'foo' }, 'bar', 'bar'],
    [{ e: null }, { a: 1 }, { e: null, a: 1 }],
    [[1, 2], { a: 'b', c: null }, { a: 'b' }],
    [{}, { a: { bb: { ccc: null } } }, { a: { bb: {} } }],
  ];

  it.each(appendixA)('patches %j with %j into %j', (original, patch, result) => {
    expect(mergePatch(original, patch)).toEqual(result);
  });

  it('merges nested objects member by member and removes members patched to null', () => {
    const product = { sku: 'W-1', price: { amount: '19.99', currency: 'EUR' }, description: 'Good.' };
    expect(mergePatch(product, { price: { amount: '5.00' }, description: null })).toEqual({
      sku: 'W-1',
      price: { amount: '5.00', currency: 'EUR' },
    });
  });

  it('replaces an array as a whole instead of merging its elements', () => {
    expect(mergePatch({ tags: ['a', 'b', 'c'] }, { tags: ['z'] })).toEqual({ tags: ['z'] });
  });

  it('leaves the target unchanged', () => {
    const target = { a: { b: 'c' }, d: 'e' };
    mergePatch(target, { a: { b: null }, d: 'f' });
    expect(target).toEqual({ a: { b: 'c' }, d: 'e' });
  });

  it('does not pollute Object.prototype through a __proto__ member', () => {
    const patched = mergePatch({}, JSON.parse('{"__proto__": {"polluted": true}}')) as Record<string, unknown>;
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.keys(patched)).toEqual(['__proto__']);
  });
});

describe('text(min, max)', () => {
  const name = text(1, 200);

  it('counts code points, so an emoji counts as one character', () => {
    expect(parseOrThrow(name, '😀'.repeat(200))).toBe('😀'.repeat(200));
    expect(fieldErrorsOf(() => parseOrThrow(name, '😀'.repeat(201)))).toEqual([{ path: 'body', message: 'must be at most 200 characters' }]);
  });

  it('accepts exactly max characters and refuses max + 1', () => {
    expect(parseOrThrow(name, 'x'.repeat(200))).toBe('x'.repeat(200));
    expect(fieldErrorsOf(() => parseOrThrow(name, 'x'.repeat(201)))).toEqual([{ path: 'body', message: 'must be at most 200 characters' }]);
  });

  it('refuses fewer than min characters', () => {
    expect(fieldErrorsOf(() => parseOrThrow(name, ''))).toEqual([{ path: 'body', message: 'must not be empty' }]);
    expect(fieldErrorsOf(() => parseOrThrow(text(3, 10), 'ab'))).toEqual([{ path: 'body', message: 'must be at least 3 characters' }]);
    expect(parseOrThrow(text(0, 10), '')).toBe('');
  });

  it('with trim, trims first and counts what is left', () => {
    const trimmed = text(1, 5, { trim: true });
    expect(parseOrThrow(trimmed, '  Ada  ')).toBe('Ada');
    expect(parseOrThrow(trimmed, '   abcde   ')).toBe('abcde');
    expect(fieldErrorsOf(() => parseOrThrow(trimmed, '   '))).toEqual([{ path: 'body', message: 'must not be empty' }]);
    expect(fieldErrorsOf(() => parseOrThrow(trimmed, ' abcdef '))).toEqual([{ path: 'body', message: 'must be at most 5 characters' }]);
  });

  it('without trim, keeps surrounding spaces and counts them', () => {
    expect(parseOrThrow(text(1, 5), ' a b ')).toBe(' a b ');
    expect(fieldErrorsOf(() => parseOrThrow(text(1, 5), '  ab  '))).toEqual([{ path: 'body', message: 'must be at most 5 characters' }]);
  });
});

describe('parseOrThrow', () => {
  const product = z.strictObject({
    sku: z.string(),
    name: z.string(),
    price: z.strictObject({ amount: z.string(), currency: z.string() }),
    stock: z.number().default(0),
  });

  it('returns the parsed value, defaults filled in', () => {
    expect(parseOrThrow(product, { sku: 'A', name: 'B', price: { amount: '1', currency: 'EUR' } })).toEqual({
      sku: 'A',
      name: 'B',
      price: { amount: '1', currency: 'EUR' },
      stock: 0,
    });
  });

  it('lists every invalid field at once, with its path, in a 400 validation problem', () => {
    const errors = fieldErrorsOf(() => parseOrThrow(product, { name: 7, price: { currency: 'EUR', extra: 1 }, color: 'red' }));
    expect(errors).toEqual(
      expect.arrayContaining([
        { path: 'sku', message: 'is required' },
        { path: 'name', message: 'must be a string' },
        { path: 'price.amount', message: 'is required' },
        { path: 'price.extra', message: 'is not a known field' },
        { path: 'color', message: 'is not a known field' },
      ]),
    );
    expect(errors).toHaveLength(5);
  });

  it('says how many fields are invalid in the detail', () => {
    const one = () => parseOrThrow(product, { sku: 'A', name: 'B', price: { amount: '1' } });
    expect(one).toThrow('1 field is invalid');
    expect(() => parseOrThrow(product, {})).toThrow('3 fields are invalid');
  });

  it(`lists at most ${MAX_LISTED_FIELD_ERRORS} invalid fields, and counts them all in the detail`, () => {
    const unknown = Object.fromEntries(Array.from({ length: 500 }, (_, n) => [`field${n}`, n]));
    expect(() => parseOrThrow(z.strictObject({}), unknown)).toThrow(`500 fields are invalid; the first ${MAX_LISTED_FIELD_ERRORS} are listed`);
    expect(fieldErrorsOf(() => parseOrThrow(z.strictObject({}), unknown))).toHaveLength(MAX_LISTED_FIELD_ERRORS);
  });

  it('names a nested field that is missing as path.to.field', () => {
    expect(fieldErrorsOf(() => parseOrThrow(product, { sku: 'A', name: 'B', price: { currency: 'EUR' } }))).toEqual([
      { path: 'price.amount', message: 'is required' },
    ]);
  });

  it('says "is required" for a missing field whose schema has a message of its own', () => {
    const counted = z.strictObject({ quantity: z.int('must be a whole number'), line: z.strictObject({ count: z.int('must be a whole number') }) });
    expect(fieldErrorsOf(() => parseOrThrow(counted, { line: {} }))).toEqual([
      { path: 'quantity', message: 'is required' },
      { path: 'line.count', message: 'is required' },
    ]);
    expect(fieldErrorsOf(() => parseOrThrow(counted, { quantity: 1.5, line: { count: 'x' } }))).toEqual([
      { path: 'quantity', message: 'must be a whole number' },
      { path: 'line.count', message: 'must be a whole number' },
    ]);
  });

  it('says "must not be null" for null and "must be a JSON object" for a nested non-object', () => {
    expect(fieldErrorsOf(() => parseOrThrow(product, { sku: null, name: 'B', price: [] }))).toEqual([
      { path: 'sku', message: 'must not be null' },
      { path: 'price', message: 'must be a JSON object' },
    ]);
  });

  it('reports a body that is not an object at the path "body"', () => {
    for (const body of [[], 'text', 42, null]) {
      expect(fieldErrorsOf(() => parseOrThrow(product, body))).toEqual([
        { path: 'body', message: body === null ? 'must not be null' : 'must be a JSON object' },
      ]);
    }
  });
});

describe('nestsDeeperThan', () => {
  const bytes = (text: string) => Buffer.from(text);

  it('counts objects and arrays, not brackets inside strings (escaped quotes included)', () => {
    expect(nestsDeeperThan(bytes('{"a":[{"b":[]}]}'), 4)).toBe(false);
    expect(nestsDeeperThan(bytes('{"a":[{"b":[]}]}'), 3)).toBe(true);
    expect(nestsDeeperThan(bytes(`{"a":"${'['.repeat(100)}\\"${'{'.repeat(100)}"}`), 1)).toBe(false);
    expect(nestsDeeperThan(bytes(`{"a":"\\"}`), 1)).toBe(false);
    expect(nestsDeeperThan(bytes('[[]][[]]'), 2)).toBe(false);
  });

  it('takes 100 KiB of nesting in one linear pass', () => {
    expect(nestsDeeperThan(bytes('['.repeat(100 * 1024)), 32)).toBe(true);
  });
});

describe('bodyShapeErrors', () => {
  /** `items` behind a proxy that counts how many of them are read. */
  function counted(items: unknown[]) {
    const reads = { count: 0 };
    const proxy = new Proxy(items, {
      get: (target, key, receiver) => {
        if (typeof key === 'string' && /^\d+$/.test(key)) reads.count++;
        return Reflect.get(target, key, receiver) as unknown;
      },
    });
    return { proxy, reads };
  }

  it('finds __proto__, constructor and prototype at any depth, with their paths, not in arrays or values', () => {
    const body: unknown = JSON.parse('{"__proto__":{"constructor":1},"a":[{"prototype":2}],"b":"__proto__","c":["constructor"]}');
    expect(bodyShapeErrors(body).map((error) => error.path).sort()).toEqual(['__proto__', '__proto__.constructor', 'a.0.prototype']);
  });

  it('refuses a body that is not a JSON object, without looking into it', () => {
    const { proxy, reads } = counted(Array(50_000).fill(0));
    for (const body of [proxy, 'text', 42, null]) {
      expect(bodyShapeErrors(body)).toEqual([{ path: 'body', message: body === null ? 'must not be null' : 'must be a JSON object' }]);
    }
    expect(reads.count).toBe(0);
  });

  it(`refuses an array or object of more than ${MAX_JSON_VALUES} values by its path, before reading any of them`, () => {
    const { proxy, reads } = counted(Array(50_000).fill(0));
    expect(bodyShapeErrors({ name: 'a', tags: proxy })).toEqual([{ path: 'tags', message: `must have at most ${MAX_JSON_VALUES} items` }]);
    expect(reads.count).toBe(0);
    const wide = Object.fromEntries(Array.from({ length: MAX_JSON_VALUES + 1 }, (_, n) => [`m${n}`, 0]));
    expect(bodyShapeErrors({ a: [{ wide }] })).toEqual([{ path: 'a.0.wide', message: `must have at most ${MAX_JSON_VALUES} members` }]);
    expect(bodyShapeErrors({ tags: Array(MAX_JSON_VALUES - 1).fill(0) })).toEqual([]);
  });

  it(`counts the values of the whole body: more than ${MAX_JSON_VALUES} in all is refused before they are read`, () => {
    const first = counted(Array(600).fill({}));
    const second = counted(Array(600).fill({}));
    expect(bodyShapeErrors({ first: first.proxy, second: second.proxy })).toEqual([
      { path: 'body', message: `must have at most ${MAX_JSON_VALUES} values in all (array items and object members)` },
    ]);
    // One of the two arrays is walked; the other is refused on its length, none of its items read.
    expect(first.reads.count + second.reads.count).toBeLessThanOrEqual(600);
  });
});

import { HttpProblem } from '@app/shared/platform/problem';
import { cursor, DEFAULT_LIMIT, encodeCursor, etagMatches, etagOf, evaluatePreconditions, limit, parseEntityTags } from '@app/shared/resource/rules';
import { parseOrThrow } from '@app/shared/platform/validation';
import { v4 as uuidv4, v7 as uuidv7 } from 'uuid';

/** The messages of the 400 problem that parsing `input` throws. */
function rejection(schema: Parameters<typeof parseOrThrow>[0], input: unknown): string[] {
  try {
    parseOrThrow(schema, input);
  } catch (error) {
    expect(error).toBeInstanceOf(HttpProblem);
    expect((error as HttpProblem).status).toBe(400);
    return ((error as HttpProblem).extras.errors ?? []).map((e) => e.message);
  }
  throw new Error(`expected ${JSON.stringify(input)} to be rejected`);
}

describe('etagMatches', () => {
  const etag = etagOf(3);

  it('matches the same strong tag in both comparisons', () => {
    expect(etag).toBe('"3"');
    expect(etagMatches('"3"', etag, 'strong')).toBe(true);
    expect(etagMatches('"3"', etag, 'weak')).toBe(true);
  });

  it('does not match another tag, an unquoted tag or a missing header', () => {
    for (const comparison of ['strong', 'weak'] as const) {
      expect(etagMatches('"4"', etag, comparison)).toBe(false);
      expect(etagMatches('"33"', etag, comparison)).toBe(false);
      expect(etagMatches('3', etag, comparison)).toBe(false);
      expect(etagMatches('', etag, comparison)).toBe(false);
      expect(etagMatches(undefined, etag, comparison)).toBe(false);
    }
  });

  it('matches a weak tag only in the weak comparison (If-None-Match), never in the strong one (If-Match)', () => {
    expect(etagMatches('W/"3"', etag, 'weak')).toBe(true);
    expect(etagMatches('W/"3"', etag, 'strong')).toBe(false);
    expect(etagMatches('W/"4"', etag, 'weak')).toBe(false);
  });

  it('matches when any tag of a comma-separated list matches, whatever the spacing', () => {
    expect(etagMatches('"1", "2", "3"', etag, 'strong')).toBe(true);
    expect(etagMatches('"1","3"', etag, 'strong')).toBe(true);
    expect(etagMatches('  "1" ,   W/"3"  ', etag, 'weak')).toBe(true);
    expect(etagMatches('"1", W/"3"', etag, 'strong')).toBe(false);
    expect(etagMatches('"1", "2"', etag, 'weak')).toBe(false);
  });

  it('matches * in both comparisons, but not * inside a list of tags', () => {
    expect(etagMatches('*', etag, 'strong')).toBe(true);
    expect(etagMatches(' * ', etag, 'weak')).toBe(true);
    expect(etagMatches('"1", *', etag, 'strong')).toBe(false);
  });
});

describe('cursor', () => {
  it('decodes what encodeCursor encoded back to the same id', () => {
    for (let i = 0; i < 20; i++) {
      const id = uuidv7();
      const encoded = encodeCursor(id);
      expect(encoded).toMatch(/^[A-Za-z0-9_-]+$/);
      expect(parseOrThrow(cursor, encoded)).toBe(id);
    }
  });

  it.each([
    ['an empty string', ''],
    ['random text', 'nope'],
    ['text that is not base64url at all', '!!! not a cursor ???'],
    ['the id itself, not encoded', '0193a5c2-7b1e-7c4d-9a61-2f0c1b9e8d40'],
    ['an encoded UUID of version 4', encodeCursor(uuidv4())],
    ['an encoded upper-case UUIDv7', encodeCursor(uuidv7().toUpperCase())],
    ['an encoded UUIDv7 with more after it', encodeCursor(`${uuidv7()}0`)],
    ['a truncated cursor', encodeCursor(uuidv7()).slice(0, 20)],
    ['a cursor with junk after it', `${encodeCursor(uuidv7())}!!`],
    ['a cursor with padding after it', `${encodeCursor(uuidv7())}==`],
  ])('rejects %s', (_label, value) => {
    expect(rejection(cursor, value)).toEqual(['is not a cursor returned by this API']);
  });

  it('rejects a value that is not a string (a repeated query parameter)', () => {
    const id = encodeCursor(uuidv7());
    expect(rejection(cursor, [id, id])).toHaveLength(1);
  });
});

describe('limit', () => {
  it('accepts whole numbers from 1 to 200', () => {
    expect(parseOrThrow(limit, '1')).toBe(1);
    expect(parseOrThrow(limit, '50')).toBe(50);
    expect(parseOrThrow(limit, '200')).toBe(200);
  });

  it.each(['0', '201', '999', '1000', '-1', '1.5', '1e2', 'abc', '', ' 5', '5 ', '+5', '0x10'])('rejects %j', (value) => {
    expect(rejection(limit, value)).toEqual(['must be a whole number from 1 to 200']);
  });

  it('rejects a repeated parameter', () => {
    expect(rejection(limit, ['1', '2'])).toHaveLength(1);
  });

  it('defaults to 50', () => {
    expect(DEFAULT_LIMIT).toBe(50);
  });
});

describe('parseEntityTags', () => {
  it('reads *, and lists of strong and weak tags with optional white space and empty elements', () => {
    expect(parseEntityTags(' * ')).toBe('*');
    expect(parseEntityTags('"1", W/"2",,"a,b"')).toEqual([
      { weak: false, tag: '"1"' },
      { weak: true, tag: '"2"' },
      { weak: false, tag: '"a,b"' },
    ]);
    expect(parseEntityTags('')).toEqual([]);
  });

  it.each(['1', '"1" "2"', 'W/1', 'w/"1"', '*, "1"', '"1', '"a"b"', 'W/ "1"'])('refuses %p', (header) => {
    expect(parseEntityTags(header)).toBeUndefined();
  });
});

describe('evaluatePreconditions (RFC 9110 §13.2.2)', () => {
  const status = (run: () => unknown) => {
    try {
      return run();
    } catch (error) {
      return (error as HttpProblem).status;
    }
  };
  const etag = etagOf(3);

  it.each([
    [{}, etag, 'write', 'proceed'],
    [{ ifMatch: '*' }, etag, 'write', 'proceed'],
    [{ ifMatch: '*' }, undefined, 'write', 'proceed'],
    [{ ifMatch: '"1", "3"' }, etag, 'write', 'proceed'],
    [{ ifMatch: 'W/"3"' }, etag, 'write', 412],
    [{ ifMatch: '"3"' }, undefined, 'write', 412],
    [{ ifMatch: '3' }, etag, 'write', 400],
    [{ ifMatch: '"3"', ifNoneMatch: '*' }, etag, 'write', 'proceed'],
    [{ ifNoneMatch: '*' }, etag, 'write', 412],
    [{ ifNoneMatch: '*' }, undefined, 'write', 412],
    [{ ifNoneMatch: 'W/"3"' }, etag, 'write', 412],
    [{ ifNoneMatch: '"4"' }, etag, 'write', 'proceed'],
    [{ ifNoneMatch: '"3"' }, undefined, 'write', 'proceed'],
    [{ ifNoneMatch: 'nonsense' }, etag, 'write', 400],
    [{ ifNoneMatch: 'W/"3"' }, etag, 'read', 'not-modified'],
    [{ ifNoneMatch: '*' }, etag, 'read', 'not-modified'],
    [{ ifNoneMatch: 'nonsense' }, etag, 'read', 'proceed'],
    [{ ifMatch: '"9"' }, etag, 'read', 412],
  ] as const)('%p on %p (%s) → %p', (conditions, current, kind, expected) => {
    expect(status(() => evaluatePreconditions(conditions, current, kind))).toBe(expected);
  });
});

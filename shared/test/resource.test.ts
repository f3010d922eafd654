import { HttpProblem } from '@app/shared/platform/problem';
import {
  type Conditions,
  cursor,
  DEFAULT_LIMIT,
  encodeCursor,
  etagMatches,
  etagOf,
  evaluatePreconditions,
  limit,
  parseEntityTags,
  ResourceService,
  type ResourceStore,
  type Stored,
} from '@app/shared/resource/rules';
import { parseOrThrow } from '@app/shared/platform/validation';
import { v4 as uuidv4, v7 as uuidv7 } from 'uuid';
import { z } from 'zod';

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

describe('preconditions refused: what the problem says', () => {
  const refusal = (conditions: Conditions) => {
    try {
      evaluatePreconditions(conditions, etagOf(3), 'write');
    } catch (error) {
      const problem = error as HttpProblem;
      return { status: problem.status, detail: problem.detail, errors: problem.extras.errors };
    }
    throw new Error('expected a refusal');
  };
  const malformedTags = 'must be * or a list of entity tags ("…" or W/"…")';

  it('names the malformed header and what it must be', () => {
    expect(refusal({ ifMatch: '3' })).toMatchObject({ status: 400, errors: [{ path: 'If-Match', message: malformedTags }] });
    expect(refusal({ ifNoneMatch: '3' })).toMatchObject({ status: 400, errors: [{ path: 'If-None-Match', message: malformedTags }] });
  });

  it('tells If-None-Match: * on a resource that exists from a matching tag', () => {
    expect(refusal({ ifNoneMatch: '*' })).toMatchObject({ status: 412, detail: 'If-None-Match: * forbids changing a resource that exists' });
    expect(refusal({ ifNoneMatch: '"3"' })).toMatchObject({ status: 412, detail: 'If-None-Match matches the current ETag of the resource' });
  });
});

describe('ResourceService', () => {
  const fields = z.strictObject({ name: z.string(), stock: z.number().optional() });
  type Fields = z.infer<typeof fields>;
  const definition = { name: 'widget', fields, filter: {}, example: { name: 'a' } };

  /** A store in memory: `losing` makes the next conditional writes find another version (a writer that won). */
  function memoryStore() {
    const rows = new Map<string, Stored<Fields>>();
    const calls = { find: 0, update: 0, delete: 0 };
    const store: ResourceStore<Fields, object> & { losing: number } = {
      losing: 0,
      list: async ({ afterId, limit: size }) => [...rows.values()].filter(({ id }) => afterId === undefined || id > afterId).slice(0, size),
      find: async (id) => (calls.find++, rows.get(id)),
      insert: async (resource) => void rows.set(resource.id, resource),
      update: async (resource, expectedVersion) => {
        calls.update++;
        if (store.losing > 0 && store.losing--) return false;
        if (rows.get(resource.id)?.version !== expectedVersion) return false;
        rows.set(resource.id, resource);
        return true;
      },
      delete: async (id, expectedVersion) => {
        calls.delete++;
        if (store.losing > 0 && store.losing--) return false;
        const row = rows.get(id);
        if (!row || (expectedVersion !== undefined && row.version !== expectedVersion)) return false;
        return rows.delete(id);
      },
    };
    return { store, rows, calls };
  }
  const service = () => {
    const memory = memoryStore();
    return { ...memory, widgets: new ResourceService(definition, memory.store) };
  };
  const problem = async (run: Promise<unknown>) => {
    try {
      await run;
    } catch (error) {
      return { status: (error as HttpProblem).status, type: (error as HttpProblem).type, detail: (error as HttpProblem).detail };
    }
    throw new Error('expected a problem');
  };

  it('creates version 1 with an id and timestamps of its own, whatever the body says of them', async () => {
    const { widgets, rows } = service();
    const created = await widgets.create({ id: 'mine', createdAt: 'then', updatedAt: 'then', name: 'a' });
    expect(created).toMatchObject({ version: 1, fields: { name: 'a' } });
    expect(created.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.updatedAt).toEqual(created.createdAt);
    expect(rows.get(created.id)).toBe(created);
  });

  it('finds no item for an unknown id, nor for one that is no UUIDv7 (without asking the store)', async () => {
    const { widgets, calls } = service();
    expect(await problem(widgets.get(uuidv7()))).toMatchObject({ status: 404, detail: expect.stringContaining('No widget with id') });
    expect(calls.find).toBe(1);
    expect(await problem(widgets.get('nope'))).toMatchObject({ status: 404 });
    expect(calls.find).toBe(1);
  });

  it('lists pages of the size asked, with the next cursor (its last item) only when there is more', async () => {
    const { widgets, calls } = service();
    const made = [];
    for (const name of ['a', 'b', 'c', 'd']) made.push(await widgets.create({ name }));
    const first = await widgets.list({ limit: 3 });
    expect(first.items.map(({ fields: { name } }) => name)).toEqual(['a', 'b', 'c']);
    expect(first.nextCursor).toBe(encodeCursor(made[2]!.id));
    // Only a page after a cursor looks its record up: storable, since it exists.
    expect(calls.find).toBe(0);
    const last = await widgets.list({ limit: 2, cursor: made[1]!.id });
    expect(last).toEqual({ items: [made[2], made[3]], nextCursor: null, storable: true });
    expect(calls.find).toBe(1);
    expect(await widgets.list({ limit: 4 })).toMatchObject({ nextCursor: null });
    expect((await widgets.list({})).items).toHaveLength(4);
  });

  it('replaces (PUT) and patches (merge patch) a new version, keeping the read-only fields its own', async () => {
    const { widgets } = service();
    const created = await widgets.create({ name: 'a', stock: 1 });
    const replaced = await widgets.replace(created.id, { id: 'mine', name: 'b' });
    expect(replaced).toMatchObject({ id: created.id, version: 2, createdAt: created.createdAt, fields: { name: 'b' } });
    expect(replaced.fields).not.toHaveProperty('stock');
    const patched = await widgets.patch(created.id, { stock: 5, createdAt: 'then' }, { ifMatch: etagOf(2) });
    expect(patched).toMatchObject({ version: 3, fields: { name: 'b', stock: 5 } });
    expect(await problem(widgets.patch(created.id, { stock: 6 }, { ifMatch: etagOf(2) }))).toMatchObject({ status: 412 });
  });

  it('never moves updatedAt back, even when the clock did', async () => {
    const { widgets, rows } = service();
    const created = await widgets.create({ name: 'a' });
    const later = new Date(Date.now() + 60_000);
    rows.set(created.id, { ...created, updatedAt: later });
    expect((await widgets.replace(created.id, { name: 'b' })).updatedAt).toEqual(later);
  });

  it('tries again when another writer won, and gives up after five tries with a concurrent-update problem', async () => {
    const { widgets, store, calls } = service();
    const created = await widgets.create({ name: 'a' });
    store.losing = 4;
    expect(await widgets.replace(created.id, { name: 'b' })).toMatchObject({ version: 2 });
    store.losing = 5;
    calls.update = 0;
    expect(await problem(widgets.replace(created.id, { name: 'c' }))).toMatchObject({
      status: 409,
      type: expect.stringContaining('concurrent-update'),
      detail: 'The widget changed 5 times while this request tried to change it; retry',
    });
    expect(calls.update).toBe(5);
    store.losing = 5;
    calls.delete = 0;
    expect(await problem(widgets.delete(created.id, { ifMatch: etagOf(2) }))).toMatchObject({ status: 409, type: expect.stringContaining('concurrent-update') });
    expect(calls.delete).toBe(5);
  });

  it('deletes: 404 for what is not there, 412 for a stale If-Match, at the version read when conditional', async () => {
    const { widgets, rows, calls } = service();
    const created = await widgets.create({ name: 'a' });
    // Neither reads first: one that is no UUIDv7 is not even asked of the store.
    expect(await problem(widgets.delete('nope'))).toMatchObject({ status: 404, detail: 'No widget with id nope' });
    expect(calls).toMatchObject({ find: 0, delete: 0 });
    const unknown = uuidv7();
    expect(await problem(widgets.delete(unknown))).toMatchObject({ status: 404, detail: `No widget with id ${unknown}` });
    expect(calls).toMatchObject({ find: 0, delete: 1 });
    expect(await problem(widgets.delete(created.id, { ifMatch: etagOf(9) }))).toMatchObject({ status: 412 });
    expect(await problem(widgets.delete(created.id, { ifNoneMatch: '*' }))).toMatchObject({ status: 412 });
    await widgets.delete(created.id, { ifMatch: etagOf(1) });
    expect(rows.has(created.id)).toBe(false);
    const other = await widgets.create({ name: 'b' });
    await widgets.delete(other.id);
    expect(rows.size).toBe(0);
  });
});

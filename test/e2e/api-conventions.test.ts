/**
 * The rules of docs/api.md, for every resource in services.json, as a client of the gateway sees it:
 * real gateway (with its Redis cache on, as in production: it must be invisible), real services,
 * real MySQL.
 */
import { capturingLogger, startStack } from '../support/stack.js';
import { client, expectProblem, type Client } from '../support/http.js';
import { testToken } from '../support/auth.js';
import { valueAt } from '@app/shared/resource/filters';
import { ownershipOf } from '@app/shared/platform/services';
import { encodeCursor } from '@app/shared/resource/rules';
import { resourceCases } from '../support/resource-case.js';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const JSON_TYPE = 'application/json; charset=utf-8';
const UNKNOWN_ID = '0193a5c2-7b1e-7c4d-9a61-2f0c1b9e8d40';

// Every service in services.json, each with its own bodies (<service>/test/api-case.ts).
const cases = await resourceCases();

const usersLog = capturingLogger('users-service');
let stack: Awaited<ReturnType<typeof startStack>>;
let api: Client;
let counter = 0;
const next = () => ++counter;

beforeAll(async () => {
  stack = await startStack({ usersLogger: usersLog.logger, cache: {} });
  api = client(stack.gateway.url);
});
afterAll(() => stack.close());

describe.each(cases)('$name through the gateway', (resource) => {
  // Where ownership decides who sees or changes a record, its representation names its owner, and lists filter by it.
  const owned = ownershipOf(resource.name) !== 'none';
  const create = async (body = resource.valid(next())) => {
    const response = await api.post(resource.path, body);
    expect(response.status).toBe(201);
    return response;
  };

  describe('POST (create)', () => {
    it('answers 201 with Location, ETag and the resource', async () => {
      const body = resource.valid(next());
      const response = await api.post(resource.path, body);
      expect(response.status).toBe(201);
      expect(response.headers.get('content-type')).toBe(JSON_TYPE);
      expect(response.body).toEqual({
        id: expect.stringMatching(UUID_V7),
        ...resource.echoed(body),
        ...(owned && { owner: 'test-client' }),
        createdAt: expect.stringMatching(TIMESTAMP),
        updatedAt: expect.stringMatching(TIMESTAMP),
      });
      expect(response.headers.get('location')).toBe(`${resource.path}/${response.body.id}`);
      expect(response.headers.get('etag')).toMatch(/^"[^"]+"$/);
      const read = await api.get(response.headers.get('location')!);
      expect(read.body).toEqual(response.body);
      expect(read.headers.get('etag')).toBe(response.headers.get('etag'));
    });

    it('ignores read-only fields in the body', async () => {
      const response = await api.post(resource.path, { ...resource.valid(next()), id: UNKNOWN_ID, createdAt: '2000-01-01T00:00:00.000Z', updatedAt: 'x' });
      expect(response.status).toBe(201);
      expect(response.body.id).not.toBe(UNKNOWN_ID);
      expect(response.body.createdAt).not.toBe('2000-01-01T00:00:00.000Z');
    });

    it('lists every invalid field (400)', async () => {
      const problem = expectProblem(await api.post(resource.path, resource.invalid.body), 400, 'validation');
      expect(problem.errors.map((e: { path: string }) => e.path).sort()).toEqual([...resource.invalid.paths].sort());
      expect(problem.instance).toBe(resource.path);
    });

    it('rejects an unknown field (400)', async () => {
      const problem = expectProblem(await api.post(resource.path, { ...resource.valid(next()), color: 'red' }), 400, 'validation');
      expect(problem.errors).toEqual([{ path: 'color', message: 'is not a known field' }]);
    });

    it('rejects a body that is not an object (400)', async () => {
      expectProblem(await api.post(resource.path, [resource.valid(next())]), 400, 'validation');
      expectProblem(await api.send('POST', resource.path, { raw: '', headers: { 'content-type': 'application/json' } }), 400);
    });

    const { unique } = resource;
    if (unique) {
      it(`answers 409 when the unique field (${unique.field}) is taken`, async () => {
        const first = await create();
        const problem = expectProblem(await api.post(resource.path, unique.duplicateOf(first.body, next())), 409, 'conflict');
        expect(problem.errors).toHaveLength(1);
      });
    }

    it('answers 400 to malformed JSON, 415 to a non-JSON body, 413 to a body over 100 KiB', async () => {
      expectProblem(await api.send('POST', resource.path, { raw: '{"name":', headers: { 'content-type': 'application/json' } }), 400, 'malformed-json');
      expectProblem(await api.send('POST', resource.path, { raw: 'name=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } }), 415, 'unsupported-media-type');
      expectProblem(await api.send('POST', resource.path, { raw: '{}' }), 415, 'unsupported-media-type');
      const huge = { ...resource.valid(next()), name: 'x'.repeat(101 * 1024) };
      expectProblem(await api.post(resource.path, huge), 413, 'payload-too-large');
    });
  });

  describe('GET (read)', () => {
    it('answers 200 with ETag and Cache-Control: no-cache, and 304 when If-None-Match matches', async () => {
      const created = await create();
      const location = created.headers.get('location')!;
      const etag = created.headers.get('etag')!;
      const read = await api.get(location);
      expect(read.status).toBe(200);
      expect(read.headers.get('cache-control')).toBe('no-cache');
      const notModified = await api.get(location, { headers: { 'if-none-match': `"nope", ${etag}` } });
      expect(notModified.status).toBe(304);
      expect(notModified.text).toBe('');
      expect(notModified.headers.get('etag')).toBe(etag);
      expect((await api.get(location, { headers: { 'if-none-match': '"other"' } })).status).toBe(200);
    });

    it('answers HEAD like GET without a body', async () => {
      const created = await create();
      const head = await api.head(created.headers.get('location')!);
      expect(head.status).toBe(200);
      expect(head.headers.get('etag')).toBe(created.headers.get('etag'));
      expect(head.text).toBe('');
    });

    it('answers 404 for an unknown or malformed id', async () => {
      const missing = await api.get(`${resource.path}/${UNKNOWN_ID}`);
      expectProblem(missing, 404, 'not-found');
      expect(missing.headers.get('cache-control')).toBe('no-cache');
      expectProblem(await api.get(`${resource.path}/not-a-uuid`), 404, 'not-found');
      expectProblem(await api.get(`${resource.path}/${UNKNOWN_ID.toUpperCase()}`), 404, 'not-found');
      expectProblem(await api.get(`${resource.path}/%E0%A4%A`), 404, 'not-found');
      expectProblem(await api.delete(`${resource.path}/%ZZ`), 404, 'not-found');
    });
  });

  describe('PUT (replace)', () => {
    it('replaces the resource and answers 200 with a new ETag', async () => {
      const created = await create();
      const replacement = resource.valid(next());
      const response = await api.put(created.headers.get('location')!, replacement);
      expect(response.status).toBe(200);
      expect(response.body).toMatchObject(resource.echoed(replacement));
      expect(response.body.id).toBe(created.body.id);
      expect(response.body.createdAt).toBe(created.body.createdAt);
      expect(response.headers.get('etag')).not.toBe(created.headers.get('etag'));
      expect((await api.get(created.headers.get('location')!)).body).toEqual(response.body);
    });

    it('requires every writable field (400)', async () => {
      const created = await create();
      const problem = expectProblem(await api.put(created.headers.get('location')!, { [resource.required]: resource.valid(next())[resource.required] }), 400, 'validation');
      expect(problem.errors.some((e: { message: string }) => e.message === 'is required')).toBe(true);
    });

    it('never creates: 404 for an unknown id', async () => {
      expectProblem(await api.put(`${resource.path}/${UNKNOWN_ID}`, resource.valid(next())), 404, 'not-found');
    });

    const { unique } = resource;
    if (unique) {
      it(`answers 409 when the new value of the unique field (${unique.field}) is taken`, async () => {
        const [first, second] = [await create(), await create()];
        const response = await api.put(second.headers.get('location')!, unique.duplicateOf(first.body, next()));
        expectProblem(response, 409, 'conflict');
      });
    }
  });

  describe('PATCH (merge patch)', () => {
    it('merges application/merge-patch+json and answers 200 with a new ETag', async () => {
      const created = await create();
      const response = await api.patch(created.headers.get('location')!, resource.patch.body);
      expect(response.status).toBe(200);
      expect(response.body).toEqual({ ...created.body, ...resource.patch.expected, updatedAt: expect.stringMatching(TIMESTAMP) });
      expect(response.headers.get('etag')).not.toBe(created.headers.get('etag'));
    });

    it('accepts application/json as the same, and refuses other media types (415)', async () => {
      const created = await create();
      const location = created.headers.get('location')!;
      expect((await api.patch(location, resource.patch.body, { headers: { 'content-type': 'application/json' } })).status).toBe(200);
      expectProblem(await api.send('PATCH', location, { raw: 'x', headers: { 'content-type': 'text/plain' } }), 415);
    });

    it('validates the merged result (400) and leaves the resource unchanged', async () => {
      const created = await create();
      const location = created.headers.get('location')!;
      expectProblem(await api.patch(location, { [resource.required]: null }), 400, 'validation');
      expectProblem(await api.patch(location, { unknown: 1 }), 400, 'validation');
      expect((await api.get(location)).body).toEqual(created.body);
    });

    it('answers 404 for an unknown id', async () => {
      expectProblem(await api.patch(`${resource.path}/${UNKNOWN_ID}`, resource.patch.body), 404);
    });
  });

  describe('DELETE', () => {
    it('answers 204 without a body, then 404', async () => {
      const created = await create();
      const location = created.headers.get('location')!;
      const deleted = await api.delete(location);
      expect(deleted.status).toBe(204);
      expect(deleted.text).toBe('');
      expectProblem(await api.get(location), 404);
      expectProblem(await api.delete(location), 404);
    });
  });

  describe('If-Match', () => {
    it('answers 412 on PUT, PATCH and DELETE when it does not match, and changes nothing', async () => {
      const created = await create();
      const location = created.headers.get('location')!;
      const stale = { headers: { 'if-match': '"999"' } };
      expectProblem(await api.put(location, resource.valid(next()), stale), 412, 'precondition-failed');
      expectProblem(await api.patch(location, resource.patch.body, stale), 412, 'precondition-failed');
      expectProblem(await api.delete(location, stale), 412, 'precondition-failed');
      expectProblem(await api.delete(location, { headers: { 'if-match': `W/${created.headers.get('etag')}` } }), 412);
      expect((await api.get(location)).body).toEqual(created.body);
    });

    it('lets the write through when it matches', async () => {
      const created = await create();
      const location = created.headers.get('location')!;
      const patched = await api.patch(location, resource.patch.body, { headers: { 'if-match': created.headers.get('etag')! } });
      expect(patched.status).toBe(200);
      expect((await api.delete(location, { headers: { 'if-match': patched.headers.get('etag')! } })).status).toBe(204);
    });

    it('lets exactly one of 10 concurrent PUTs with the same If-Match win', async () => {
      const created = await create();
      const etag = created.headers.get('etag')!;
      const responses = await Promise.all(
        Array.from({ length: 10 }, () => api.put(created.headers.get('location')!, resource.valid(next()), { headers: { 'if-match': etag } })),
      );
      const statuses = responses.map((r) => r.status).sort();
      expect(statuses).toEqual([200, ...Array(9).fill(412)]);
      const winner = responses.find((r) => r.status === 200)!;
      expect((await api.get(created.headers.get('location')!)).body).toEqual(winner.body);
    });
  });

  describe(`ownership (services.json: ${ownershipOf(resource.name)})`, () => {
    const ownership = ownershipOf(resource.name);
    let other: Client;
    let admin: Client;
    beforeAll(async () => {
      other = client(stack.gateway.url, { token: await testToken({ subject: `other-${next()}` }) });
      admin = client(stack.gateway.url, { token: await testToken({ subject: `admin-${next()}`, scopes: [`${resource.name}:admin`] }) });
    });

    it('lets another caller read and change a record as the ownership says, and an admin do both', async () => {
      const location = (await create()).headers.get('location')!;
      const expected = { all: [404, 404, 404], writes: [200, 403, 403], none: [200, 200, 204] }[ownership];
      const read = (await other.get(location)).status;
      const patched = (await other.patch(location, resource.patch.body)).status;
      const deleted = (await other.delete(location)).status;
      expect({ read, patched, deleted }).toEqual({ read: expected[0], patched: expected[1], deleted: expected[2] });
      if (ownership === 'none') return;
      expect((await admin.patch(location, resource.patch.body)).body).toMatchObject({ ...resource.patch.expected, owner: 'test-client' });
      expect((await admin.delete(location)).status).toBe(204);
    });
  });

  describe('lists', () => {
    it('walks every item exactly once with keyset pages, while items are created and deleted', async () => {
      const before = await Promise.all(Array.from({ length: 7 }, () => create()));
      const seen: string[] = [];
      let cursor: string | null = null;
      let page = 0;
      do {
        const response = await api.get(`${resource.path}?limit=3${cursor ? `&cursor=${cursor}` : ''}`);
        expect(response.status).toBe(200);
        expect(response.headers.get('cache-control')).toBe('no-cache');
        expect(response.body.items.length).toBeLessThanOrEqual(3);
        seen.push(...response.body.items.map((item: { id: string }) => item.id));
        cursor = response.body.nextCursor;
        if (page++ === 1) {
          await create(); // after the walk's position: it must show up once
          await api.delete(before[0]!.headers.get('location')!); // already seen: nothing to repeat
        }
      } while (cursor !== null);
      expect(new Set(seen).size).toBe(seen.length);
      for (const created of before.slice(1)) expect(seen).toContain(created.body.id);
      expect(seen).toEqual([...seen].sort());
    });

    it('defaults to 50 items and ends with nextCursor null', async () => {
      const response = await api.get(resource.path);
      expect(response.body.items.length).toBeLessThanOrEqual(50);
      expect(response.body).toHaveProperty('nextCursor');
    });

    it('describes every filter the case lists, and no other', async () => {
      const list = (await api.get('/openapi.json')).body.paths[resource.path].get;
      const described = list.parameters.filter((parameter: { in?: string }) => parameter.in === 'query').map(({ name }: { name: string }) => name);
      expect(described.sort()).toEqual(['cursor', 'limit', ...(owned ? ['owner'] : []), ...Object.keys(resource.filters)].sort());
    });

    it.each(Object.entries(resource.filters))('filters exactly by ?%s=', async (parameter, { field, comparison }) => {
      // Items created after `mark` only: the filter must find the one of the two it holds for.
      const mark = await create();
      const [a, b] = [(await create()).body, (await create()).body];
      const of = (body: unknown) => valueAt(body, field) as string | number;
      expect({ field, value: of(a) }).not.toEqual({ field, value: of(b) });
      const [low, high] = of(a) < of(b) ? [a, b] : [b, a];
      const expected = comparison === '>=' ? high : low;
      const response = await api.get(`${resource.path}?${parameter}=${encodeURIComponent(String(of(expected)))}&cursor=${encodeCursor(mark.body.id)}`);
      expect(response.body).toEqual({ items: [expected], nextCursor: null });
    });

    it('answers 400 to a bad limit, a bad cursor or an unknown parameter', async () => {
      for (const query of ['limit=0', 'limit=201', 'limit=abc', 'limit=1&limit=2', 'cursor=bm9wZQ', 'sort=name']) {
        const refused = await api.get(`${resource.path}?${query}`);
        expectProblem(refused, 400, 'validation');
        expect(refused.headers.get('cache-control')).toBe('no-cache');
      }
    });
  });

  it('answers 405 with Allow for a method the path does not support', async () => {
    const onCollection = expectProblem(await api.delete(resource.path), 405, 'method-not-allowed');
    expect(onCollection).toBeDefined();
    expect((await api.delete(resource.path)).headers.get('allow')).toBe('GET, HEAD, POST');
    const onItem = await api.post(`${resource.path}/${UNKNOWN_ID}`, resource.valid(next()));
    expectProblem(onItem, 405);
    expect(onItem.headers.get('allow')).toBe('GET, HEAD, PUT, PATCH, DELETE');
  });
});

describe('concurrent creates', () => {
  it('lets exactly one of 20 concurrent POSTs with one email succeed', async () => {
    const email = `race${next()}@example.com`;
    const responses = await Promise.all(
      Array.from({ length: 20 }, (_, i) => api.post('/api/users', { email: i % 2 ? email : email.toUpperCase(), name: `Racer ${i}` })),
    );
    const statuses = responses.map((r) => r.status).sort();
    expect(statuses).toEqual([201, ...Array(19).fill(409)]);
    expect((await api.get(`/api/users?email=${email}`)).body.items).toHaveLength(1);
  });
});

describe('X-Request-Id', () => {
  it('takes a well-formed id from the request, passes it to the service and echoes it', async () => {
    const requestId = `test-${next()}.id_A`;
    // A query of its own, so the request reaches the service rather than the cache.
    const response = await api.get(`/api/users?email=${requestId}@example.com`, { headers: { 'x-request-id': requestId } });
    expect(response.headers.get('x-request-id')).toBe(requestId);
    expect(usersLog.lines).toContainEqual(expect.objectContaining({ requestId, path: '/api/users', status: 200 }));
  });

  it('generates one when the request has none or a malformed one', async () => {
    const malformed: Record<string, string>[] = [{}, { 'x-request-id': 'bad id!' }, { 'x-request-id': 'x'.repeat(129) }];
    for (const headers of malformed) {
      const response = await api.get(`/api/users?email=${next()}@example.com`, { headers });
      const id = response.headers.get('x-request-id');
      expect(id).toMatch(/^[A-Za-z0-9._-]{1,128}$/);
      expect(id).not.toBe(headers['x-request-id']);
      expect(usersLog.lines).toContainEqual(expect.objectContaining({ requestId: id }));
    }
  });

  it('is on the gateway’s own errors too', async () => {
    const response = await api.get('/nowhere', { headers: { 'x-request-id': 'mine' } });
    expectProblem(response, 404, 'not-found');
    expect(response.headers.get('x-request-id')).toBe('mine');
  });
});

describe('the gateway', () => {
  it('answers its own 404 for any other path', async () => {
    for (const path of ['/', '/api', '/api/unlisted', '/api/usersx', '/api/productsx/1']) {
      expectProblem(await api.get(path), 404, 'not-found');
    }
  });

  it('answers /healthz and /readyz itself, and each service answers its own', async () => {
    for (const base of [stack.gateway.url, ...Object.values(stack.services).map(({ url }) => url)]) {
      const probe = client(base);
      expect(await probe.get('/healthz')).toMatchObject({ status: 200, body: { status: 'ok' } });
      expect(await probe.get('/readyz')).toMatchObject({ status: 200, body: { status: 'ready' } });
    }
  });
});

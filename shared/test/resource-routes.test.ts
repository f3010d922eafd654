import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import { baseApp } from '@app/shared/platform/http/app';
import { problemHandler } from '@app/shared/platform/http/failures';
import { requestContext } from '@app/shared/platform/http/observation';
import { createLogger } from '@app/shared/platform/logger';
import { idempotencyProblems, type IdempotencyStore, type IdempotentRequest, type StoredResponse } from '@app/shared/resource/idempotency';
import { filters } from '@app/shared/resource/filters';
import { resourceRoutes } from '@app/shared/resource/routes';
import { encodeCursor, ResourceService, type ResourceStore, type Stored } from '@app/shared/resource/rules';
import type { Ownership } from '@app/shared/platform/ownership-policy';
import { v7 as uuidv7 } from 'uuid';

/**
 * A resource's HTTP mapping as a client sees it: the router of `/api/widgets` over a service on a
 * store in memory, with keys in memory, behind the services' request context and problem handler.
 */

const fields = z.strictObject({ name: z.string().min(1), stock: z.int().min(0).default(0) });
type Widget = z.infer<typeof fields>;
interface WidgetFilter {
  name?: string;
}
const definition = { name: 'widget', fields, filter: { name: filters.exact('name', z.string()) }, example: { name: 'Gear', stock: 3 } };
const PATH = '/api/widgets';

function memoryStore(): ResourceStore<Widget, WidgetFilter> & { rows: Map<string, Stored<Widget>> } {
  const rows = new Map<string, Stored<Widget>>();
  return {
    rows,
    list: async ({ afterId, limit, filter, owner }) =>
      [...rows.values()]
        .filter((row) => (afterId === undefined || row.id > afterId) && (filter.name === undefined || row.fields.name === filter.name) && (owner === undefined || row.owner === owner))
        .slice(0, limit),
    find: async (id, owner) => {
      const row = rows.get(id);
      return row && (owner === undefined || row.owner === owner) ? row : undefined;
    },
    insert: async (resource) => void rows.set(resource.id, resource),
    update: async (resource, expectedVersion) => {
      if (rows.get(resource.id)?.version !== expectedVersion) return false;
      rows.set(resource.id, resource);
      return true;
    },
    delete: async (id, expectedVersion) => {
      const row = rows.get(id);
      if (!row || (expectedVersion !== undefined && row.version !== expectedVersion)) return false;
      return rows.delete(id);
    },
  };
}

/** Keys in memory: claimed, replayed, or 422 for another request. */
function memoryKeys(): IdempotencyStore & { scopes: string[] } {
  const held = new Map<string, { fingerprint: string; response?: StoredResponse }>();
  const at = ({ scope, key }: IdempotentRequest) => `${scope}\n${key}`;
  const scopes: string[] = [];
  return {
    scopes,
    claimSeconds: 6,
    claim: async (request) => {
      scopes.push(request.scope);
      const key = held.get(at(request));
      if (!key) {
        held.set(at(request), { fingerprint: request.fingerprint });
        return { kind: 'claimed', token: 'token' };
      }
      if (key.fingerprint !== request.fingerprint) throw idempotencyProblems.reused();
      return key.response ? { kind: 'replay', response: key.response } : Promise.reject(idempotencyProblems.inFlight(1));
    },
    transaction: (work) => work(),
    complete: async (request, _token, response) => {
      held.get(at(request))!.response = response;
      return true;
    },
    release: async (request) => void held.delete(at(request)),
    trim: async () => 0,
  };
}

interface Answer {
  status: number;
  headers: Record<string, string>;
  text: string;
  body: Record<string, unknown> | undefined;
}

const HEADERS_NOT_OURS = ['date', 'connection', 'keep-alive'];

async function started(handler: http.RequestListener) {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const send = async (method: string, path: string, options: { body?: unknown; type?: string; headers?: Record<string, string> } = {}): Promise<Answer> => {
    const headers = { ...(options.body !== undefined && { 'content-type': options.type ?? 'application/json' }), ...options.headers };
    const response = await fetch(origin + path, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body) });
    const text = await response.text();
    const seen = Object.fromEntries([...response.headers].filter(([name]) => !HEADERS_NOT_OURS.includes(name)));
    return { status: response.status, headers: seen, text, body: text ? (JSON.parse(text) as Record<string, unknown>) : undefined };
  };
  return { origin, send, close: () => new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve()))) };
}

let store: ReturnType<typeof memoryStore>;
let keys: ReturnType<typeof memoryKeys>;
let routes: ReturnType<typeof resourceRoutes<Widget, WidgetFilter>>;
let api: Awaited<ReturnType<typeof started>>;

/** Serves `/api/widgets` afresh, with `ownership` (`none` unless named: services.json lists no widgets) and the body limit given, if any. */
async function serve(ownership: Ownership = 'none', bodyLimitBytes?: number) {
  store = memoryStore();
  keys = memoryKeys();
  routes = resourceRoutes(PATH, new ResourceService(definition, store), keys, ownership, bodyLimitBytes);
  const app = baseApp();
  app.use(requestContext(createLogger('test', 'silent')));
  app.use(routes.router);
  app.use(problemHandler());
  api = await started(app);
}
beforeEach(() => serve());
afterEach(() => api.close());

const JSON_TYPE = 'application/json; charset=utf-8';
const PROBLEM_TYPE = 'application/problem+json; charset=utf-8';
const ID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

const create = (body: unknown = { name: 'Gear', stock: 3 }, headers: Record<string, string> = {}) => api.send('POST', PATH, { body, headers });
async function created(body: unknown = { name: 'Gear', stock: 3 }): Promise<string> {
  const answer = await create(body);
  expect(answer.status).toBe(201);
  return answer.body!.id as string;
}
const problem = (answer: Answer, status: number, kind: string) => {
  expect({ status: answer.status, type: answer.headers['content-type'], kind: answer.body?.type }).toEqual({ status, type: PROBLEM_TYPE, kind: `https://problems.example/${kind}` });
  return answer.body!;
};

describe('POST /api/widgets', () => {
  it('creates: 201 with the widget as stored, its Location, ETag and JSON type', async () => {
    const answer = await create({ name: 'Gear' });
    expect(answer.status).toBe(201);
    const { id } = answer.body!;
    expect(id).toMatch(ID);
    expect(Object.keys(answer.body!)).toEqual(['id', 'name', 'stock', 'createdAt', 'updatedAt']);
    expect(answer.body).toEqual({ id, name: 'Gear', stock: 0, createdAt: expect.stringMatching(TIME), updatedAt: answer.body!.createdAt });
    expect(answer.headers).toEqual({
      'content-type': JSON_TYPE,
      'content-length': String(Buffer.byteLength(answer.text)),
      etag: '"1"',
      location: `${PATH}/${id}`,
      'x-content-type-options': 'nosniff',
      'x-request-id': expect.any(String),
    });
    expect([...store.rows.keys()]).toEqual([id]);
  });

  it('replays the first response to a retry with the same Idempotency-Key, keys scoped to the collection', async () => {
    const first = await create({ name: 'Gear' }, { 'idempotency-key': 'k1' });
    const retry = await create({ name: 'Gear' }, { 'idempotency-key': 'k1' });
    expect(retry.status).toBe(201);
    expect(retry.text).toBe(first.text);
    expect(retry.headers).toEqual({ ...first.headers, 'x-request-id': expect.any(String), 'idempotent-replayed': 'true' });
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    expect(store.rows.size).toBe(1);
    expect(keys.scopes).toEqual([PATH, PATH]);
    problem(await create({ name: 'Other' }, { 'idempotency-key': 'k1' }), 422, 'idempotency-key-reused');
  });

  it('evaluates preconditions on the collection: If-Match * holds, If-None-Match * and tags fail with 412, a malformed one with 400', async () => {
    expect((await create({ name: 'a' }, { 'if-match': '*' })).status).toBe(201);
    problem(await create({ name: 'b' }, { 'if-none-match': '*' }), 412, 'precondition-failed');
    problem(await create({ name: 'c' }, { 'if-match': '"1"' }), 412, 'precondition-failed');
    expect(problem(await create({ name: 'd' }, { 'if-none-match': 'nonsense' }), 400, 'validation').errors).toEqual([{ path: 'If-None-Match', message: expect.any(String) }]);
    expect(store.rows.size).toBe(1);
  });

  it('answers 400 for an invalid widget and 415 for a body that is not JSON, creating nothing', async () => {
    expect(problem(await create({ stock: -1 }), 400, 'validation').errors).toEqual([
      { path: 'name', message: 'is required' },
      { path: 'stock', message: expect.any(String) },
    ]);
    problem(await api.send('POST', PATH, { body: { name: 'a' }, type: 'text/plain' }), 415, 'unsupported-media-type');
    expect(store.rows.size).toBe(0);
  });
});

describe('a write whose body has the wrong shape', () => {
  // About 100 KB of `[0,0,…]`, and an object with it as a field: refused before anything reads its items.
  const zeros = Array(50_000).fill(0);
  const unknownFields = Object.fromEntries(Array.from({ length: 500 }, (_, n) => [`field${n}`, n]));

  it('answers 400 at once for POST, PUT and PATCH, naming what is wrong, and lists a bounded number of fields', async () => {
    const id = await created();
    const writes = [
      (body: unknown) => create(body),
      (body: unknown) => api.send('PUT', `${PATH}/${id}`, { body }),
      (body: unknown) => api.send('PATCH', `${PATH}/${id}`, { body, type: 'application/merge-patch+json' }),
    ];
    for (const write of writes) {
      expect(problem(await write(zeros), 400, 'validation').errors).toEqual([{ path: 'body', message: 'must be a JSON object' }]);
      expect(problem(await write({ name: zeros }), 400, 'validation').errors).toEqual([{ path: 'name', message: 'must have at most 1000 items' }]);
      const many = problem(await write({ name: 'Gear', ...unknownFields }), 400, 'validation');
      expect({ detail: many.detail, listed: (many.errors as unknown[]).length }).toEqual({ detail: '500 fields are invalid; the first 20 are listed', listed: 20 });
    }
    expect([...store.rows.values()].map(({ version }) => version)).toEqual([1]);
  });
});

describe('a write to a resource with a body limit of its own (services.json)', () => {
  beforeEach(async () => {
    await api.close();
    await serve('none', 2_048);
  });
  const padded = (bytes: number) => ({ name: 'Gear', note: 'x'.repeat(bytes) });

  it('takes a body up to its own limit, below the default, and refuses a larger one, declared or chunked, naming its limit', async () => {
    expect(problem(await create(padded(1_500)), 400, 'validation').errors).toEqual([{ path: 'note', message: 'is not a known field' }]);
    expect(problem(await create(padded(2_100)), 413, 'payload-too-large').detail).toBe('The request body is larger than 2kb');
    const chunked = await fetch(api.origin + PATH, { method: 'POST', headers: { 'content-type': 'application/json' }, body: ReadableStream.from([Buffer.from(JSON.stringify(padded(2_100)))]), duplex: 'half' } as RequestInit);
    expect({ status: chunked.status, detail: ((await chunked.json()) as { detail: string }).detail }).toEqual({ status: 413, detail: 'The request body is larger than 2kb' });
    expect(store.rows.size).toBe(0);
  });
});

describe('GET /api/widgets', () => {
  it('answers a page, no-cache, with the next cursor while there are more', async () => {
    const ids = [await created({ name: 'a' }), await created({ name: 'b' }), await created({ name: 'c' })];
    const page = await api.send('GET', `${PATH}?limit=2`);
    expect(page.status).toBe(200);
    expect(page.headers).toMatchObject({ 'content-type': JSON_TYPE, 'cache-control': 'no-cache', 'content-length': String(Buffer.byteLength(page.text)) });
    expect(page.body).toEqual({ items: [expect.objectContaining({ id: ids[0], name: 'a', stock: 0 }), expect.objectContaining({ id: ids[1], name: 'b' })], nextCursor: encodeCursor(ids[1]!) });
    const rest = await api.send('GET', `${PATH}?cursor=${encodeCursor(ids[1]!)}`);
    expect(rest.body).toEqual({ items: [expect.objectContaining({ id: ids[2], createdAt: expect.stringMatching(TIME) })], nextCursor: null });
    expect((await api.send('GET', `${PATH}?name=b`)).body).toEqual({ items: [expect.objectContaining({ id: ids[1] })], nextCursor: null });
  });

  it('answers 400 to a query it does not declare or cannot parse', async () => {
    expect(problem(await api.send('GET', `${PATH}?limit=0`), 400, 'validation').errors).toEqual([{ path: 'limit', message: 'must be a whole number from 1 to 200' }]);
    problem(await api.send('GET', `${PATH}?colour=red`), 400, 'validation');
  });

  it('holds If-Match: * and fails any other If-Match with 412 (a collection has no ETag)', async () => {
    expect((await api.send('GET', PATH, { headers: { 'if-match': '*' } })).status).toBe(200);
    problem(await api.send('GET', PATH, { headers: { 'if-match': '"1"' } }), 412, 'precondition-failed');
    // If-None-Match on a list is not evaluated.
    expect((await api.send('GET', PATH, { headers: { 'if-none-match': '*' } })).status).toBe(200);
  });
});

describe('a page after a cursor that names no widget the caller sees', () => {
  const after = (id: string, headers: Record<string, string> = {}) => api.send('GET', `${PATH}?cursor=${encodeCursor(id)}`, { headers });
  const names = (answer: Answer) => (answer.body!.items as { name: string }[]).map(({ name }) => name);

  it('is answered, no-store, for a cursor never issued or a widget deleted since; no-cache after one that exists', async () => {
    const ids = [await created({ name: 'a' }), await created({ name: 'b' }), await created({ name: 'c' })];
    const known = await after(ids[0]!);
    expect({ cacheControl: known.headers['cache-control'], names: names(known) }).toEqual({ cacheControl: 'no-cache', names: ['b', 'c'] });
    const invented = await after(uuidv7());
    expect({ status: invented.status, cacheControl: invented.headers['cache-control'], names: names(invented) }).toEqual({ status: 200, cacheControl: 'no-store', names: [] });
    expect((await api.send('DELETE', `${PATH}/${ids[1]}`)).status).toBe(204);
    // A walk whose last widget was deleted goes on where it was.
    const deleted = await after(ids[1]!);
    expect({ cacheControl: deleted.headers['cache-control'], names: names(deleted) }).toEqual({ cacheControl: 'no-store', names: ['c'] });
  });

  it("where only owners see their records, is no-store after another owner's widget, whoever names it, but an admin's", async () => {
    await api.close();
    await serve('all');
    const as = (subject: string, admin = false) => ({ 'x-auth-subject': subject, ...(admin && { 'x-auth-role': 'admin' }) });
    const ids = [];
    for (const [subject, name] of [['ada', 'ada 1'], ['bob', 'bob 1'], ['ada', 'ada 2']] as const) {
      const answer = await create({ name }, as(subject));
      expect(answer.status).toBe(201);
      ids.push(answer.body!.id as string);
    }
    const read = async (id: string, headers: Record<string, string>, query = '') => {
      const answer = await api.send('GET', `${PATH}?cursor=${encodeCursor(id)}${query}`, { headers });
      return { cacheControl: answer.headers['cache-control'], names: names(answer) };
    };
    expect(await read(ids[0]!, as('ada'))).toEqual({ cacheControl: 'no-cache', names: ['ada 2'] });
    expect(await read(ids[1]!, as('ada'))).toEqual({ cacheControl: 'no-store', names: ['ada 2'] });
    expect(await read(ids[1]!, as('ada'), '&owner=bob')).toEqual({ cacheControl: 'no-store', names: [] });
    expect(await read(ids[0]!, as('ada'), '&owner=bob')).toEqual({ cacheControl: 'no-cache', names: [] });
    expect(await read(ids[1]!, as('root', true))).toEqual({ cacheControl: 'no-cache', names: ['ada 2'] });
  });
});

describe('GET /api/widgets/{id}', () => {
  it('answers the widget with its ETag, no-cache, and the request id', async () => {
    const id = await created();
    const read = await api.send('GET', `${PATH}/${id}`, { headers: { 'x-request-id': 'read-1' } });
    expect(read.status).toBe(200);
    expect(read.body).toEqual({ id, name: 'Gear', stock: 3, createdAt: expect.stringMatching(TIME), updatedAt: expect.stringMatching(TIME) });
    expect(read.headers).toEqual({
      'content-type': JSON_TYPE,
      'content-length': String(Buffer.byteLength(read.text)),
      etag: '"1"',
      'cache-control': 'no-cache',
      'x-request-id': 'read-1',
      'x-content-type-options': 'nosniff',
    });
  });

  it('answers 304 without a body while If-None-Match matches, and 404 for an unknown id', async () => {
    const id = await created();
    const unchanged = await api.send('GET', `${PATH}/${id}`, { headers: { 'x-request-id': 'read-2', 'if-none-match': 'W/"1"' } });
    expect(unchanged).toEqual({ status: 304, text: '', body: undefined, headers: { etag: '"1"', 'cache-control': 'no-cache', 'x-request-id': 'read-2', 'x-content-type-options': 'nosniff' } });
    expect((await api.send('GET', `${PATH}/${id}`, { headers: { 'if-none-match': '"2"' } })).status).toBe(200);
    const missing = problem(await api.send('GET', `${PATH}/0193a5c2-7b1e-7c4d-9a61-2f0c1b9e8d40`), 404, 'not-found');
    expect(missing.detail).toBe('No widget with id 0193a5c2-7b1e-7c4d-9a61-2f0c1b9e8d40');
  });

  it('is served before express by readItem, answering as the router does with the id and request id given', async () => {
    const id = await created();
    const early = await started((req, res) => void routes.readItem(req, res, id, 'early-1'));
    try {
      const read = await early.send('GET', '/anything', { headers: { 'if-none-match': '"9"' } });
      expect(read.status).toBe(200);
      expect(read.body).toMatchObject({ id, name: 'Gear' });
      expect(read.headers).toMatchObject({ etag: '"1"', 'x-request-id': 'early-1', 'cache-control': 'no-cache' });
      expect((await early.send('GET', '/anything', { headers: { 'if-none-match': '"1"' } })).status).toBe(304);
    } finally {
      await early.close();
    }
    expect(routes.path).toBe(PATH);
  });
});

describe('PUT /api/widgets/{id}', () => {
  it('replaces the widget: every field, absent ones their defaults, with the next ETag', async () => {
    const id = await created({ name: 'Gear', stock: 3 });
    const replaced = await api.send('PUT', `${PATH}/${id}`, { body: { name: 'Cog' }, headers: { 'if-match': '"1"' } });
    expect(replaced.status).toBe(200);
    expect(replaced.headers).toMatchObject({ etag: '"2"', 'content-type': JSON_TYPE });
    expect(replaced.body).toMatchObject({ id, name: 'Cog', stock: 0 });
    expect(store.rows.get(id)).toMatchObject({ version: 2, fields: { name: 'Cog', stock: 0 } });
  });

  it('answers 412 for a stale If-Match and 404 for an unknown id, changing nothing', async () => {
    const id = await created();
    problem(await api.send('PUT', `${PATH}/${id}`, { body: { name: 'Cog' }, headers: { 'if-match': '"2"' } }), 412, 'precondition-failed');
    problem(await api.send('PUT', `${PATH}/0193a5c2-7b1e-7c4d-9a61-2f0c1b9e8d40`, { body: { name: 'Cog' } }), 404, 'not-found');
    expect(store.rows.get(id)).toMatchObject({ version: 1 });
  });
});

describe('PATCH /api/widgets/{id}', () => {
  it('merges the patch, as application/merge-patch+json or application/json, with the next ETag', async () => {
    const id = await created({ name: 'Gear', stock: 3 });
    const patched = await api.send('PATCH', `${PATH}/${id}`, { body: { stock: 5 }, type: 'application/merge-patch+json' });
    expect(patched.status).toBe(200);
    expect(patched.headers).toMatchObject({ etag: '"2"', 'content-type': JSON_TYPE });
    expect(patched.headers['idempotent-replayed']).toBeUndefined();
    expect(patched.body).toMatchObject({ id, name: 'Gear', stock: 5 });
    const again = await api.send('PATCH', `${PATH}/${id}`, { body: { stock: null }, headers: { 'if-match': '"2"' } });
    expect(again.body).toMatchObject({ name: 'Gear', stock: 0 });
    expect(again.headers.etag).toBe('"3"');
    const refused = problem(await api.send('PATCH', `${PATH}/${id}`, { body: { stock: 1 }, type: 'text/plain' }), 415, 'unsupported-media-type');
    expect(refused.detail).toBe('The request body must be application/merge-patch+json or application/json, not text/plain');
  });

  it('replays the first response to a retry with the same Idempotency-Key: the change is made once', async () => {
    const id = await created();
    const first = await api.send('PATCH', `${PATH}/${id}`, { body: { stock: 9 }, headers: { 'idempotency-key': 'p1' } });
    const retry = await api.send('PATCH', `${PATH}/${id}`, { body: { stock: 9 }, headers: { 'idempotency-key': 'p1' } });
    expect(retry).toEqual({ ...first, headers: { ...first.headers, 'x-request-id': expect.any(String), 'idempotent-replayed': 'true' } });
    expect(first.headers.etag).toBe('"2"');
    expect(store.rows.get(id)).toMatchObject({ version: 2 });
    expect(keys.scopes).toEqual([PATH, PATH]);
  });
});

describe('DELETE /api/widgets/{id}', () => {
  it('deletes: 204 without a body, then 404; 412 for a stale If-Match', async () => {
    const id = await created();
    problem(await api.send('DELETE', `${PATH}/${id}`, { headers: { 'if-match': '"2"' } }), 412, 'precondition-failed');
    const deleted = await api.send('DELETE', `${PATH}/${id}`, { headers: { 'if-match': '"1"' } });
    expect({ status: deleted.status, text: deleted.text }).toEqual({ status: 204, text: '' });
    expect(store.rows.size).toBe(0);
    problem(await api.send('DELETE', `${PATH}/${id}`), 404, 'not-found');
  });
});

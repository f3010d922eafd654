/**
 * A hostile client against the real stack: the gateway with its Redis cache, every service, MySQL.
 *
 * 1. Requests generated from openapi.json (fast-check arbitraries from its schemas and parameters:
 *    valid and mutated bodies, bodies broken on the wire, wrong media types and content codings,
 *    conditional headers, known, unknown and malformed ids in several spellings, junk queries,
 *    methods a path does not have). Every answer must be below 500 and match the document
 *    (test/support/contract.ts), every 4xx a problem+json; after every write, a GET through the
 *    gateway must equal a GET straight from the service (the cache never serves what the write
 *    changed), for the item and for the list.
 * 2. A raw-HTTP corpus (net sockets) of framing tricks that no HTTP library sends, against the
 *    gateway and both services: each answered by a problem+json or a normal answer, never a 5xx;
 *    a valid request pipelined before a malformed one is answered first.
 * The servers must still answer afterwards. The counts are printed at the end of the run.
 */
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import type { oas31 } from 'zod-openapi';
import type { PathItem } from '../support/contract.js';
import { encodeCursor } from '@app/shared/resource/rules';
import { apiContract, assertConforms, type Contract } from '../support/contract.js';
import { portOf, rawExchange, rawExchangeAll, requestBytes, type SocketResponse } from '../support/raw-socket.js';
import { bodyBytes, bodyValue, validValue } from '../support/schema-arbitrary.js';
import { resourceCases, type ResourceCase } from '../support/resource-case.js';
import { startStack } from '../support/stack.js';
import { DEFAULT_SUBJECT, defaultToken, testToken } from '../support/auth.js';
import type { Ownership } from '@app/shared/platform/ownership-policy';
import { ownershipOf } from '@app/shared/platform/services';

/** At least 1,000 generated requests per run (the issue's bar), bounded so the run stays short. */
const GENERATED_REQUESTS = 1_100;
const SEED = Number(process.env.HOSTILE_SEED ?? Date.now() % 2 ** 31);

let stack: Awaited<ReturnType<typeof startStack>>;
const contract: Contract = apiContract();

beforeAll(async () => {
  // Its own key prefix in the shared Redis: another test's write whose outcome its gateway did not
  // know holds a collection's list pages (`h:{users}`) for every gateway of the run's prefix, and
  // this run's reads of them would rightly not be cached.
  stack = await startStack({ cache: { keyPrefix: `${process.env.TEST_REDIS_KEY_PREFIX ?? ''}hostile-${randomBytes(6).toString('hex')}:` } });
  // Each resource's mark, then a few items to start from, so generated writes find something to change.
  for (let i = 0; i < 4; i++) {
    for (const resource of resources) {
      const body = resource.valid(1_000_000 + i);
      const created = await fetch(`${stack.gateway.url}${resource.collection}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${defaultToken}` }, body: JSON.stringify(body) });
      const { id } = (await created.json()) as { id: string };
      if (resource.mark === undefined) resource.mark = id;
      else resource.ids.push(id);
    }
  }
});
afterAll(() => stack.close());

// ---- what the run saw, printed at the end ----

const counts = { generated: 0, writes: 0, cachedBeforeWrites: 0, consistencyChecks: 0, asOther: 0, raw: 0, byStatus: new Map<number, number>(), byProblem: new Map<string, number>() };

function tally(status: number, contentType: string | null, body: string) {
  counts.byStatus.set(status, (counts.byStatus.get(status) ?? 0) + 1);
  if (contentType?.startsWith('application/problem+json') && body !== '') {
    const type = String((JSON.parse(body) as { type: string }).type).replace('https://problems.example/', '');
    counts.byProblem.set(`${status} ${type}`, (counts.byProblem.get(`${status} ${type}`) ?? 0) + 1);
  }
}

afterAll(() => {
  const sorted = <K>(map: Map<K, number>) => [...map].sort(([a], [b]) => String(a).localeCompare(String(b)));
  const fives = sorted(counts.byStatus).filter(([status]) => status >= 500).reduce((sum, [, n]) => sum + n, 0);
  console.log(
    [
      `hostile-input (seed ${SEED}): ${counts.generated} generated requests + ${counts.raw} raw-HTTP requests; ${counts.writes} writes, ${counts.cachedBeforeWrites} reads cached before them, ${counts.consistencyChecks} cache-consistency checks after them`,
      `  by status: ${sorted(counts.byStatus).map(([status, n]) => `${status} × ${n}`).join(', ')}`,
      `  4xx problem types: ${sorted(counts.byProblem).map(([kind, n]) => `${kind} × ${n}`).join(', ')}`,
      `  5xx: ${fives}`,
    ].join('\n'),
  );
});

// ---- requests generated from openapi.json ----

interface Resource {
  /** The service's name in services.json. */
  name: string;
  collection: string;
  /** The unique field that the list filters by (`?email=`, `?sku=`), if it has one. */
  unique?: string;
  /** A valid new item (<service>/test/api-case.ts). */
  valid: ResourceCase['valid'];
  /** Who may see and change its records (services.json). */
  ownership: Ownership;
  /** Ids this run created (some deleted since). */
  ids: string[];
  /** An item made first and never written to: this run's list page is the one after it. */
  mark?: string;
}

// Every service in services.json.
const resources: Resource[] = (await resourceCases()).map(({ name, path, unique, valid }) => ({ name, collection: path, unique: unique?.field, valid, ownership: ownershipOf(name), ids: [] }));

/**
 * Every fifth generated request is sent as another caller: what it may see and change of the
 * records the default caller made is what the service's ownership allows, and no more.
 */
const OTHER_SUBJECT = 'hostile-other';
const otherToken = await testToken({ subject: OTHER_SUBJECT });

interface Generated {
  method: string;
  resource: Resource;
  /** The item's id when the target is an item. */
  id?: string;
  target: string;
  /** How the item's id is spelled in the target. */
  spell?: (id: string) => string;
  headers: Record<string, string>;
  body?: Buffer;
}

const UNKNOWN_ID = '0193a5c2-7b1e-7c4d-9a61-2f0c1b9e8d40';
const visible = fc.string({ unit: fc.constantFrom(...'abcXYZ019 "*/,;=-_.W'.split('')), maxLength: 20 });

/** An id (index into the resource's ids, resolved at send time), an unknown one, or junk; spelled several ways. */
const idChoice = fc.oneof(
  { arbitrary: fc.nat().map((n) => ({ known: n })), weight: 6 },
  { arbitrary: fc.constantFrom(UNKNOWN_ID, 'not-an-id', '0', '..', '%2e%2e', 'a'.repeat(300), "1' OR '1'='1").map((raw) => ({ raw })), weight: 2 },
);
const spelling = fc.constantFrom<(id: string) => string>(
  (id) => id,
  (id) => id,
  (id) => id,
  (id) => id.toUpperCase(),
  (id) => `${id}/`,
  (id) => `${id.slice(0, 1)}%${id.charCodeAt(1).toString(16)}${id.slice(2)}`,
  (id) => `../${id.split('-')[0]}`,
);

const conditional = (etagHint: string) =>
  fc.oneof(
    { arbitrary: fc.constant(undefined), weight: 12 },
    { arbitrary: fc.constantFrom('*', etagHint, `W/${etagHint}`, '"0"', '"1", "2"', 'garbage', '"unterminated', ''), weight: 3 },
    { arbitrary: visible, weight: 1 },
  );

function requestArbitrary(resource: Resource, template: string, item: PathItem): fc.Arbitrary<Omit<Generated, 'resource'>>[] {
  const isItem = template.includes('{id}');
  const arbitraries: fc.Arbitrary<Omit<Generated, 'resource'>>[] = [];
  for (const method of ['get', 'head', 'post', 'put', 'patch', 'delete', 'options'] as const) {
    const operation = item[method];
    const queryParameters = [...(item.parameters ?? []), ...(operation?.parameters ?? [])]
      .map((parameter) => contract.resolve<oas31.ParameterObject>(parameter))
      .filter((parameter) => parameter.in === 'query');
    const query = fc
      .tuple(
        ...queryParameters.map((parameter) =>
          fc.option(fc.oneof(validValue(contract, parameter.schema).map(String), visible), { nil: undefined }).map((value) => [parameter.name, value] as const),
        ),
        fc.option(fc.tuple(fc.constantFrom('offset', 'LIMIT', 'limit', 'q', '__proto__'), visible), { nil: undefined }),
      )
      .map((pairs) => {
        const params = new URLSearchParams();
        for (const pair of pairs) if (pair && pair[1] !== undefined) params.append(pair[0], pair[1]);
        const text = params.toString();
        return text ? `?${text}` : '';
      });
    const content = operation?.requestBody?.content ?? {};
    const mediaTypes = Object.keys(content);
    const schema = mediaTypes[0] === undefined ? undefined : content[mediaTypes[0]]?.schema;
    const body = schema ? bodyBytes(bodyValue(contract, schema)) : fc.constant(undefined);
    const contentType = fc.oneof(
      { arbitrary: fc.constantFrom(...(mediaTypes.length > 0 ? mediaTypes : ['application/json'])), weight: 10 },
      { arbitrary: fc.constantFrom('text/plain', 'application/json; charset=latin1', 'APPLICATION/JSON', 'application/x-www-form-urlencoded', 'multipart/form-data'), weight: 1 },
    );
    const contentEncoding = fc.oneof(
      { arbitrary: fc.constant(undefined), weight: 12 },
      { arbitrary: fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'gzip, identity', 'compress'), weight: 1 },
    );
    const headers = fc
      .record({
        'content-type': contentType,
        'content-encoding': contentEncoding,
        'if-match': conditional('"1"'),
        'if-none-match': conditional('"1"'),
        'x-request-id': fc.option(fc.oneof(visible, fc.constant('a'.repeat(200))), { nil: undefined }),
      })
      .map((fields) => Object.fromEntries(Object.entries(fields).filter((entry): entry is [string, string] => entry[1] !== undefined)));
    if (!operation) continue;
    arbitraries.push(
      fc.record({ method: fc.constant(method.toUpperCase()), id: isItem ? fc.tuple(idChoice, spelling) : fc.constant(undefined), query, headers, body: operation.requestBody ? body : fc.constant(undefined) }).map(
        ({ method: verb, id, query: search, headers: sent, body: bytes }) => ({
          method: verb,
          // Resolved when sent, once the ids exist: `{ known: n }` or a raw id, in a spelling.
          id: id === undefined ? undefined : JSON.stringify(id[0]),
          target: isItem ? `${resource.collection}/{id}${search}` : `${resource.collection}${search}`,
          spell: id?.[1],
          headers: operation.requestBody ? sent : Object.fromEntries(Object.entries(sent).filter(([header]) => !header.startsWith('content-'))),
          ...(bytes === undefined ? {} : { body: bytes }),
        }),
      ),
    );
  }
  // Methods the path does not have: 405 with Allow.
  const missing = ['POST', 'PUT', 'PATCH', 'DELETE'].filter((verb) => !item[verb.toLowerCase() as 'post']);
  if (missing.length > 0) {
    arbitraries.push(
      fc.constantFrom(...missing).map((verb) => ({ method: verb, target: isItem ? `${resource.collection}/{id}` : resource.collection, id: JSON.stringify({ known: 0 }), headers: {} })),
    );
  }
  return arbitraries;
}

const generatedRequest: fc.Arbitrary<Generated> = fc.oneof(
  ...resources.flatMap((resource) =>
    [resource.collection, `${resource.collection}/{id}`].flatMap((template) =>
      requestArbitrary(resource, template, contract.document.paths[template]!).map((arbitrary) => arbitrary.map((request) => ({ ...request, resource }))),
    ),
  ),
);

/** Replaces `{id}` with the chosen id in its chosen spelling; returns the canonical id it names, if any. */
function resolveTarget(request: Generated): { target: string; id?: string } {
  if (!request.target.includes('{id}')) return { target: request.target };
  const choice = JSON.parse(request.id ?? '{"known":0}') as { known?: number; raw?: string };
  const { ids } = request.resource;
  const id = choice.known !== undefined ? (ids.length > 0 ? ids[choice.known % ids.length]! : UNKNOWN_ID) : choice.raw!;
  const spelled = (request.spell ?? ((value: string) => value))(id);
  return { target: request.target.replace('{id}', spelled), id: spelled === id ? id : undefined };
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

async function send(baseUrl: string, method: string, target: string, headers: Record<string, string> = {}, body?: Buffer, token = defaultToken): Promise<Answer> {
  const response = await fetch(`${baseUrl}${target}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...headers },
    body: body && new Uint8Array(body),
    redirect: 'manual',
    signal: AbortSignal.timeout(10_000),
  });
  return { status: response.status, headers: response.headers, text: await response.text() };
}

/**
 * Every item this run creates, as a list page no other run asks for (its schemas and cache keys are
 * its own too): the page after the resource's mark, a record that exists, since a page after a
 * cursor naming none is never cached.
 */
const runPage = (resource: Resource) => `limit=200&cursor=${encodeCursor(resource.mark!)}`;

/** The reads a write may change: its item, this run's list page, and the list filtered by its unique value. */
const readsOf = (resource: Resource, id: string | undefined, uniqueValue: string | undefined) => [
  ...(id ? [`${resource.collection}/${id}`] : []),
  `${resource.collection}?${runPage(resource)}`,
  ...(uniqueValue === undefined ? [] : [`${resource.collection}?${resource.unique}=${encodeURIComponent(uniqueValue)}`]),
];

/**
 * Before a write: every read it may change that the service answers 200 is in the gateway's cache
 * (a HIT), so that the check after the write is about an entry the write must not leave behind.
 */
async function cacheBefore(targets: string[]): Promise<void> {
  for (const target of targets) {
    if ((await send(stack.gateway.url, 'GET', target)).status !== 200) continue;
    const again = await send(stack.gateway.url, 'GET', target);
    expect({ target, cache: again.headers.get('x-cache') }).toEqual({ target, cache: 'HIT' });
    counts.cachedBeforeWrites++;
  }
}

/** After a write: what the gateway serves (its cache included) is what the service has. */
async function expectConsistent(resource: Resource, targets: string[]) {
  // A stale entry would be served (HIT) by the first read after the write: one read each suffices.
  await Promise.all(
    targets.map(async (target) => {
      // The service asked directly as the gateway asks it for the default caller.
      const [viaGateway, direct] = await Promise.all([send(stack.gateway.url, 'GET', target), send(serviceOf(resource), 'GET', target, { 'x-auth-subject': DEFAULT_SUBJECT })]);
      counts.consistencyChecks++;
      expect({ target, status: viaGateway.status, etag: viaGateway.headers.get('etag'), body: viaGateway.text }).toEqual({
        target,
        status: direct.status,
        etag: direct.headers.get('etag'),
        body: direct.text,
      });
    }),
  );
}

const serviceOf = (resource: Resource) => stack.services[resource.name]!.url;

/**
 * The unique field's value in a written representation, to check the list filtered by it. A
 * string with a lone surrogate (JSON's `"\ud800"`) has no UTF-8 form, so no filtered URL names it.
 */
const uniqueOf = (resource: Resource, body: unknown): string | undefined => {
  const value = resource.unique === undefined ? undefined : (body as Record<string, unknown> | null)?.[resource.unique];
  return typeof value === 'string' && value.isWellFormed() ? value : undefined;
};

/** Sends one generated request through the gateway and checks the answer, and the cache after a write. */
async function sendAndCheck(request: Generated, asOther: boolean): Promise<void> {
  const { target, id } = resolveTarget(request);
  const before = WRITES.has(request.method) ? readsOf(request.resource, id, uniqueSent(request.resource, request.body)) : [];
  if (before.length > 0) {
    counts.writes++;
    await cacheBefore(before);
  }
  const answer = await send(stack.gateway.url, request.method, target, request.headers, request.body, asOther ? otherToken : defaultToken);
  if (asOther) expectOwnershipHeld(request, id, answer);
  counts.generated++;
  tally(answer.status, answer.headers.get('content-type'), answer.text);
  const context = `${request.method} ${target} ${JSON.stringify(request.headers)} ${request.body?.toString('latin1').slice(0, 300) ?? ''}`;
  expect({ context, status: answer.status < 500 }).toEqual({ context, status: true });
  try {
    assertConforms({ method: request.method, url: target, status: answer.status, headers: answer.headers, text: answer.text });
  } catch (error) {
    throw new Error(`${context}\n${(error as Error).message}`, { cause: error });
  }
  if (answer.status >= 400 && request.method !== 'HEAD') expect(answer.headers.get('content-type')).toBe('application/problem+json; charset=utf-8');
  if (!WRITES.has(request.method)) return;
  // A 2xx body is JSON, or the run fails here.
  const written: unknown = answer.status < 300 && answer.text ? JSON.parse(answer.text) : undefined;
  const createdId = request.method === 'POST' && answer.status === 201 ? (written as { id: string }).id : undefined;
  if (createdId) request.resource.ids.push(createdId);
  await expectConsistent(request.resource, [...new Set([...before, ...readsOf(request.resource, createdId ?? id, uniqueOf(request.resource, written))])]);
}

const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** Ids the other caller created: the only records it may change or delete where records have owners. */
const othersIds = new Set<string>();

/**
 * What the other caller got is what its service's ownership allows it: where only owners see their
 * records, every record in a 2xx answer is its own; where only owners change them, every record it
 * changed or deleted is its own.
 */
function expectOwnershipHeld(request: Generated, id: string | undefined, answer: Answer): void {
  const { ownership } = request.resource;
  counts.asOther++;
  if (answer.status >= 300 || ownership === 'none') return;
  if (request.method === 'DELETE') {
    expect({ deleted: id, byItsOwner: id !== undefined && othersIds.has(id) }).toEqual({ deleted: id, byItsOwner: true });
    return;
  }
  if (!answer.text) return;
  const body = JSON.parse(answer.text) as { items?: { owner?: unknown }[]; id?: string; owner?: unknown };
  if (request.method === 'POST' && body.id) othersIds.add(body.id);
  const records = Array.isArray(body.items) ? body.items : [body];
  const bound = ownership === 'all' || request.method !== 'GET';
  if (bound && !['HEAD'].includes(request.method)) for (const record of records) expect({ target: request.target, owner: record.owner }).toEqual({ target: request.target, owner: OTHER_SUBJECT });
}

/** The unique value a write's body would give, when the body is JSON at all (a generated one may not be). */
function uniqueSent(resource: Resource, body: Buffer | undefined): string | undefined {
  try {
    return body ? uniqueOf(resource, JSON.parse(body.toString('utf8'))) : undefined;
  } catch {
    return undefined;
  }
}

describe('requests generated from openapi.json', () => {
  it(`${GENERATED_REQUESTS} requests: no 5xx, every answer as the document says, the cache consistent after every write`, async () => {
    const requests = fc.sample(generatedRequest, { numRuns: GENERATED_REQUESTS, seed: SEED });
    // One sequence per resource, both at once: they share no service, schema or cache scope, so one
    // sequence's writes never race the other's consistency checks.
    await Promise.all(resources.map(async (resource) => {
      for (const [index, request] of requests.entries()) if (request.resource === resource) await sendAndCheck(request, index % 5 === 4);
    }));
    // Every write was checked against a cached read (this run's list page always answers 200), at least.
    expect(counts.writes).toBeGreaterThan(0);
    expect(counts.cachedBeforeWrites).toBeGreaterThanOrEqual(counts.writes);
    expect(counts.consistencyChecks).toBeGreaterThanOrEqual(counts.writes);
    // A fifth of the requests came from another caller, whose answers were checked against ownership.
    expect(counts.asOther).toBeGreaterThanOrEqual(Math.floor(GENERATED_REQUESTS / 5));
  }, 120_000);
});

// ---- query strings an endpoint does not define ----

describe('query parameters an endpoint does not define', () => {
  const junk = () => `j=${randomBytes(1_000).toString('hex')}`;
  const product = { sku: 'QUERY-1', name: 'Query', price: { amount: '1.00', currency: 'EUR' } };
  const jsonHeaders = { 'content-type': 'application/json' };

  it('are a 400 naming the parameter on every item method and on POST, from the gateway and the service alike', async () => {
    const created = await send(stack.gateway.url, 'POST', '/api/products', jsonHeaders, Buffer.from(JSON.stringify(product)));
    expect(created.status).toBe(201);
    const item = `/api/products/${(JSON.parse(created.text) as { id: string }).id}`;
    const cases: [string, string, Record<string, string>, Buffer?][] = [
      ['GET', item, {}],
      ['HEAD', item, {}],
      ['PUT', item, jsonHeaders, Buffer.from(JSON.stringify({ ...product, name: 'Changed' }))],
      ['PATCH', item, { 'content-type': 'application/merge-patch+json' }, Buffer.from('{"name":"Changed"}')],
      ['DELETE', item, {}],
      ['POST', '/api/products', jsonHeaders, Buffer.from(JSON.stringify({ ...product, sku: 'QUERY-2' }))],
    ];
    for (const base of [stack.gateway.url, stack.products.url]) {
      for (const [method, target, headers, body] of cases) {
        const answer = await send(base, method, `${target}?${junk()}`, headers, body);
        expect({ base, method, status: answer.status }).toEqual({ base, method, status: 400 });
        if (method !== 'HEAD') expect(JSON.parse(answer.text)).toMatchObject({ type: 'https://problems.example/validation', errors: [{ path: 'j', message: 'is not a known field' }] });
      }
    }
    // Nothing was written: the item is as it was created, and the second POST made nothing.
    const after = await send(stack.gateway.url, 'GET', item);
    expect({ status: after.status, name: (JSON.parse(after.text) as { name: string }).name }).toEqual({ status: 200, name: 'Query' });
    expect(JSON.parse((await send(stack.gateway.url, 'GET', '/api/products?sku=QUERY-2')).text)).toMatchObject({ items: [] });
  });

  it('make no cache entry: the same junk read twice is never a 200 nor a HIT', async () => {
    const id = resources[1]!.ids[0]!;
    const target = `/api/products/${id}?${junk()}`;
    for (let i = 0; i < 2; i++) {
      const answer = await send(stack.gateway.url, 'GET', target);
      expect({ status: answer.status, cache: answer.headers.get('x-cache') }).toEqual({ status: 400, cache: 'MISS' });
    }
  });
});

// ---- the raw-HTTP corpus ----

const valid = (method: string, target: string, headers: Record<string, string> = {}, body = '') =>
  requestBytes(method, target, { 'Content-Length': String(Buffer.byteLength(body)), ...headers }, body);

/** Framing that HTTP libraries never send. Each is one connection; the first answer is checked. */
const corpus: Record<string, (string | Buffer)[]> = {
  'bad method token': ['GE(T /api/users HTTP/1.1\r\nHost: x\r\n\r\n'],
  'lower-case method': ['get /api/users HTTP/1.1\r\nHost: x\r\n\r\n'],
  'unknown method': ['FOO /api/users HTTP/1.1\r\nHost: x\r\n\r\n'],
  'Content-Length with Transfer-Encoding': [requestBytes('POST', '/api/users', { 'Content-Length': '5', 'Transfer-Encoding': 'chunked' }, '0\r\n\r\n')],
  'two different Content-Lengths': [requestBytes('POST', '/api/users', { 'Content-Length': '2', 'content-length': '3', 'Content-Type': 'application/json' }, '{}x')],
  'negative Content-Length': [requestBytes('POST', '/api/users', { 'Content-Length': '-1' })],
  'Content-Length not a number': [requestBytes('POST', '/api/users', { 'Content-Length': '1e3' })],
  'chunk size not hex': [requestBytes('POST', '/api/users', { 'Transfer-Encoding': 'chunked', 'Content-Type': 'application/json' }, 'zz\r\n{}\r\n0\r\n\r\n')],
  'Transfer-Encoding not ending in chunked': [requestBytes('POST', '/api/users', { 'Transfer-Encoding': 'chunked, identity' }, '0\r\n\r\n')],
  'Transfer-Encoding with a space before the colon': ['POST /api/users HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n'],
  'chunk extension flood': [requestBytes('POST', '/api/users', { 'Transfer-Encoding': 'chunked' }, `2;${'a=b;'.repeat(5_000)}\r\n{}\r\n0\r\n\r\n`)],
  'header line without a colon': ['GET /api/users HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n'],
  'obsolete line folding': ['GET /api/users HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  folded\r\n\r\n'],
  'NUL in a header value': ['GET /api/users HTTP/1.1\r\nHost: x\r\nX-A: a\u0000b\r\n\r\n'],
  'space in a header name': ['GET /api/users HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n'],
  'bare LF line endings': ['GET /api/users HTTP/1.1\nHost: x\n\n'],
  'HTTP/1.1 without Host': ['GET /api/users HTTP/1.1\r\n\r\n'],
  'HTTP/1.0': ['GET /api/users HTTP/1.0\r\n\r\n'],
  'HTTP/2.0 in the request line': ['GET /api/users HTTP/2.0\r\nHost: x\r\n\r\n'],
  'HTTP/9.9': ['GET /api/users HTTP/9.9\r\nHost: x\r\n\r\n'],
  'HTTP/2 connection preface': ['PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'],
  'header fields over 16 KiB': [valid('GET', '/api/users', { 'X-Big': 'a'.repeat(20_000) })],
  '2,500 header fields': [valid('GET', '/api/users', Object.fromEntries(Array.from({ length: 2_500 }, (_, i) => [`X-H${i}`, '1'])))],
  'request target over 8 KiB': [valid('GET', `/api/users?q=${'a'.repeat(9_000)}`)],
  'request target over 16 KiB': [valid('GET', `/api/users?q=${'a'.repeat(20_000)}`)],
  '10,000 query parameters': [valid('GET', `/api/users?${Array.from({ length: 10_000 }, (_, i) => `p${i}=1`).join('&')}`)],
  '1,000 query parameters (under the limit)': [valid('GET', `/api/users?${Array.from({ length: 1_000 }, (_, i) => `p${i}=1`).join('&')}`)],
  'space inside the target': ['GET /api/ users HTTP/1.1\r\nHost: x\r\n\r\n'],
  'control character in the target': ['GET /api/users\u0001 HTTP/1.1\r\nHost: x\r\n\r\n'],
  'raw UTF-8 bytes in the target': [Buffer.concat([Buffer.from('GET /api/us'), Buffer.from('é'), Buffer.from('ers HTTP/1.1\r\nHost: x\r\n\r\n')])],
  'absolute-form target': [valid('GET', 'http://evil.example/api/users')],
  'asterisk-form target': [valid('OPTIONS', '*')],
  'authority-form target': [valid('GET', '127.0.0.1:80')],
  'Expect: 100-continue': [requestBytes('POST', '/api/users', { 'Content-Length': '2', 'Content-Type': 'application/json', Expect: '100-continue' }, '{}')],
  'Expect: something else': [requestBytes('POST', '/api/users', { 'Content-Length': '2', 'Content-Type': 'application/json', Expect: 'teapot' }, '{}')],
  'Upgrade: websocket': [valid('GET', '/api/users', { Connection: 'Upgrade', Upgrade: 'websocket' })],
  'Upgrade: h2c': [valid('GET', '/api/users', { Connection: 'Upgrade, HTTP2-Settings', Upgrade: 'h2c', 'HTTP2-Settings': 'AAMAAABkAARAAAAAAAIAAAAA' })],
  'pipelined requests, the second smuggled': [Buffer.concat([valid('GET', '/api/users'), valid('DELETE', `/api/users/${UNKNOWN_ID}`)])],
  'a body on GET': [valid('GET', '/api/users', { 'Content-Type': 'application/json' }, '{"a":1}')],
  'gzip content coding on a chunked body': [requestBytes('POST', '/api/users', { 'Transfer-Encoding': 'chunked', 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' }, '2\r\n{}\r\n0\r\n\r\n')],
  'Content-Length over the body limit': [requestBytes('POST', '/api/users', { 'Content-Length': String(10 * 1024 * 1024), 'Content-Type': 'application/json' }, '{')],
  'chunked body over the body limit': [
    requestBytes('POST', '/api/users', { 'Transfer-Encoding': 'chunked', 'Content-Type': 'application/json' }),
    `${(120 * 1024).toString(16)}\r\n${'['.repeat(120 * 1024)}\r\n0\r\n\r\n`,
  ],
  'invalid UTF-8 in a header value': [Buffer.concat([Buffer.from('GET /api/users HTTP/1.1\r\nHost: x\r\nX-Request-Id: '), Buffer.from([0xff, 0xfe]), Buffer.from('\r\n\r\n')])],
};

describe('a raw-HTTP corpus of framing tricks', () => {
  const servers = () => ({ gateway: stack.gateway.url, ...Object.fromEntries(Object.entries(stack.services).map(([name, { url }]) => [`${name}-service`, url])) });

  it.each(Object.keys(corpus))('%s: never a 5xx; a 4xx is a problem+json the document describes', async (name) => {
    for (const [server, url] of Object.entries(servers())) {
      let response: SocketResponse;
      try {
        response = await rawExchange(portOf(url), corpus[name]!, { timeoutMs: 5_000 });
      } catch (error) {
        throw new Error(`${server}: ${(error as Error).message}`, { cause: error });
      }
      counts.raw++;
      tally(response.status, response.headers['content-type'] ?? null, response.body);
      expect({ server, status: response.status < 500 }).toEqual({ server, status: true });
      if (response.status >= 400) {
        expect({ server, type: response.headers['content-type'] }).toEqual({ server, type: 'application/problem+json; charset=utf-8' });
        const problem = JSON.parse(response.body) as { status: number };
        expect({ server, errors: contract.schemaErrors({ $ref: '#/components/schemas/Problem' }, problem), status: problem.status }).toEqual({
          server,
          errors: [],
          status: response.status,
        });
        expect(response.headers['x-request-id']).toBeDefined();
      }
    }
  });
});

describe('a valid request pipelined with a malformed one after it', () => {
  it('is answered first (201), then the malformed one (400), in order, then the connection closes', async () => {
    for (const [server, url] of [['gateway', stack.gateway.url], ['products-service', stack.products.url]] as const) {
      const sku = `PIPELINED-${server}-${Date.now()}`;
      const packet = Buffer.concat([valid('POST', '/api/products', { 'Content-Type': 'application/json' }, JSON.stringify({ sku, name: 'Pipelined', price: { amount: '1.00', currency: 'EUR' } })), Buffer.from('GE(T /api/products HTTP/1.1\r\nHost: x\r\n\r\n')]);
      const responses = await rawExchangeAll(portOf(url), packet);
      for (const response of responses) tally(response.status, response.headers['content-type'] ?? null, response.body);
      expect({ server, statuses: responses.map(({ status }) => status) }).toEqual({ server, statuses: [201, 400] });
      expect(JSON.parse(responses[0]!.body)).toMatchObject({ sku });
      expect(JSON.parse(responses[1]!.body)).toMatchObject({ status: 400, type: 'https://problems.example/bad-request' });
    }
  });
});

describe('afterwards', () => {
  it('every process is up and serving', async () => {
    for (const [name, { url }] of Object.entries(stack.services)) {
      expect((await fetch(`${url}/readyz`)).status).toBe(200);
      expect((await fetch(`${url}/api/${name}?limit=1`)).status).toBeLessThan(500);
    }
    expect((await fetch(`${stack.gateway.url}/readyz`)).status).toBe(200);
  });
});

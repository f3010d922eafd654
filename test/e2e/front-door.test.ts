/**
 * One meaning for every path: generated spellings of the API's paths (slashes, dot segments,
 * percent-encoding of any character, letter case, unicode, `;` parameters, `#`, absolute-form,
 * queries), mixed with real ids, never make the gateway's idea of what a request touches differ
 * from what the service acts on. Real gateway with its Redis cache, real products service (express
 * routing, MySQL).
 */
import fc from 'fast-check';
import { requestTarget, type ApiTarget } from '@app/shared/platform/request-target';
import { v7 as uuidv7 } from 'uuid';
import { rawRequest } from '../support/raw-http.js';
import { startGateway, startProductsService, type RunningGateway, type RunningService } from '../support/stack.js';

let products: RunningService;
let gateway: RunningGateway;
/** The products that exist, by id. */
const existing = new Set<string>();
let counter = 0;

const newProduct = () => {
  const n = ++counter;
  return { sku: `FD-${n}-${Date.now()}`, name: `Front door ${n}`, price: { amount: '1.00', currency: 'EUR' }, stock: n };
};

/** Created through the gateway, as every write here, so its cache knows. */
async function createProduct(): Promise<string> {
  const created = await rawRequest(gateway.url, 'POST', '/api/products', { json: newProduct() });
  expect(created.status).toBe(201);
  existing.add(created.body.id);
  return created.body.id as string;
}

beforeAll(async () => {
  products = await startProductsService();
  gateway = await startGateway({ upstreams: { users: products.url, products: products.url }, cache: { ttlSeconds: 60, staleSeconds: 0 } });
  for (let i = 0; i < 4; i++) await createProduct();
});
afterAll(async () => {
  await gateway.close();
  await products.close();
});

// ---- generated spellings ----

const percentEncoded = (char: string, upper: boolean) => {
  const hex = [...Buffer.from(char)].map((byte) => `%${byte.toString(16).padStart(2, '0')}`).join('');
  return upper ? hex.toUpperCase() : hex;
};

/** `word` as it is (most often), or with some characters in another case or percent-encoded. */
const spelled = (word: string) =>
  fc.oneof(
    { arbitrary: fc.constant(word), weight: 8 },
    {
      arbitrary: fc
        .array(fc.integer({ min: 0, max: 11 }), { minLength: word.length, maxLength: word.length })
        .map((ops) => [...word].map((char, i) => [char.toUpperCase(), percentEncoded(char, true), percentEncoded(char, false)][ops[i]!] ?? char).join('')),
      weight: 2,
    },
  );

const separator = fc.oneof(
  { arbitrary: fc.constant('/'), weight: 40 },
  fc.constantFrom('//', '/./', '/%2e/', '/%2E/', '/x/../', '/x/%2e%2e/', '%2F', '/%2f', '\\', ';p=1/', '/;/'),
);
const leading = fc.oneof({ arbitrary: fc.constant('/'), weight: 25 }, fc.constantFrom('//', '/./', '/%2e/', '/../', '/%2F'));
const suffix = fc.oneof(
  { arbitrary: fc.constant(''), weight: 20 },
  fc.constantFrom('/', '//', '/.', '/..', '/%2e', ';v=1', '%2F', '#top', '#', '%00', '%20', '/%C3%A9', 'é', '%C3%A9', '%zz', '%'),
);
const query = fc.oneof({ arbitrary: fc.constant(''), weight: 4 }, fc.constantFrom('?', '?limit=1', '?limit=%31', '?#x', '?limit=1#x'));
const absolute = fc.oneof({ arbitrary: fc.constant(''), weight: 8 }, fc.constantFrom('http://127.0.0.1', 'http://gateway:8080', 'HTTP://Gateway', 'https://x'));
// No ASCII space or control character raw: a request line cannot carry one, and Node refuses to send it.
const unicodeSegment = fc
  .string({ unit: 'grapheme', minLength: 1, maxLength: 4 })
  .chain((text) => ([...text].some((char) => char.charCodeAt(0) <= 0x20) ? fc.constant(encodeURIComponent(text)) : fc.constantFrom(text, encodeURIComponent(text))));

/** An id: a real one (most often), a real one in another spelling, an unknown one, or anything. */
const idSpelling = fc.oneof(
  { arbitrary: fc.constantFrom(...'0123').map(Number).map((i) => () => [...existing][i % existing.size]!), weight: 6 },
  { arbitrary: fc.constant(() => uuidv7()), weight: 1 },
  { arbitrary: fc.webSegment().map((segment) => () => segment), weight: 1 },
  { arbitrary: unicodeSegment.map((segment) => () => segment), weight: 1 },
).chain((id) => fc.tuple(fc.constant(id), fc.oneof({ arbitrary: fc.constant(undefined), weight: 4 }, fc.array(fc.integer({ min: 0, max: 11 }), { minLength: 36, maxLength: 36 }))));

/** A request target built from those parts; `id` is taken when the case runs (products come and go). */
const spelling = fc
  .record({
    absolute,
    leading,
    api: spelled('api'),
    sep1: separator,
    resource: spelled('products'),
    item: fc.oneof({ arbitrary: fc.constant(undefined), weight: 1 }, { arbitrary: fc.tuple(separator, idSpelling), weight: 3 }),
    suffix,
    query,
  })
  .map((parts) => () => {
    let item = '';
    if (parts.item) {
      const [sep, [id, ops]] = parts.item;
      const raw = id();
      item = sep + (ops ? [...raw].map((char, i) => [char.toUpperCase(), percentEncoded(char, true), percentEncoded(char, false)][ops[i]!] ?? char).join('') : raw);
    }
    return `${parts.absolute}${parts.leading}${parts.api}${parts.sep1}${parts.resource}${item}${parts.suffix}${parts.query}`;
  });

const anySpelling = fc.oneof(
  { arbitrary: spelling, weight: 8 },
  { arbitrary: fc.webPath().map((path) => () => `/api/products${path}`), weight: 1 },
  { arbitrary: fc.webPath().map((path) => () => path || '/'), weight: 1 },
);

// ---- what each side makes of a spelling ----

/**
 * What the gateway decides the request touches (the front door's canonical target), when it exists
 * and the service takes the request: an item takes no query parameter (400).
 */
function gatewayTouches(target: string): ApiTarget | undefined {
  const decided = requestTarget(target);
  const api = decided?.api;
  if (!api || api.resource !== 'products') return undefined;
  if (api.id !== undefined && new URLSearchParams(decided.query).size > 0) return undefined;
  return api.id === undefined || existing.has(api.id) ? api : undefined;
}

/** What the service's router acted on for a GET of `target`: its list, one item, or nothing. */
function actedOn(response: { status: number; body: { id?: string; items?: unknown } }): ApiTarget | undefined {
  if (response.status !== 200) return undefined;
  return Array.isArray(response.body.items) ? { resource: 'products' } : { resource: 'products', id: response.body.id };
}

const tally = { routing: 0, writes: 0, canonical: 0, refused: 0, outsideApi: 0 };
afterAll(() => {
  console.log(
    `front-door property: ${tally.routing} routing cases, ${tally.writes} write cases ` +
      `(${tally.canonical} canonical API targets, ${tally.refused} with no canonical form, ${tally.outsideApi} outside /api)`,
  );
});

function count(target: string): void {
  const decided = requestTarget(target);
  if (!decided) tally.refused++;
  else if (decided.api) tally.canonical++;
  else tally.outsideApi++;
}

it('the service router acts on exactly what the gateway decides, for every spelling', async () => {
  await fc.assert(
    fc.asyncProperty(anySpelling, async (spell) => {
      const target = spell();
      count(target);
      tally.routing++;
      const expected = gatewayTouches(target);
      const direct = await rawRequest(products.url, 'GET', target);
      const viaGateway = await rawRequest(gateway.url, 'GET', target);
      expect({ target, service: actedOn(direct), gateway: actedOn(viaGateway) }).toEqual({ target, service: expected, gateway: expected });
    }),
    { numRuns: 500 },
  );
});

it('a write through the gateway, however its path is spelled, never leaves an old cached read behind', async () => {
  // The page after a product made now, kept out of the writes (ids are UUIDv7, in creation order):
  // what this test creates, under a cache key no other run uses (Redis is shared). The cursor names
  // a product that exists: a page after one that does not is never cached.
  const mark = await rawRequest(gateway.url, 'POST', '/api/products', { json: newProduct() });
  expect(mark.status).toBe(201);
  const list = `/api/products?limit=200&cursor=${Buffer.from(mark.body.id as string, 'latin1').toString('base64url')}`;
  // Whatever can be cached is, before the write: the property is about an entry the write must not leave behind.
  const settle = async (path: string) => {
    if ((await rawRequest(products.url, 'GET', path)).status !== 200) return; // nothing to cache
    for (let attempt = 0; attempt < 50; attempt++) {
      if ((await rawRequest(gateway.url, 'GET', path)).headers['x-cache'] === 'HIT') return;
    }
    throw new Error(`${path} was not served from the cache in 50 reads`);
  };
  await fc.assert(
    fc.asyncProperty(spelling, fc.constantFrom('PATCH', 'PUT', 'DELETE', 'POST'), fc.nat({ max: 1000 }), async (spell, method, stock) => {
      const target = spell();
      count(target);
      tally.writes++;
      const touched = gatewayTouches(target);
      const item = touched?.id ?? [...existing][0]!;
      await settle(`/api/products/${item}`);
      await settle(list);

      const body = method === 'PATCH' ? { stock } : method === 'DELETE' ? undefined : { ...newProduct(), stock };
      const headers = method === 'PATCH' ? { 'content-type': 'application/merge-patch+json' } : undefined;
      const written = await rawRequest(gateway.url, method, target, { json: body, headers });
      if (written.status === 201) existing.add(written.body.id);

      for (const path of [`/api/products/${item}`, list]) {
        const cached = await rawRequest(gateway.url, 'GET', path);
        const fresh = await rawRequest(products.url, 'GET', path);
        expect({ target, method, path, status: cached.status, body: cached.body }).toEqual({ target, method, path, status: fresh.status, body: fresh.body });
      }
      if ((await rawRequest(products.url, 'GET', `/api/products/${item}`)).status === 404) {
        existing.delete(item);
        await createProduct();
      }
    }),
    { numRuns: 100 },
  );
});

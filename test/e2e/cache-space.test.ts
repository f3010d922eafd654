/**
 * How much of Redis one client's reads can take (docs/architecture.md, "The cache"): a page over
 * CACHE_MAX_ENTRY_BYTES is answered whole, as the service sent it, and never stored; and each
 * caller, a subject or an anonymous address, stores at most CACHE_CALLER_BYTES of entries, however
 * many distinct query strings it reads; past it, its reads are answered but not stored, while
 * another caller's are still stored; and a page after a cursor that names no record the caller
 * sees, however it was made up, is answered but stored nowhere. Real gateway, services and Redis.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { Redis } from 'ioredis';
import { encodeCursor } from '@app/shared/resource/rules';
import { v7 as uuidv7 } from 'uuid';
import { service as productsService } from '../../products-service/src/app.js';
import { seed } from '../../scripts/seed.js';
import { ALL_SCOPES, testToken } from '../support/auth.js';
import { client, type Client } from '../support/http.js';
import { startStack } from '../support/stack.js';

const MAX_ENTRY_BYTES = 4_096;
const CALLER_BYTES = 8_192;
const run = randomUUID().slice(0, 8);
const prefix = `space-${run}:`;

let stack: Awaited<ReturnType<typeof startStack>>;
let redis: Redis;
let as: { alice: Client; bob: Client; anonymous: Client };

beforeAll(async () => {
  // No in-memory tier (bounded by CACHE_MEMORY_MB on its own): every HIT here is from Redis.
  stack = await startStack({ cache: { keyPrefix: prefix, maxEntryBytes: MAX_ENTRY_BYTES, callerBytes: CALLER_BYTES, memoryBytes: 0 }, guard: { publicReads: ['products'] } });
  await seed({ databaseUrl: stack.products.databaseUrl, service: productsService, rows: 200 });
  redis = new Redis(process.env.TEST_REDIS_URL!, { lazyConnect: true });
  as = {
    alice: client(stack.gateway.url, { token: await testToken({ subject: `alice-${run}`, scopes: ALL_SCOPES }) }),
    bob: client(stack.gateway.url, { token: await testToken({ subject: `bob-${run}`, scopes: ALL_SCOPES }) }),
    anonymous: client(stack.gateway.url, { token: null }),
  };
  for (let n = 0; n < 25; n++) expect((await as.alice.post('/api/users', { email: `space-${run}-${n}@example.com`, name: `Space ${n}` })).status).toBe(201);
});
afterAll(async () => {
  redis.disconnect();
  await stack.close();
});

/** One GET through the gateway: status, headers and the bytes as they came over the wire (nothing decoded). */
function rawGet(path: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    http
      .get(`${stack.gateway.url}${path}`, { headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.once('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      })
      .once('error', reject);
  });
}

/** Whether `path` becomes a HIT for `api` (its entry is stored just after the miss's response), within about half a second. */
async function becomesHit(api: Client, path: string): Promise<boolean> {
  for (let attempt = 0; attempt < 25; attempt++) {
    if ((await api.get(path)).headers.get('x-cache') === 'HIT') return true;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return false;
}

/** The cache entries Redis holds under `pattern` (after this run's prefix), and their bytes. */
async function stored(pattern: string): Promise<{ keys: string[]; bytes: number }> {
  const keys = await redis.keys(`${prefix}${pattern}`);
  const sizes = await Promise.all(keys.map((key) => redis.strlen(key)));
  return { keys, bytes: sizes.reduce((sum, size) => sum + size, 0) };
}

/**
 * Reads `paths` in turn as `api`, each until it is a HIT or clearly is not stored; returns how many
 * were stored before the first that was not, and that one.
 */
async function readUntilRefused(api: Client, paths: string[]): Promise<{ storedCount: number; refused: string }> {
  for (const [i, path] of paths.entries()) {
    expect((await api.get(path)).status).toBe(200);
    if (!(await becomesHit(api, path))) return { storedCount: i, refused: path };
  }
  throw new Error(`all ${paths.length} pages were stored: the budget never stopped them`);
}

describe('a page over CACHE_MAX_ENTRY_BYTES', () => {
  it('is answered whole, as the service sent it (not compressed), and leaves nothing in Redis', async () => {
    const path = '/api/products?limit=200';
    // Cookie: the cache takes no part, so this is the service's own answer.
    const fromService = await rawGet(path, { cookie: 'space-test=1' });
    expect(fromService.headers['x-cache']).toBe('BYPASS');
    for (const attempt of [1, 2]) {
      const read = await rawGet(path, { 'accept-encoding': 'br, gzip' });
      expect({ attempt, status: read.status, cache: read.headers['x-cache'], coding: read.headers['content-encoding'] }).toEqual({ attempt, status: 200, cache: 'MISS', coding: undefined });
      expect(read.body.length).toBeGreaterThan(MAX_ENTRY_BYTES);
      expect(Number(read.headers['content-length'])).toBe(read.body.length);
      expect(read.body.equals(fromService.body)).toBe(true);
      expect(JSON.parse(read.body.toString()).items).toHaveLength(200);
    }
    expect((await stored('c:{products}:limit=200*')).keys).toEqual([]);
  });

  it('leaves a page under it cached as ever', async () => {
    expect((await as.anonymous.get('/api/products?limit=1')).status).toBe(200);
    expect(await becomesHit(as.anonymous, '/api/products?limit=1')).toBe(true);
  });
});

describe('CACHE_CALLER_BYTES', () => {
  const pages = (resource: string) => Array.from({ length: 20 }, (_, n) => `/api/${resource}?limit=${n + 2}`);

  it("stops storing a subject's distinct pages past its budget, and Redis holds no more; another subject's are still stored", async () => {
    const { storedCount, refused } = await readUntilRefused(as.alice, pages('users'));
    expect(storedCount).toBeGreaterThan(0);
    const held = await stored(`c:{users}:* alice-${run}`);
    expect(held.keys).toHaveLength(storedCount);
    expect(held.bytes).toBeLessThanOrEqual(CALLER_BYTES);
    // Past the budget, further pages are answered and not stored either.
    const later = pages('users').slice(storedCount + 1, storedCount + 3);
    for (const path of [refused, ...later]) expect(await becomesHit(as.alice, path)).toBe(false);
    expect((await stored(`c:{users}:* alice-${run}`)).keys).toHaveLength(storedCount);
    // Bob's budget is his own.
    expect((await as.bob.get(refused)).headers.get('x-cache')).toBe('MISS');
    expect(await becomesHit(as.bob, refused)).toBe(true);
  });

  it('charges a refill after a write only for what it adds, and keeps its key\'s expiry', async () => {
    const dave = client(stack.gateway.url, { token: await testToken({ subject: `dave-${run}`, scopes: ALL_SCOPES }) });
    const created = await dave.post('/api/users', { email: `dave-${run}@example.com`, name: 'Dave' });
    expect(created.status).toBe(201);
    const path = '/api/users?limit=10';
    const entryKey = `${prefix}c:{users}:limit=10 dave-${run}`;
    const spent = async () => Number(await redis.get(`${prefix}cs:sub:dave-${run}`));
    expect(await becomesHit(dave, path)).toBe(true);
    const [spentBefore, bytesBefore, expiryBefore] = [await spent(), await redis.strlen(entryKey), await redis.pttl(entryKey)];
    expect(spentBefore).toBe(bytesBefore);
    // As many bytes after the write, give or take a digit: the refill replaces the entry.
    expect((await dave.patch(created.headers.get('location')!, { name: 'Evad' })).status).toBe(200);
    expect((await dave.get(path)).headers.get('x-cache')).toBe('MISS');
    expect(await becomesHit(dave, path)).toBe(true);
    expect((await dave.get(path)).body.items[0].name).toBe('Evad');
    expect(await spent()).toBe(spentBefore + Math.max(0, (await redis.strlen(entryKey)) - bytesBefore));
    expect(await redis.pttl(entryKey)).toBeLessThanOrEqual(expiryBefore);
  });

  it("bounds an anonymous caller's public reads too, by its address", async () => {
    const { storedCount } = await readUntilRefused(as.anonymous, pages('products'));
    expect(storedCount).toBeGreaterThan(0);
    // Every products entry here was stored by this one address (limit=1 above included).
    expect((await stored('c:{products}:*')).bytes).toBeLessThanOrEqual(CALLER_BYTES);
  });
});

describe('a page after a cursor', () => {
  it('is stored after a cursor the API returned, never after one naming no record the caller sees', async () => {
    const [erin, frank] = await Promise.all([`erin-${run}`, `frank-${run}`].map(async (subject) => client(stack.gateway.url, { token: await testToken({ subject, scopes: ALL_SCOPES }) })));
    for (const n of [1, 2]) expect((await erin!.post('/api/users', { email: `erin-${run}-${n}@example.com`, name: `Erin ${n}` })).status).toBe(201);
    const franks = await frank!.post('/api/users', { email: `frank-${run}@example.com`, name: 'Frank' });
    expect(franks.status).toBe(201);
    const issued = (await erin!.get('/api/users?limit=1')).body.nextCursor as string;
    // Made up (a UUIDv7 no record has), and another owner's record: users are seen only by their owner.
    const unseen = [encodeCursor(uuidv7()), encodeCursor(franks.body.id as string)];
    const page = (cursor: string) => `/api/users?limit=1&cursor=${cursor}`;
    const readUnseen = async () => {
      const reads = [];
      for (const cursor of unseen) {
        const read = await erin!.get(page(cursor));
        reads.push({ cursor, status: read.status, cache: read.headers.get('x-cache'), cacheControl: read.headers.get('cache-control') });
      }
      return reads;
    };
    const first = await readUnseen();
    expect((await erin!.get(page(issued))).headers.get('x-cache')).toBe('MISS');
    // Stored just after its miss's response, as any unseen page's would have been, and longer ago.
    expect(await becomesHit(erin!, page(issued))).toBe(true);
    const again = await readUnseen();
    expect([...first, ...again]).toEqual([...unseen, ...unseen].map((cursor) => ({ cursor, status: 200, cache: 'MISS', cacheControl: 'no-store' })));
    const held = await Promise.all([issued, ...unseen].map(async (cursor) => (await stored(`c:{users}:*${cursor}* erin-${run}`)).keys.length));
    expect(held).toEqual([1, 0, 0]);
  });
});

/**
 * The cache key carries everything that changes the answer (docs/architecture.md, "The cache"): an
 * admin's read of an "owner": "all" service sees every owner's records, so it is never cached
 * (BYPASS): the same subject without the admin scope never shares an entry with it, and nothing an
 * admin token read (however it is revoked later) is served to anyone. Real gateway with its cache,
 * users service and Redis.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { testToken } from '../support/auth.js';
import { client, type Client } from '../support/http.js';
import { startStack } from '../support/stack.js';

const run = randomUUID().slice(0, 8);
const carol = `carol-${run}`;
const mallory = `mallory-${run}`;

let stack: Awaited<ReturnType<typeof startStack>>;
/** Carol with and without users:admin (one subject), and Mallory, another owner. */
let as: { carolAdmin: Client; carol: Client; mallory: Client };
let mallorysLocation: string;
let carolsId: string;

beforeAll(async () => {
  stack = await startStack({ cache: {} });
  as = {
    carolAdmin: client(stack.gateway.url, { token: await testToken({ subject: carol, scopes: ['users:read', 'users:write', 'users:admin'] }) }),
    carol: client(stack.gateway.url, { token: await testToken({ subject: carol, scopes: ['users:read', 'users:write'] }) }),
    mallory: client(stack.gateway.url, { token: await testToken({ subject: mallory, scopes: ['users:read', 'users:write'] }) }),
  };
  const mallorys = await as.mallory.post('/api/users', { email: `mallory-${run}@example.com`, name: 'Mallory' });
  const carols = await as.carol.post('/api/users', { email: `carol-${run}@example.com`, name: 'Carol' });
  expect([mallorys.status, carols.status]).toEqual([201, 201]);
  mallorysLocation = mallorys.headers.get('location')!;
  carolsId = carols.body.id as string;
});
afterAll(() => stack.close());

const ids = (page: { body: { items: { id: string }[] } }) => page.body.items.map(({ id }) => id);

it("never caches an admin's reads: the same subject without the admin scope is never answered from them", async () => {
  const paths = [mallorysLocation, `/api/users?owner=${mallory}`, '/api/users?limit=200'];
  const adminReads: { path: string; status: number; cache: string | null }[] = [];
  for (const path of paths) {
    for (let attempt = 0; attempt < 2; attempt++) {
      const read = await as.carolAdmin.get(path);
      adminReads.push({ path, status: read.status, cache: read.headers.get('x-cache') });
    }
  }
  // Nothing of the admin's reads is in Redis for anyone to be served later, its token revoked or not.
  const redis = new Redis(process.env.TEST_REDIS_URL!);
  try {
    expect(await redis.keys(`${process.env.TEST_REDIS_KEY_PREFIX ?? ''}c:{users* ${carol}`)).toEqual([]);
  } finally {
    redis.disconnect();
  }
  // Carol without the scope: her own answers, fetched for her, not the admin's.
  const [record, byOwner, all] = await Promise.all(paths.map((path) => as.carol.get(path)));
  expect([record, byOwner, all].map((read) => read!.headers.get('x-cache'))).toEqual(['MISS', 'MISS', 'MISS']);
  expect(record!.status).toBe(404);
  expect(byOwner!.status === 403 || byOwner!.body.items.length === 0).toBe(true);
  expect(ids(all!)).toEqual([carolsId]);
  expect(adminReads).toEqual(paths.flatMap((path) => [0, 1].map(() => ({ path, status: 200, cache: 'BYPASS' }))));
});

it('answers the admin from the service, never from the entry its subject has cached without the scope', async () => {
  const path = '/api/users?limit=100';
  expect((await as.carol.get(path)).headers.get('x-cache')).toBe('MISS');
  // The entry is stored just after the miss's response.
  let cached = await as.carol.get(path);
  for (let attempt = 0; attempt < 50 && cached.headers.get('x-cache') !== 'HIT'; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    cached = await as.carol.get(path);
  }
  expect(cached.headers.get('x-cache')).toBe('HIT');
  expect(ids(cached)).toEqual([carolsId]);
  const asAdmin = await as.carolAdmin.get(path);
  expect(asAdmin.headers.get('x-cache')).toBe('BYPASS');
  expect(ids(asAdmin)).toEqual(expect.arrayContaining([carolsId, mallorysLocation.split('/').pop()]));
});

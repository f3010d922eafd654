/**
 * Each service's cache lifetime, from its entry in services.json (the gateway's CACHE_TTL_SECONDS
 * and CACHE_STALE_SECONDS are only the defaults): at one moment on the gateway's clock, one
 * service's entry is still fresh while another's has expired. Real gateway, services and Redis.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SERVICES_FILE } from '@app/shared/platform/services';
import { client, type Client } from '../support/http.js';
import { resourceCases } from '../support/resource-case.js';
import { startGateway, startProductsService, startUsersService, type RunningGateway, type RunningService } from '../support/stack.js';

/** Users' entries are fresh for 30 s, products' for 120 s; the gateway's default (60 s) is neither. */
const LIFETIMES: Record<string, { ttlSeconds: number; staleSeconds: number }> = { users: { ttlSeconds: 30, staleSeconds: 0 }, products: { ttlSeconds: 120, staleSeconds: 0 } };

let directory: string;
let services: RunningService[];
let gateway: RunningGateway;
let api: Client;
let clock = Date.now();
const cases = await resourceCases();

beforeAll(async () => {
  directory = await mkdtemp(path.join(tmpdir(), 'service-lifetimes-'));
  const declared = JSON.parse(await readFile(SERVICES_FILE, 'utf8')) as { services: { name: string }[] };
  const servicesFile = path.join(directory, 'services.json');
  await writeFile(servicesFile, JSON.stringify({ services: declared.services.map((entry) => ({ ...entry, cache: LIFETIMES[entry.name] })) }));
  const [users, products] = (services = await Promise.all([startUsersService(), startProductsService()]));
  gateway = await startGateway({ upstreams: { users: users!.url, products: products!.url }, cache: { ttlSeconds: 60, staleSeconds: 300, now: () => clock }, servicesFile });
  api = client(gateway.url);
});
afterAll(async () => {
  await gateway.close();
  await Promise.all(services.map((service) => service.close()));
  await rm(directory, { recursive: true, force: true });
});

/** GETs `location` until the cache answers it (the entry is stored just after the miss's response). */
async function untilHit(location: string) {
  for (let attempt = 0; attempt < 50; attempt++) {
    if ((await api.get(location)).headers.get('x-cache') === 'HIT') return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`${location} never became a cache hit`);
}

it("serves each service's entries for that service's lifetime: at one moment one is a HIT, the other a MISS", async () => {
  const locations: Record<string, string> = {};
  for (const { name, path: collection, valid } of cases) {
    // A number no other suite's records use, small enough for every field it goes into.
    const created = await api.post(collection, valid(10_000 + Math.floor(Math.random() * 90_000)));
    expect(created.status).toBe(201);
    locations[name] = created.headers.get('location')!;
    await untilHit(locations[name]);
  }
  const cacheOf = async (name: string) => {
    const read = await api.get(locations[name]!);
    return { status: read.status, cache: read.headers.get('x-cache'), age: read.headers.get('age') };
  };
  // 45 s on: past the users' 30 s and short of the default 60 s; the products' 120 s still hold.
  clock += 45_000;
  expect({ users: await cacheOf('users'), products: await cacheOf('products') }).toEqual({
    users: { status: 200, cache: 'MISS', age: null },
    products: { status: 200, cache: 'HIT', age: '45' },
  });
  // 90 s on: past the default, not the products' lifetime.
  clock += 45_000;
  expect(await cacheOf('products')).toEqual({ status: 200, cache: 'HIT', age: '90' });
});

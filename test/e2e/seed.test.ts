/**
 * `npm run seed`: the rows it generates in SQL are rows the API serves like its own: valid UUIDv7
 * ids in creation order, unique skus and emails, exact prices, every one reachable by id, by filter
 * and by walking the pages.
 */
import { UUID_V7 } from '@app/shared/platform/request-target';
import { seed } from '../../scripts/seed.js';
import { service as productsService } from '../../products-service/src/app.js';
import { service as usersService } from '../../users-service/src/app.js';
import { client, type Client } from '../support/http.js';
import { serviceModules } from '../../tools/services.js';
import { startProductsService, startService, startUsersService, type RunningService } from '../support/stack.js';

const ROWS = 1_234;

describe('seed', () => {
  let products: RunningService;
  let users: RunningService;
  let productsApi: Client;
  let usersApi: Client;

  beforeAll(async () => {
    [products, users] = await Promise.all([startProductsService(), startUsersService()]);
    productsApi = client(products.url);
    usersApi = client(users.url);
    await seed({ databaseUrl: products.databaseUrl, service: productsService, rows: ROWS });
    await seed({ databaseUrl: users.databaseUrl, service: usersService, rows: ROWS });
  });
  afterAll(() => Promise.all([products.close(), users.close()]));

  it('adds products that every page walk returns once, in id order with increasing creation times', async () => {
    const seen: { id: string; createdAt: string; sku: string }[] = [];
    let cursor: string | null = null;
    do {
      const page = await productsApi.get(`/api/products?limit=200${cursor ? `&cursor=${cursor}` : ''}`);
      expect(page.status).toBe(200);
      seen.push(...page.body.items);
      cursor = page.body.nextCursor;
    } while (cursor);
    expect(seen).toHaveLength(ROWS);
    expect(new Set(seen.map((p) => p.sku)).size).toBe(ROWS);
    for (const product of seen) expect(product.id).toMatch(UUID_V7);
    for (let i = 1; i < seen.length; i++) {
      expect(seen[i]!.id > seen[i - 1]!.id).toBe(true);
      expect(Date.parse(seen[i]!.createdAt)).toBeGreaterThan(Date.parse(seen[i - 1]!.createdAt));
    }
    expect(Date.parse(seen.at(-1)!.createdAt)).toBeLessThanOrEqual(Date.now());
  });

  it('adds products the API reads by id and by sku, and writes to like its own', async () => {
    const [first] = (await productsApi.get('/api/products?limit=1')).body.items;
    const read = await productsApi.get(`/api/products/${first.id}`);
    expect(read.status).toBe(200);
    expect(read.body).toEqual(first);
    expect(first.price.amount).toMatch(/^\d+\.\d{2}$/);
    expect((await productsApi.get(`/api/products?sku=${first.sku}`)).body.items).toEqual([first]);
    const patched = await productsApi.patch(`/api/products/${first.id}`, { stock: 7 }, { headers: { 'if-match': '"1"' } });
    expect(patched.status).toBe(200);
    const [row] = await products.db.query('SELECT LOWER(HEX(MAX(id))) AS lastSeeded FROM products');
    const lastSeeded = row?.lastSeeded as string;
    const created = await productsApi.post('/api/products', { sku: 'AFTER-SEED', name: 'Made after', price: { amount: '1.00', currency: 'EUR' } });
    expect(created.status).toBe(201);
    // An id the service makes afterwards sorts after every seeded one.
    expect(created.body.id.replaceAll('-', '') > lastSeeded).toBe(true);
  });

  it('adds users with unique emails that ?email= finds ignoring case', async () => {
    const page = await usersApi.get('/api/users?limit=200');
    expect(page.body.items).toHaveLength(200);
    const [user] = page.body.items;
    expect(user.id).toMatch(UUID_V7);
    const found = await usersApi.get(`/api/users?email=${encodeURIComponent(user.email.toUpperCase())}`);
    expect(found.body.items).toEqual([user]);
    const duplicate = await usersApi.post('/api/users', { email: user.email, name: 'Someone else' });
    expect(duplicate.status).toBe(409);
  });
});

/** Every service in services.json that says how to seed it, a scaffolded one included. */
const seeded = (await serviceModules('src')).filter(({ service }) => service.seed);

describe.each(seeded.map((module) => [module.entry.name, module] as const))('seed of %s', (_name, { entry, service, createApp }) => {
  let running: RunningService;
  beforeAll(async () => {
    running = await startService(service, createApp);
    await seed({ databaseUrl: running.databaseUrl, service, rows: 250 });
  });
  afterAll(() => running.close());

  it('adds rows its API lists once each, in id order, and reads by id', async () => {
    const api = client(running.url);
    const seen: { id: string }[] = [];
    let cursor: string | null = null;
    do {
      const page = await api.get(`${entry.prefix}?limit=100${cursor ? `&cursor=${cursor}` : ''}`);
      expect(page.status).toBe(200);
      seen.push(...page.body.items);
      cursor = page.body.nextCursor;
    } while (cursor);
    expect(seen.map(({ id }) => id)).toEqual(seen.map(({ id }) => id).sort());
    expect(new Set(seen.map(({ id }) => id)).size).toBe(250);
    for (const item of [seen[0]!, seen.at(-1)!]) {
      expect(item.id).toMatch(UUID_V7);
      expect((await api.get(`${entry.prefix}/${item.id}`)).body).toEqual(item);
    }
  });
});

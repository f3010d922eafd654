/**
 * Who may see what, through the gateway with its cache on, for users (services.json: "owner":
 * "all"): each caller sees and changes only the records it created; another owner's record is a
 * 404 for every method (its existence is not revealed) and stays unchanged, warm cache or not;
 * `users:admin` sees every record, lists by `?owner=` and creates on another's behalf. Products
 * ("owner": "none") stay as they were: anyone with the scopes reads and changes any of them.
 */
import { randomUUID } from 'node:crypto';
import { testToken } from '../support/auth.js';
import { client, expectProblem, type Client } from '../support/http.js';
import { startStack } from '../support/stack.js';

let stack: Awaited<ReturnType<typeof startStack>>;
const run = randomUUID().slice(0, 8);
const alice = `alice-${run}`;
const mallory = `mallory-${run}`;
let as: { alice: Client; mallory: Client; admin: Client };
let alicesUser: string;
let mallorysUser: string;

const email = (who: string) => `${who}@example.com`;

beforeAll(async () => {
  stack = await startStack({ cache: {} });
  const scopes = ['users:read', 'users:write', 'products:read', 'products:write'];
  as = {
    alice: client(stack.gateway.url, { token: await testToken({ subject: alice, scopes }) }),
    mallory: client(stack.gateway.url, { token: await testToken({ subject: mallory, scopes }) }),
    admin: client(stack.gateway.url, { token: await testToken({ subject: `admin-${run}`, scopes: ['users:admin'] }) }),
  };
  alicesUser = (await as.alice.post('/api/users', { email: email(alice), name: 'Alice' })).headers.get('location')!;
  mallorysUser = (await as.mallory.post('/api/users', { email: email(mallory), name: 'Mallory' })).headers.get('location')!;
});
afterAll(() => stack.close());

describe('users: every record seen only by its owner', () => {
  it("names its owner: the subject of the token that created it", async () => {
    expect((await as.alice.get(alicesUser)).body).toMatchObject({ email: email(alice), owner: alice });
  });

  it("lists only the caller's own records", async () => {
    const page = await as.mallory.get('/api/users?limit=200');
    expect(page.status).toBe(200);
    expect(page.body.items.map(({ owner }: { owner: string }) => owner)).toEqual([mallory]);
    // Naming another owner finds nothing of theirs.
    expect((await as.mallory.get(`/api/users?owner=${alice}`)).body.items).toEqual([]);
  });

  it("answers 404 to another caller's GET, PUT, PATCH and DELETE, and leaves the record as it was, even with it cached", async () => {
    // Alice's read, twice: her entry is cached (a HIT) before Mallory asks.
    await as.alice.get(alicesUser);
    const before = await as.alice.get(alicesUser);
    expect(before.headers.get('x-cache')).toBe('HIT');
    const attempts = [
      await as.mallory.get(alicesUser),
      await as.mallory.get(alicesUser),
      await as.mallory.put(alicesUser, { email: email(mallory + '-2'), name: 'Mallory was here' }),
      await as.mallory.patch(alicesUser, { name: 'Mallory was here' }),
      await as.mallory.delete(alicesUser),
    ];
    for (const response of attempts) {
      expectProblem(response, 404, 'not-found');
      expect(response.headers.get('x-cache')).not.toBe('HIT');
    }
    const after = await as.alice.get(alicesUser);
    expect({ status: after.status, etag: after.headers.get('etag'), body: after.body }).toEqual({ status: 200, etag: before.headers.get('etag'), body: before.body });
  });

  it('lets users:admin read and change every record, list by owner, and create for another owner', async () => {
    const byOwner = async (owner: string) => (await as.admin.get(`/api/users?owner=${owner}`)).body.items.map(({ email }: { email: string }) => email);
    expect(await byOwner(alice)).toEqual([email(alice)]);
    expect(await byOwner(mallory)).toEqual([email(mallory)]);
    expect((await as.admin.get(mallorysUser)).status).toBe(200);
    expect((await as.admin.patch(mallorysUser, { name: 'Renamed by an admin' })).body).toMatchObject({ name: 'Renamed by an admin', owner: mallory });
    const bob = `bob-${run}`;
    const created = await as.admin.post(`/api/users?owner=${bob}`, { email: email(bob), name: 'Bob' });
    expect(created.status).toBe(201);
    expect(created.body.owner).toBe(bob);
  });

  it('refuses (403) a caller that is no admin creating a record for another owner', async () => {
    expectProblem(await as.mallory.post(`/api/users?owner=${alice}`, { email: email(`${mallory}-x`), name: 'X' }), 403, 'not-owner');
    expect((await as.mallory.post(`/api/users?owner=${mallory}`, { email: email(`${mallory}-y`), name: 'Y' })).body.owner).toBe(mallory);
  });
});

describe('products: no owner decides who sees or changes them', () => {
  it("lets another caller read and change a product, and does not show who created it", async () => {
    const created = await as.alice.post('/api/products', { sku: `OWN-${run}`, name: 'Shared', price: { amount: '1.00', currency: 'EUR' } });
    const product = created.headers.get('location')!;
    expect(created.body).not.toHaveProperty('owner');
    expect((await as.mallory.get(product)).status).toBe(200);
    expect((await as.mallory.patch(product, { name: 'Changed by another' })).status).toBe(200);
  });
});

/**
 * Who may see and change what, through the gateway with its cache on, for every service in
 * services.json by its "owner" (docs/api.md, "Who may see what"), with each service's own bodies
 * (<service>/test/api-case.ts):
 * - "all": each caller sees and changes only the records it created. Another owner's record is a 404
 *   for GET, PUT, PATCH and DELETE (its existence is not revealed) and stays unchanged, even while
 *   its owner's read of it is cached: no caller is answered from another's cached copy. A list
 *   holds only the caller's records.
 * - "writes": every caller reads and lists every record, but only its owner changes it: another
 *   caller's PUT, PATCH and DELETE are a 403 `not-owner` and leave it unchanged. Its cached copy
 *   may be shared: another caller reads it after its owner's read was cached.
 * - "none": anyone with the scopes reads and changes any record, and no representation shows who
 *   created it.
 * Where ownership decides ("all", "writes"), a record names its owner (the subject that created
 * it); `<name>:admin` sees and changes every record, lists by `?owner=` and creates one for another
 * owner, which anyone else is refused (403 `not-owner`).
 */
import { randomUUID } from 'node:crypto';
import { readServiceList } from '@app/shared/platform/services';
import { ownershipOf } from '@app/shared/platform/services';
import { ALL_SCOPES, testToken } from '../support/auth.js';
import { client, expectProblem, type Client, type TestResponse } from '../support/http.js';
import { resourceCases } from '../support/resource-case.js';
import { startStack } from '../support/stack.js';

// Every service in services.json, with its ownership.
const cases = (await resourceCases()).map((resource) => ({ ...resource, ownership: ownershipOf(resource.name) }));

let stack: Awaited<ReturnType<typeof startStack>>;
const run = randomUUID().slice(0, 8);
const alice = `alice-${run}`;
const mallory = `mallory-${run}`;
let as: { alice: Client; mallory: Client; admin: Client };

// Unique fields stay unique across bodies, and across reruns on the same schemas.
let counter = Math.floor(Math.random() * 1_000_000_000);
const next = () => ++counter;

beforeAll(async () => {
  stack = await startStack({ cache: {} });
  // Alice and Mallory may read and write every service; the admin is every service's admin, and nothing else.
  const adminScopes = readServiceList().map(({ scopes }) => scopes.admin);
  as = {
    alice: client(stack.gateway.url, { token: await testToken({ subject: alice, scopes: ALL_SCOPES }) }),
    mallory: client(stack.gateway.url, { token: await testToken({ subject: mallory, scopes: ALL_SCOPES }) }),
    admin: client(stack.gateway.url, { token: await testToken({ subject: `admin-${run}`, scopes: adminScopes }) }),
  };
});
afterAll(() => stack.close());

/** A response's status, ETag and body, to compare a record before and after. */
const stateOf = (response: TestResponse) => ({ status: response.status, etag: response.headers.get('etag'), body: response.body });

/**
 * A read the gateway's cache never answers (one with a Cookie, docs/api.md): the record as the
 * service holds it. A refused write (a 4xx) leaves the cached copy in place, so only this shows
 * that the refused write changed nothing.
 */
const uncached = { headers: { cookie: 'ownership-test=1' } };

/** Asserts the record at `location` is as `before` showed it, in the cache and at the service. */
async function expectUnchanged(api: Client, location: string, before: TestResponse) {
  const fromService = await api.get(location, uncached);
  expect(fromService.headers.get('x-cache')).not.toBe('HIT');
  for (const after of [await api.get(location), fromService]) expect(stateOf(after)).toEqual(stateOf(before));
}

describe.each(cases)('$name ("owner": "$ownership")', (resource) => {
  const { path, ownership, patch } = resource;
  const ids = (page: TestResponse) => page.body.items.map(({ id }: { id: string }) => id);
  // A record of Alice's and one of Mallory's: the location of each, and Alice's body and creation.
  let alicesBody: Record<string, unknown>;
  let alicesCreation: TestResponse;
  let alices: string;
  let mallorys: string;
  let alicesId: string;
  let mallorysId: string;

  beforeAll(async () => {
    alicesBody = resource.valid(next());
    alicesCreation = await as.alice.post(path, alicesBody);
    const mallorysCreation = await as.mallory.post(path, resource.valid(next()));
    for (const created of [alicesCreation, mallorysCreation]) expect(created.status).toBe(201);
    [alices, mallorys] = [alicesCreation, mallorysCreation].map((created) => created.headers.get('location')!) as [string, string];
    [alicesId, mallorysId] = [alicesCreation, mallorysCreation].map((created) => created.body.id as string) as [string, string];
  });

  if (ownership !== 'none') {
    it('names its owner: the subject of the token that created it', async () => {
      expect((await as.alice.get(alices)).body).toMatchObject({ ...resource.echoed(alicesBody), id: alicesId, owner: alice });
    });
  }

  if (ownership === 'all') {
    it("lists only the caller's own records", async () => {
      const page = await as.mallory.get(`${path}?limit=200`);
      expect(page.status).toBe(200);
      expect(ids(page)).toEqual([mallorysId]);
      expect(page.body.items.map(({ owner }: { owner: string }) => owner)).toEqual([mallory]);
      // Naming another owner finds nothing of theirs.
      expect((await as.mallory.get(`${path}?owner=${alice}`)).body.items).toEqual([]);
    });

    it("answers 404 to another caller's GET, PUT, PATCH and DELETE, and leaves the record as it was, even with it cached", async () => {
      // Alice's read, twice: her entry is cached (a HIT) before Mallory asks.
      await as.alice.get(alices);
      const before = await as.alice.get(alices);
      expect({ status: before.status, cache: before.headers.get('x-cache') }).toEqual({ status: 200, cache: 'HIT' });
      const attempts = [
        await as.mallory.get(alices),
        await as.mallory.get(alices),
        await as.mallory.put(alices, resource.valid(next())),
        await as.mallory.patch(alices, patch.body),
        await as.mallory.delete(alices),
      ];
      for (const response of attempts) {
        expectProblem(response, 404, 'not-found');
        expect(response.headers.get('x-cache')).not.toBe('HIT');
      }
      await expectUnchanged(as.alice, alices, before);
    });

    it(`lets ${resource.name}:admin read and change every record, and list them all or by owner`, async () => {
      expect(ids(await as.admin.get(`${path}?limit=200`))).toEqual(expect.arrayContaining([alicesId, mallorysId]));
      expect(ids(await as.admin.get(`${path}?owner=${alice}`))).toEqual([alicesId]);
      expect(ids(await as.admin.get(`${path}?owner=${mallory}`))).toEqual([mallorysId]);
      expect((await as.admin.get(mallorys)).status).toBe(200);
      const patched = await as.admin.patch(mallorys, patch.body);
      expect(patched.status).toBe(200);
      expect(patched.body).toMatchObject({ ...patch.expected, id: mallorysId, owner: mallory });
    });
  }

  if (ownership === 'writes') {
    it('lets another caller read and list every record', async () => {
      const read = await as.mallory.get(alices);
      expect(read.status).toBe(200);
      expect(read.body).toMatchObject({ id: alicesId, owner: alice });
      expect(ids(await as.mallory.get(`${path}?limit=200`))).toEqual(expect.arrayContaining([alicesId, mallorysId]));
      expect(ids(await as.mallory.get(`${path}?owner=${alice}`))).toEqual([alicesId]);
    });

    it("answers 403 not-owner to another caller's PUT, PATCH and DELETE, and leaves the record as it was", async () => {
      const before = await as.alice.get(alices);
      expect(before.status).toBe(200);
      const attempts = [await as.mallory.put(alices, resource.valid(next())), await as.mallory.patch(alices, patch.body), await as.mallory.delete(alices)];
      for (const response of attempts) expectProblem(response, 403, 'not-owner');
      await expectUnchanged(as.alice, alices, before);
    });

    it('lets its owner change it', async () => {
      const patched = await as.alice.patch(alices, patch.body);
      expect(patched.status).toBe(200);
      expect(patched.body).toMatchObject({ ...patch.expected, id: alicesId, owner: alice });
    });

    it(`lets ${resource.name}:admin change another owner's record, which keeps its owner`, async () => {
      const replacement = resource.valid(next());
      const replaced = await as.admin.put(mallorys, replacement);
      expect(replaced.status).toBe(200);
      expect(replaced.body).toMatchObject({ ...resource.echoed(replacement), id: mallorysId, owner: mallory });
      expect(ids(await as.admin.get(`${path}?owner=${mallory}`))).toEqual([mallorysId]);
    });

    it("serves another caller the record its owner's read cached", async () => {
      await as.alice.get(alices);
      const cached = await as.alice.get(alices);
      expect({ status: cached.status, cache: cached.headers.get('x-cache') }).toEqual({ status: 200, cache: 'HIT' });
      const read = await as.mallory.get(alices);
      expect(stateOf(read)).toEqual(stateOf(cached));
    });
  }

  if (ownership !== 'none') {
    it(`lets ${resource.name}:admin create a record for another owner`, async () => {
      const bob = `bob-${run}`;
      const created = await as.admin.post(`${path}?owner=${bob}`, resource.valid(next()));
      expect(created.status).toBe(201);
      expect(created.body.owner).toBe(bob);
      expect(ids(await as.admin.get(`${path}?owner=${bob}`))).toEqual([created.body.id]);
    });

    it('refuses (403) a caller that is no admin creating a record for another owner', async () => {
      expectProblem(await as.mallory.post(`${path}?owner=${alice}`, resource.valid(next())), 403, 'not-owner');
      expect(ids(await as.admin.get(`${path}?owner=${alice}`))).toEqual([alicesId]);
      expect((await as.mallory.post(`${path}?owner=${mallory}`, resource.valid(next()))).body.owner).toBe(mallory);
    });
  }

  if (ownership === 'none') {
    it('lets another caller read and change a record, and does not show who created it', async () => {
      expect(alicesCreation.body).not.toHaveProperty('owner');
      const read = await as.mallory.get(alices);
      expect(read.status).toBe(200);
      expect(read.body).not.toHaveProperty('owner');
      const page = await as.mallory.get(`${path}?limit=200`);
      expect(ids(page)).toEqual(expect.arrayContaining([alicesId, mallorysId]));
      for (const item of page.body.items) expect(item).not.toHaveProperty('owner');
      const patched = await as.mallory.patch(alices, patch.body);
      expect(patched.status).toBe(200);
      expect(patched.body).toMatchObject(patch.expected);
      expect(patched.body).not.toHaveProperty('owner');
      expect((await as.mallory.delete(alices)).status).toBe(204);
      expectProblem(await as.alice.get(alices), 404, 'not-found');
    });
  }
});

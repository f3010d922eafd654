import type { HttpProblem } from '@app/shared/platform/problem';
import { ownershipOf } from '@app/shared/platform/services';
import { accessOf, UNRESTRICTED, type Access } from '@app/shared/resource/ownership';
import { representation, ResourceService, type ResourceStore, type Stored } from '@app/shared/resource/rules';
import { z } from 'zod';

/**
 * Ownership in the resource engine: the access a request has, from the headers only the gateway
 * sets; and what the rules do with it on a store in memory that keeps owners as the SQL store does
 * (a list and a find restricted to an owner when asked).
 */
describe('accessOf', () => {
  const headers = (subject?: string, role?: string) => ({ ...(subject !== undefined && { 'x-auth-subject': subject }), ...(role !== undefined && { 'x-auth-role': role }) });

  it('restricts nothing without a subject (authentication off), whatever the ownership', () => {
    for (const ownership of ['none', 'writes', 'all'] as const) expect(accessOf(headers(undefined, 'admin'), ownership)).toBe(UNRESTRICTED);
    expect(accessOf(headers('%E0%A4%A'), 'all')).toBe(UNRESTRICTED);
  });

  it("restricts a caller's changes where records have owners, and its reads too where they see only their own", () => {
    expect(accessOf(headers('ada%40example.com'), 'none')).toEqual({ subject: 'ada@example.com', admin: false });
    expect(accessOf(headers('ada'), 'writes')).toEqual({ subject: 'ada', writesOf: 'ada', admin: false });
    expect(accessOf(headers('ada'), 'all')).toEqual({ subject: 'ada', readsOf: 'ada', writesOf: 'ada', admin: false });
  });

  it('restricts nothing for an admin, and only the gateway says who is one', () => {
    for (const ownership of ['none', 'writes', 'all'] as const) expect(accessOf(headers('root', 'admin'), ownership)).toEqual({ subject: 'root', admin: true });
    expect(accessOf(headers('root', 'owner'), 'all')).toMatchObject({ readsOf: 'root', admin: false });
  });
});

describe('ownershipOf', () => {
  it("reads a service's ownership from services.json by its name, and throws for a name it does not list", () => {
    expect(ownershipOf('users')).toBe('all');
    expect(ownershipOf('products')).toBe('none');
    expect(() => ownershipOf('widgets')).toThrow('services.json declares no service "widgets"');
  });
});

describe('ResourceService with owners', () => {
  const fields = z.strictObject({ name: z.string() });
  type Fields = z.infer<typeof fields>;
  const definition = { name: 'note', fields, filter: {}, example: { name: 'a' } };

  function notes() {
    const rows = new Map<string, Stored<Fields>>();
    const store: ResourceStore<Fields, object> = {
      list: async ({ owner }) => [...rows.values()].filter((row) => owner === undefined || row.owner === owner),
      find: async (id, owner) => {
        const row = rows.get(id);
        return row && (owner === undefined || row.owner === owner) ? row : undefined;
      },
      insert: async (row) => void rows.set(row.id, row),
      update: async (row, version) => rows.get(row.id)?.version === version && (rows.set(row.id, row), true),
      delete: async (id, version) => (version === undefined || rows.get(id)?.version === version) && rows.delete(id),
    };
    return { rows, service: new ResourceService(definition, store) };
  }
  const owner = (subject: string): Access => ({ subject, readsOf: subject, writesOf: subject, admin: false });
  const writer = (subject: string): Access => ({ subject, writesOf: subject, admin: false });
  const admin: Access = { subject: 'root', admin: true };
  const refusal = async (run: Promise<unknown>) => {
    try {
      await run;
    } catch (error) {
      return { status: (error as HttpProblem).status, kind: (error as HttpProblem).kind };
    }
    throw new Error('expected a problem');
  };

  it('gives a new record its creator as owner; an admin may name another, no one else may', async () => {
    const { service } = notes();
    expect((await service.create({ name: 'a' }, owner('ada'))).owner).toBe('ada');
    expect((await service.create({ name: 'b' }, owner('ada'), 'ada')).owner).toBe('ada');
    expect((await service.create({ name: 'c' }, admin, 'bob')).owner).toBe('bob');
    expect((await service.create({ name: 'd' })).owner).toBeNull();
    expect(await refusal(service.create({ name: 'e' }, owner('ada'), 'bob'))).toEqual({ status: 403, kind: 'not-owner' });
  });

  it("lists a caller's own records, and nothing when it names another owner", async () => {
    const { service } = notes();
    await service.create({ name: 'ada 1' }, owner('ada'));
    await service.create({ name: 'bob 1' }, owner('bob'));
    const names = async (query: object, access: Access) => (await service.list(query, access)).items.map(({ fields: { name } }) => name);
    expect(await names({}, owner('ada'))).toEqual(['ada 1']);
    expect(await names({ owner: 'ada' }, owner('ada'))).toEqual(['ada 1']);
    expect(await names({ owner: 'bob' }, owner('ada'))).toEqual([]);
    expect(await names({ owner: 'bob' }, admin)).toEqual(['bob 1']);
    expect(await names({}, admin)).toEqual(['ada 1', 'bob 1']);
  });

  it("answers 404 for another owner's record where only owners see them, for every method", async () => {
    const { service, rows } = notes();
    const { id } = await service.create({ name: 'ada' }, owner('ada'));
    for (const run of [service.get(id, owner('bob')), service.replace(id, { name: 'x' }, {}, owner('bob')), service.patch(id, { name: 'x' }, {}, owner('bob')), service.delete(id, {}, owner('bob'))]) {
      expect(await refusal(run)).toEqual({ status: 404, kind: 'not-found' });
    }
    expect(rows.get(id)?.fields.name).toBe('ada');
  });

  it("answers 403 to a change of another owner's record where every reader reads them; its owner and an admin change it", async () => {
    const { service, rows } = notes();
    const { id } = await service.create({ name: 'ada' }, writer('ada'));
    expect((await service.get(id, writer('bob'))).fields.name).toBe('ada');
    for (const run of [service.replace(id, { name: 'x' }, {}, writer('bob')), service.patch(id, { name: 'x' }, {}, writer('bob')), service.delete(id, {}, writer('bob'))]) {
      expect(await refusal(run)).toEqual({ status: 403, kind: 'not-owner' });
    }
    expect(rows.get(id)?.fields.name).toBe('ada');
    expect((await service.patch(id, { name: 'by ada' }, {}, writer('ada'))).fields.name).toBe('by ada');
    expect((await service.replace(id, { name: 'by root' }, {}, admin)).owner).toBe('ada');
    await service.delete(id, {}, writer('ada'));
    expect(rows.has(id)).toBe(false);
  });

  it('keeps the owner through a change, and ignores one a body names', async () => {
    const { service } = notes();
    const { id } = await service.create({ name: 'a', owner: 'mallory' }, owner('ada'));
    expect((await service.patch(id, { owner: 'mallory' }, {}, owner('ada'))).owner).toBe('ada');
    expect((await service.replace(id, { name: 'b', owner: 'mallory' }, {}, owner('ada'))).owner).toBe('ada');
  });

  it('shows the owner in the representation only when asked', async () => {
    const { service } = notes();
    const created = await service.create({ name: 'a' }, owner('ada'));
    expect(representation(created, true)).toMatchObject({ owner: 'ada' });
    expect(representation(created)).not.toHaveProperty('owner');
    expect(Object.keys(representation(created, true))).toEqual(['id', 'name', 'owner', 'createdAt', 'updatedAt']);
  });
});

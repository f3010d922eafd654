/**
 * An owner is its subject exactly (docs/api.md, "Who may see what"): subjects that differ only by a
 * space after or before, by case or by Unicode form (NFC, NFD) are different owners, in SQL as in
 * code. Against the services directly over HTTP, as the gateway calls them (X-Auth-Subject
 * percent-encoded, X-Auth-Role), one service per ownership: users as services.json declares it
 * ("all"), products as declared ("none") and as "writes". And for "all", a unique field is unique
 * within its owner: another owner may take the same email, one owner may not take it twice.
 */
import { randomUUID } from 'node:crypto';
import { ADMIN_ROLE, encodeSubject } from '@app/shared/platform/subject';
import type { Ownership } from '@app/shared/platform/ownership-policy';
import { resourceRoutes } from '@app/shared/resource/routes';
import { MySqlStore } from '@app/shared/resource/store';
import { createServiceApp, type ServiceDefinition } from '@app/shared/service';
import { productsTable } from '../../products-service/src/data/products-table.js';
import { createProductsService } from '../../products-service/src/domain/products.js';
import { service as productsService } from '../../products-service/src/app.js';
import { apiCase as productsCase } from '../../products-service/test/api-case.js';
import { createApp as createUsersApp, service as usersService } from '../../users-service/src/app.js';
import { apiCase as usersCase } from '../../users-service/test/api-case.js';
import { startService, type RunningService } from '../support/stack.js';
import type { ResourceCase } from '../support/resource-case.js';

/** products-service, its resource served with `ownership` instead of the one services.json gives it. */
function productsAs(ownership: Ownership): ServiceDefinition {
  return { ...productsService, routes: (db, idempotency) => resourceRoutes('/api/products', createProductsService(new MySqlStore(db, productsTable)), idempotency, ownership) };
}

const writesProducts = productsAs('writes');
const cases: { label: string; ownership: Ownership; path: string; resource: ResourceCase; start: () => Promise<RunningService> }[] = [
  { label: 'users', ownership: 'all', path: '/api/users', resource: usersCase, start: () => startService(usersService, createUsersApp) },
  { label: 'products', ownership: 'none', path: '/api/products', resource: productsCase, start: () => startService(productsService, (dependencies) => createServiceApp(productsService, dependencies)) },
  { label: 'products as "writes"', ownership: 'writes', path: '/api/products', resource: productsCase, start: () => startService(writesProducts, (dependencies) => createServiceApp(writesProducts, dependencies)) },
];

const run = randomUUID().slice(0, 8);
// José with é as one code point (NFC), and subjects that differ from it only in one way each.
const owner = `jos\u00e9-${run}`;
const lookAlikes = {
  'a space after': `${owner} `,
  'a space before': ` ${owner}`,
  'other case': `Jos\u00e9-${run}`,
  'NFD (e, then a combining acute)': `jose\u0301-${run}`,
};

let counter = Math.floor(Math.random() * 1_000_000_000);
const next = () => ++counter;

interface Answer {
  status: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read arbitrary JSON
  body: any;
}

/** A request as the gateway sends it: the caller's subject percent-encoded, and its role when it is an admin. */
async function send(base: string, method: string, path: string, as: { subject: string; admin?: boolean }, body?: unknown): Promise<Answer> {
  const headers: Record<string, string> = { 'x-auth-subject': encodeSubject(as.subject), ...(as.admin && { 'x-auth-role': ADMIN_ROLE }) };
  if (body !== undefined) headers['content-type'] = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
  const response = await fetch(new URL(path, base), { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

describe.each(cases)('$label ("owner": "$ownership")', ({ ownership, path, resource, start }) => {
  let service: RunningService;
  const as = (subject: string, method: string, at: string, body?: unknown) => send(service.url, method, at, { subject }, body);
  const admin = (method: string, at: string) => send(service.url, method, at, { subject: `admin-${run}`, admin: true });
  const ids = (page: Answer) => (page.body.items as { id: string }[]).map(({ id }) => id);
  let record: { id: string; location: string };

  beforeAll(async () => {
    service = await start();
    const created = await as(owner, 'POST', path, resource.valid(next()));
    expect(created.status).toBe(201);
    record = { id: created.body.id, location: `${path}/${created.body.id}` };
  });
  afterAll(() => service.close());

  describe.each(Object.entries(lookAlikes))('a subject that differs by %s', (_difference, other) => {
    if (ownership === 'all') {
      it("is another owner: the record is a 404 to its GET, PATCH and DELETE, and in none of its lists", async () => {
        for (const [method, body] of [['GET'], ['PATCH', resource.patch.body], ['DELETE']] as const) {
          expect({ method, status: (await as(other, method, record.location, body)).status }).toEqual({ method, status: 404 });
        }
        expect(ids(await as(other, 'GET', `${path}?limit=200`))).not.toContain(record.id);
        expect(ids(await as(other, 'GET', `${path}?owner=${encodeURIComponent(owner)}`))).toEqual([]);
        expect((await as(owner, 'GET', record.location)).body.owner).toBe(owner);
      });
    }

    if (ownership === 'writes') {
      it("is another owner: it reads the record, its PATCH and DELETE are a 403 not-owner, and the owner's list is not its", async () => {
        expect((await as(other, 'GET', record.location)).body).toMatchObject({ id: record.id, owner });
        for (const [method, body] of [['PATCH', resource.patch.body], ['DELETE']] as const) {
          const answer = await as(other, method, record.location, body);
          expect({ method, status: answer.status, type: answer.body?.type }).toEqual({ method, status: 403, type: 'https://problems.example/not-owner' });
        }
        expect(ids(await admin('GET', `${path}?owner=${encodeURIComponent(other)}`))).not.toContain(record.id);
        expect(ids(await admin('GET', `${path}?owner=${encodeURIComponent(owner)}`))).toEqual([record.id]);
      });
    }

    if (ownership === 'none') {
      it('changes the record as anyone may, and is kept as an owner of its own', async () => {
        expect((await as(other, 'PATCH', record.location, resource.patch.body)).status).toBe(200);
        const created = await as(other, 'POST', path, resource.valid(next()));
        expect(created.status).toBe(201);
        // No representation shows an owner here; the column keeps each record's, for a change of ownership later.
        const idsOwnedBy = async (subject: string) =>
          (await service.db.query('SELECT id FROM products WHERE owner = ?', [Buffer.from(subject)])).map((row) => (row.id as Buffer).toString('hex'));
        const createdId = (created.body.id as string).replaceAll('-', '');
        expect(await idsOwnedBy(other)).toEqual([createdId]);
        const ownersIds = await idsOwnedBy(owner);
        expect({ ownersRecord: ownersIds.includes(record.id.replaceAll('-', '')), othersRecord: ownersIds.includes(createdId) }).toEqual({ ownersRecord: true, othersRecord: false });
      });
    }
  });

  if (ownership === 'all' && resource.unique) {
    const { field, duplicateOf } = resource.unique;
    it(`lets another owner take a ${field} an owner has (in any case), and no owner take one twice`, async () => {
      const taken = resource.valid(next());
      expect((await as(owner, 'POST', path, taken)).status).toBe(201);
      for (const other of [`mallory-${run}`, ...Object.values(lookAlikes)]) {
        const created = await as(other, 'POST', path, duplicateOf(taken, next()));
        expect({ other, status: created.status }).toEqual({ other, status: 201 });
        const again = await as(other, 'POST', path, duplicateOf(taken, next()));
        expect({ other, status: again.status, errors: again.body.errors }).toEqual({ other, status: 409, errors: [{ path: field, message: 'is already taken' }] });
      }
      expect((await as(owner, 'POST', path, duplicateOf(taken, next()))).status).toBe(409);
    });
  }
});

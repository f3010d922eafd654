/**
 * The rules of a user that are its own (email, name, representation, timestamps), against the
 * users service and its real MySQL schema. The conventions every resource shares are in
 * test/e2e/api-conventions.test.ts.
 */
import { client, expectProblem, type Client, type TestResponse } from '../../test/support/http.js';
import { startUsersService, type RunningService } from '../../test/support/stack.js';

let users: RunningService;
let api: Client;
let counter = 0;

beforeAll(async () => {
  users = await startUsersService();
  api = client(users.url);
});
afterAll(() => users.close());

const uniqueEmail = (local = 'user') => `${local}.${++counter}@example.com`;

async function create(body: { email?: string; name?: string } = {}) {
  const response = await api.post('/api/users', { email: uniqueEmail(), name: 'Ada Lovelace', ...body });
  expect(response.status).toBe(201);
  return { body: response.body, location: response.headers.get('location')! };
}

/** The field errors of a 400 validation problem. */
const validationErrors = (response: TestResponse): { path: string; message: string }[] => expectProblem(response, 400, 'validation').errors;

const listByEmail = async (email: string) => (await api.get(`/api/users?email=${encodeURIComponent(email)}`)).body;

/** A unique, valid address of `length` characters: a 64-character local part, domain labels of at most 63. */
function emailOfLength(length: number): string {
  const local = `u${++counter}`.padEnd(64, 'x');
  return `${local}@${'a'.repeat(length - 193)}.${'b'.repeat(61)}.${'c'.repeat(61)}.com`;
}

describe('email', () => {
  it('answers 409 to a new user whose email differs from a taken one only in case', async () => {
    const first = await create({ email: uniqueEmail('Ada') });
    const problem = expectProblem(await api.post('/api/users', { email: first.body.email.toUpperCase(), name: 'Other' }), 409, 'conflict');
    expect(problem.errors).toEqual([{ path: 'email', message: 'is already taken' }]);
    expect((await listByEmail(first.body.email)).items).toHaveLength(1);
  });

  it('answers 409 to PUT and PATCH that would give a user another user’s email in other case, and changes nothing', async () => {
    const taken = await create({ email: uniqueEmail('grace') });
    const other = await create();
    const stolen = taken.body.email.toUpperCase();

    expectProblem(await api.put(other.location, { email: stolen, name: 'Thief' }), 409, 'conflict');
    const patched = expectProblem(await api.patch(other.location, { email: stolen }), 409, 'conflict');
    expect(patched.errors).toEqual([{ path: 'email', message: 'is already taken' }]);

    expect((await api.get(other.location)).body).toEqual(other.body);
    expect((await api.get(taken.location)).body).toEqual(taken.body);
  });

  it('lets a user change the case of their own email', async () => {
    const user = await create({ email: uniqueEmail('alan') });
    const response = await api.patch(user.location, { email: user.body.email.toUpperCase() });
    expect(response.status).toBe(200);
    expect(response.body.email).toBe(user.body.email.toUpperCase());
  });

  it('keeps the case it was given', async () => {
    const email = uniqueEmail('Mixed.Case');
    expect((await create({ email })).body.email).toBe(email);
  });

  it('filters ?email= exactly, ignoring case', async () => {
    const user = await create({ email: uniqueEmail('Grace.Hopper') });
    const email: string = user.body.email;
    for (const query of [email, email.toUpperCase(), email.toLowerCase()]) {
      expect(await listByEmail(query)).toEqual({ items: [user.body], nextCursor: null });
    }
    for (const partial of [email.slice(1), email.slice(0, -1), email.split('@')[0]!, `%${email.slice(1)}`, `_${email.slice(1)}`]) {
      expect((await listByEmail(partial)).items).toEqual([]);
    }
  });

  it('finds nothing, rather than failing, for an ?email= no user can have', async () => {
    for (const query of ['😀@例え.jp', 'not an address', "o'brien%@example.com"]) {
      const response = await api.get(`/api/users?email=${encodeURIComponent(query)}`);
      expect({ status: response.status, body: response.body }).toEqual({ status: 200, body: { items: [], nextCursor: null } });
    }
  });

  it('accepts 254 characters and answers 400 to 255', async () => {
    const longest = emailOfLength(254);
    expect(longest).toHaveLength(254);
    expect((await create({ email: longest })).body.email).toBe(longest);
    const tooLong = emailOfLength(255);
    expect(tooLong).toHaveLength(255);
    expect(validationErrors(await api.post('/api/users', { email: tooLong, name: 'Long' }))).toEqual([
      { path: 'email', message: 'must be at most 254 characters' },
    ]);
  });

  it.each([
    'plainaddress',
    '@example.com',
    'ada@',
    'ada@example',
    'ada lovelace@example.com',
    'ada@@example.com',
    '.ada@example.com',
    'ada..lovelace@example.com',
    ' ada@example.com',
    'ada@example.com ',
    'ada@exa mple.com',
  ])('answers 400 to %j', async (email) => {
    expect(validationErrors(await api.post('/api/users', { email, name: 'Ada' }))).toEqual([{ path: 'email', message: 'must be a valid email address' }]);
  });

  it('answers 400 to an email that is not a string', async () => {
    expect(validationErrors(await api.post('/api/users', { email: 42, name: 'Ada' }))).toEqual([{ path: 'email', message: 'must be a string' }]);
  });
});

describe('name', () => {
  it('is trimmed on create, PUT and PATCH', async () => {
    const user = await create({ name: '  Ada  ' });
    expect(user.body.name).toBe('Ada');
    expect((await api.get(user.location)).body.name).toBe('Ada');
    expect((await api.put(user.location, { email: user.body.email, name: '\tAugusta Ada \n' })).body.name).toBe('Augusta Ada');
    expect((await api.patch(user.location, { name: '  Countess ' })).body.name).toBe('Countess');
  });

  it('answers 400 to a name that is only spaces', async () => {
    expect(validationErrors(await api.post('/api/users', { email: uniqueEmail(), name: '   ' }))).toEqual([{ path: 'name', message: 'must not be empty' }]);
  });

  it('accepts 200 emoji and stores them exactly', async () => {
    const user = await create({ name: '🦄'.repeat(200) });
    expect((await api.get(user.location)).body.name).toBe('🦄'.repeat(200));
  });

  it('answers 400 to 201 emoji or 201 letters', async () => {
    for (const name of ['🦄'.repeat(201), 'n'.repeat(201)]) {
      expect(validationErrors(await api.post('/api/users', { email: uniqueEmail(), name }))).toEqual([
        { path: 'name', message: 'must be at most 200 characters' },
      ]);
    }
  });

  it('never answers a name it did not store: a lone surrogate is refused (400) or read back as echoed', async () => {
    const response = await api.post('/api/users', { email: uniqueEmail(), name: 'Ada \ud800' });
    if (response.status === 400) {
      expect(validationErrors(response)).toEqual([{ path: 'name', message: expect.any(String) }]);
    } else {
      expect(response.status).toBe(201);
      expect((await api.get(response.headers.get('location')!)).body).toEqual(response.body);
    }
  });

  it('counts the length after trimming', async () => {
    expect((await create({ name: `  ${'n'.repeat(200)}  ` })).body.name).toBe('n'.repeat(200));
  });
});

describe('the representation', () => {
  const FIELDS = ['createdAt', 'email', 'id', 'name', 'owner', 'updatedAt'];

  it('has exactly id, email, name, owner, createdAt and updatedAt, on create, read, list, PUT and PATCH', async () => {
    const user = await create();
    const representations = [
      user.body,
      (await api.get(user.location)).body,
      (await listByEmail(user.body.email)).items[0],
      (await api.put(user.location, { email: user.body.email, name: 'Put' })).body,
      (await api.patch(user.location, { name: 'Patched' })).body,
    ];
    for (const representation of representations) expect(Object.keys(representation).sort()).toEqual(FIELDS);
  });
});

describe('timestamps', () => {
  /** Returns once the clock has moved past `timestamp`, so a write now gets a later one. */
  async function clockPast(timestamp: string): Promise<void> {
    while (Date.now() <= Date.parse(timestamp)) await new Promise((resolve) => setImmediate(resolve));
  }

  it('starts with updatedAt equal to createdAt', async () => {
    const user = await create();
    expect(user.body.updatedAt).toBe(user.body.createdAt);
  });

  it.each([
    ['PUT', (location: string, email: string) => api.put(location, { email, name: 'Replaced' })],
    ['PATCH', (location: string) => api.patch(location, { name: 'Patched' })],
  ])('advances updatedAt on %s and keeps createdAt', async (_method, update) => {
    const user = await create();
    await clockPast(user.body.updatedAt);

    const updated = await update(user.location, user.body.email);

    expect(updated.status).toBe(200);
    expect(updated.body.createdAt).toBe(user.body.createdAt);
    expect(Date.parse(updated.body.updatedAt)).toBeGreaterThan(Date.parse(user.body.updatedAt));
    expect((await api.get(user.location)).body).toEqual(updated.body);
  });

  it('does not change on a refused update', async () => {
    const user = await create();
    await clockPast(user.body.updatedAt);
    expectProblem(await api.patch(user.location, { name: '' }), 400, 'validation');
    expect((await api.get(user.location)).body.updatedAt).toBe(user.body.updatedAt);
  });
});

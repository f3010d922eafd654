/**
 * Idempotency-Key on POST and PATCH, as a client of the gateway sees it: a retry gets the first
 * response without running again, across service replicas (two apps on one schema), also after
 * the gateway gave up on the first request (504). Requests are held in flight with a real MySQL row
 * lock the test takes.
 */
import { randomUUID } from 'node:crypto';
import { Lifecycle } from '@app/shared/platform/http/lifecycle';
import { MySqlIdempotencyStore } from '@app/shared/resource/idempotency-store';
import { Database } from '@app/shared/platform/mysql';
import { listen, type RunningServer } from '@app/shared/platform/server';
import mysql from 'mysql2/promise';
import { createApp as createProductsApp } from '../../products-service/src/app.js';
import { testToken } from '../support/auth.js';
import { client, expectProblem, type Client } from '../support/http.js';
import { startGateway, startStack, testLogger, type RunningGateway } from '../support/stack.js';

let stack: Awaited<ReturnType<typeof startStack>>;
let api: Client;
let counter = 0;
const product = (n = ++counter) => ({ sku: `IDEM-${n}`, name: `Product ${n}`, price: { amount: '1.5', currency: 'EUR' }, stock: n });
const key = () => randomUUID();

beforeAll(async () => {
  stack = await startStack({ cache: {} });
  api = client(stack.gateway.url);
});
afterAll(() => stack.close());

/** How many products the database holds with this sku. */
async function countBySku(sku: string): Promise<number> {
  const rows = await stack.products.db.query('SELECT COUNT(*) AS n FROM products WHERE sku = ?', [sku]);
  return Number(rows[0]?.n);
}

/**
 * A MySQL transaction of the test's own that holds the unique index entry of `sku` (or the row of a
 * product id): a write of the same sku waits for it, so a request stays in flight until `release()`.
 */
async function holdLock(sql: string, values: unknown[]) {
  const connection = await mysql.createConnection(stack.products.databaseUrl);
  await connection.query('START TRANSACTION');
  await connection.query(sql, values);
  return {
    release: async () => {
      await connection.query('ROLLBACK');
      await connection.end();
    },
  };
}

/** Resolves once a request has claimed `key` (its row exists), so the next one with it comes second. */
async function claimed(key: string): Promise<void> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const rows = await stack.products.db.query('SELECT COUNT(*) AS n FROM idempotency_keys WHERE idempotency_key = ?', [key]);
    if (Number(rows[0]?.n) === 1) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`no request claimed ${key}`);
}

describe('Idempotency-Key on POST', () => {
  it('replays the first response to a retry (same status, body, Location, ETag) and creates one resource', async () => {
    const body = product();
    const idempotencyKey = key();
    const first = await api.post('/api/products', body, { headers: { 'Idempotency-Key': idempotencyKey } });
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const retry = await api.post('/api/products', body, { headers: { 'Idempotency-Key': idempotencyKey } });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.text).toBe(first.text);
    for (const header of ['location', 'etag', 'content-type']) expect(retry.headers.get(header)).toBe(first.headers.get(header));
    expect(await countBySku(body.sku)).toBe(1);
  });

  it('treats the body by content: members in another order are the same request', async () => {
    const body = product();
    const idempotencyKey = key();
    const first = await api.post('/api/products', body, { headers: { 'Idempotency-Key': idempotencyKey } });
    const reordered = Object.fromEntries(Object.entries(body).reverse());
    const retry = await api.post('/api/products', reordered, { headers: { 'Idempotency-Key': idempotencyKey } });
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.body).toEqual(first.body);
  });

  it('answers 422 when the key comes back with a different request, and changes nothing', async () => {
    const idempotencyKey = key();
    expect((await api.post('/api/products', product(), { headers: { 'Idempotency-Key': idempotencyKey } })).status).toBe(201);
    const other = product();
    expectProblem(await api.post('/api/products', other, { headers: { 'Idempotency-Key': idempotencyKey } }), 422, 'idempotency-key-reused');
    expect(await countBySku(other.sku)).toBe(0);
  });

  it('scopes keys to the collection: the same key creates a user and a product', async () => {
    const idempotencyKey = key();
    const user = await api.post('/api/users', { email: `idem-${++counter}@example.com`, name: 'Idem' }, { headers: { 'Idempotency-Key': idempotencyKey } });
    const created = await api.post('/api/products', product(), { headers: { 'Idempotency-Key': idempotencyKey } });
    expect([user.status, created.status]).toEqual([201, 201]);
    expect(created.headers.get('idempotent-replayed')).toBeNull();
  });

  it('scopes keys to the authenticated subject: another client with the same key is a new request', async () => {
    const idempotencyKey = key();
    const mine = await api.post('/api/products', product(), { headers: { 'Idempotency-Key': idempotencyKey } });
    const theirs = await api.post('/api/products', product(), { headers: { 'Idempotency-Key': idempotencyKey }, token: await testToken({ subject: 'another-client' }) });
    expect([mine.status, theirs.status]).toEqual([201, 201]);
    expect(theirs.headers.get('idempotent-replayed')).toBeNull();
  });

  it.each([
    ['empty', ''],
    ['with a space', 'a b'],
    ['non-ASCII', 'clé'],
    ['256 characters', 'k'.repeat(256)],
  ])('answers 400 to a key that is %s', async (_what, value) => {
    const body = product();
    const problem = expectProblem(await api.post('/api/products', body, { headers: { 'Idempotency-Key': value } }), 400, 'validation');
    expect(problem.errors).toEqual([{ path: 'Idempotency-Key', message: 'must be 1 to 255 visible ASCII characters' }]);
    expect(await countBySku(body.sku)).toBe(0);
  });

  it('accepts 255 visible ASCII characters', async () => {
    const idempotencyKey = `${'!~'.repeat(127)}x`;
    expect((await api.post('/api/products', product(), { headers: { 'Idempotency-Key': idempotencyKey } })).status).toBe(201);
  });

  it('does not use the key up when the request fails: the same request runs again later', async () => {
    const body = product();
    const idempotencyKey = key();
    const taken = await api.post('/api/products', { ...product(), sku: body.sku });
    expect(taken.status).toBe(201);
    expectProblem(await api.post('/api/products', body, { headers: { 'Idempotency-Key': idempotencyKey } }), 409, 'conflict');
    expect((await api.delete(taken.headers.get('location')!)).status).toBe(204);
    const retry = await api.post('/api/products', body, { headers: { 'Idempotency-Key': idempotencyKey } });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
  });
});

describe('across service replicas', () => {
  let replica: RunningServer;
  let replicaDb: Database;
  let gatewayToReplica: RunningGateway;

  beforeAll(async () => {
    // A second products-service on the same schema, behind a second gateway.
    replicaDb = new Database(stack.products.databaseUrl);
    replica = await listen(createProductsApp({ db: replicaDb, logger: testLogger, lifecycle: new Lifecycle() }), 0, '127.0.0.1');
    gatewayToReplica = await startGateway({ upstreams: { users: stack.users.url, products: `http://127.0.0.1:${replica.port}` } });
  });
  afterAll(async () => {
    await gatewayToReplica.close();
    await replica.close(1_000);
    await replicaDb.close();
  });

  it('answers 409 on another replica while the first request is in flight, then replays its response', async () => {
    const body = product();
    const idempotencyKey = key();
    const lock = await holdLock('INSERT INTO products (id, sku, name, description, price_amount, price_currency, stock, version, created_at, updated_at) VALUES (UNHEX(REPLACE(UUID(), "-", "")), ?, "held", "", 1, "EUR", 0, 1, NOW(3), NOW(3))', [body.sku]);
    const first = api.post('/api/products', body, { headers: { 'Idempotency-Key': idempotencyKey } });
    try {
      await claimed(idempotencyKey);
      const inFlight = await client(gatewayToReplica.url).post('/api/products', body, { headers: { 'Idempotency-Key': idempotencyKey } });
      expectProblem(inFlight, 409, 'idempotency-in-flight');
      // Until the first request's claim lapses: its write deadline (5 s) and a margin (1 s), at most.
      expect(Number(inFlight.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(Number(inFlight.headers.get('retry-after'))).toBeLessThanOrEqual(6);
    } finally {
      await lock.release();
    }
    const created = await first;
    expect(created.status).toBe(201);
    const replayed = await client(gatewayToReplica.url).post('/api/products', body, { headers: { 'Idempotency-Key': idempotencyKey } });
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(replayed.text).toBe(created.text);
    expect(await countBySku(body.sku)).toBe(1);
  });

  it('replays a PATCH on another replica: the change is made once', async () => {
    const created = await api.post('/api/products', product());
    const location = created.headers.get('location')!;
    const idempotencyKey = key();
    const patched = await api.patch(location, { stock: 7 }, { headers: { 'Idempotency-Key': idempotencyKey, 'If-Match': '"1"' } });
    expect(patched.headers.get('etag')).toBe('"2"');
    const retry = await client(gatewayToReplica.url).patch(location, { stock: 7 }, { headers: { 'Idempotency-Key': idempotencyKey, 'If-Match': '"1"' } });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.headers.get('etag')).toBe('"2"');
    expect((await api.get(location)).headers.get('etag')).toBe('"2"');
  });
});

describe('a POST retried after the gateway timed out', () => {
  it('never creates a second resource', async () => {
    const gateway = await startGateway({ upstreams: stack.urls, upstreamTimeoutMs: 300, cache: {} });
    try {
      const impatient = client(gateway.url);
      const body = product();
      const idempotencyKey = key();
      const lock = await holdLock('INSERT INTO products (id, sku, name, description, price_amount, price_currency, stock, version, created_at, updated_at) VALUES (UNHEX(REPLACE(UUID(), "-", "")), ?, "held", "", 1, "EUR", 0, 1, NOW(3), NOW(3))', [body.sku]);
      try {
        expectProblem(await impatient.post('/api/products', body, { headers: { 'Idempotency-Key': idempotencyKey } }), 504, 'gateway-timeout');
        // Retried while the first is still running: in flight, nothing created.
        expectProblem(await impatient.post('/api/products', body, { headers: { 'Idempotency-Key': idempotencyKey } }), 409, 'idempotency-in-flight');
      } finally {
        await lock.release();
      }
      let retry;
      for (let attempt = 0; attempt < 50; attempt++) {
        retry = await impatient.post('/api/products', body, { headers: { 'Idempotency-Key': idempotencyKey } });
        if (retry.status !== 409) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(retry!.status).toBe(201);
      expect(retry!.headers.get('idempotent-replayed')).toBe('true');
      expect(await countBySku(body.sku)).toBe(1);
      // The cache shows it: the timed-out write invalidated, the replay is read back.
      expect((await impatient.get(retry!.headers.get('location')!)).body).toEqual(retry!.body);
    } finally {
      await gateway.close();
    }
  });
});

describe('the key store', () => {
  const request = () => ({ scope: '/api/products', key: key(), fingerprint: 'ab'.repeat(32) });

  it('lets another request take over a claim whose lease ran out (its replica died), and then refuses the old claim', async () => {
    const store = new MySqlIdempotencyStore(stack.products.db);
    const claimed = request();
    const dead = await store.claim(claimed);
    if (dead.kind !== 'claimed') throw new Error('not claimed');
    // Left by a request whose replica died: in flight until its claim lapses, as Retry-After says.
    await expect(store.claim(claimed)).rejects.toMatchObject({ kind: 'idempotency-in-flight', extras: { headers: { 'Retry-After': String(store.claimSeconds) } } });
    await stack.products.db.execute('UPDATE idempotency_keys SET locked_until = ? WHERE idempotency_key = ?', [new Date(Date.now() + 2_500), claimed.key]);
    await expect(store.claim(claimed)).rejects.toMatchObject({ extras: { headers: { 'Retry-After': '3' } } });
    await stack.products.db.execute('UPDATE idempotency_keys SET locked_until = ? WHERE idempotency_key = ?', [new Date(Date.now() - 1), claimed.key]);
    const taker = await store.claim(claimed);
    expect(taker.kind).toBe('claimed');
    const response = { status: 201, headers: {}, body: '{}' };
    expect(await store.complete(claimed, dead.token, response)).toBe(false);
    if (taker.kind === 'claimed') expect(await store.complete(claimed, taker.token, response)).toBe(true);
    expect(await store.claim(claimed)).toEqual({ kind: 'replay', response });
  });

  it('forgets keys after their time to live, and purges them', async () => {
    const store = new MySqlIdempotencyStore(stack.products.db, { ttlSeconds: 1 });
    const claimed = request();
    const first = await store.claim(claimed);
    if (first.kind !== 'claimed') throw new Error('not claimed');
    await store.complete(claimed, first.token, { status: 201, headers: {}, body: '{}' });
    await stack.products.db.execute('UPDATE idempotency_keys SET expires_at = ? WHERE idempotency_key = ?', [new Date(Date.now() - 1), claimed.key]);
    expect((await store.claim({ ...claimed, fingerprint: 'cd'.repeat(32) })).kind).toBe('claimed');
    await stack.products.db.execute('UPDATE idempotency_keys SET expires_at = ? WHERE idempotency_key = ?', [new Date(Date.now() - 1), claimed.key]);
    expect(await store.purgeExpired()).toBeGreaterThanOrEqual(1);
    const rows = await stack.products.db.query('SELECT COUNT(*) AS n FROM idempotency_keys WHERE idempotency_key = ?', [claimed.key]);
    expect(Number(rows[0]?.n)).toBe(0);
  });
});

describe("what one caller can make the store keep", () => {
  const BUDGET = 16_384;
  let service: RunningServer;
  let serviceDb: Database;
  let gateway: RunningGateway;

  beforeAll(async () => {
    // The products service with a small budget per caller, on the stack's schema, behind its own gateway.
    serviceDb = new Database(stack.products.databaseUrl);
    const idempotency = new MySqlIdempotencyStore(serviceDb, { scopeBytes: BUDGET });
    service = await listen(createProductsApp({ db: serviceDb, logger: testLogger, lifecycle: new Lifecycle(), idempotency }), 0, '127.0.0.1');
    gateway = await startGateway({ upstreams: { ...stack.urls, products: `http://127.0.0.1:${service.port}` } });
  });
  afterAll(async () => {
    await gateway.close();
    await service.close(1_000);
    await serviceDb.close();
  });

  /** What the store keeps for `subject`'s keys among `keys`: rows, and the bytes of their responses. */
  async function kept(keys: string[]) {
    const [row] = await stack.products.db.query(
      `SELECT COUNT(*) AS n, COALESCE(SUM(LENGTH(response_body) + LENGTH(response_headers)), 0) AS bytes FROM idempotency_keys WHERE idempotency_key IN (${keys.map(() => '?').join(', ')})`,
      keys,
    );
    return { rows: Number(row?.n), bytes: Number(row?.bytes) };
  }

  it('is bounded by its byte budget, its oldest keys dropped first; its newest still replay, and other callers keep theirs', async () => {
    const big = client(gateway.url, { token: await testToken({ subject: `big-writer-${Date.now()}` }) });
    const other = client(gateway.url, { token: await testToken({ subject: `other-${Date.now()}` }) });
    const created = await big.post('/api/products', { ...product(), description: 'd'.repeat(2_000) });
    const path = created.headers.get('location')!;
    const othersKey = key();
    expect((await other.patch(path, { stock: 1 }, { headers: { 'Idempotency-Key': othersKey } })).status).toBe(200);
    // 40 small PATCHes, each answered with the whole 2 kB product: 80 kB of responses.
    const keys = Array.from({ length: 40 }, () => key());
    for (const [i, idempotencyKey] of keys.entries()) expect((await big.patch(path, { stock: i }, { headers: { 'Idempotency-Key': idempotencyKey } })).status).toBe(200);
    const stored = await kept(keys);
    expect(stored.rows).toBeLessThan(keys.length);
    expect(stored.bytes).toBeLessThanOrEqual(BUDGET + 2_500);
    // The newest keys are kept: a retry of the last request is replayed, not run again.
    const retried = await big.patch(path, { stock: 39 }, { headers: { 'Idempotency-Key': keys.at(-1)! } });
    expect(retried.headers.get('idempotent-replayed')).toBe('true');
    // The oldest was dropped: the same request with its key runs again.
    const rerun = await big.patch(path, { stock: 0 }, { headers: { 'Idempotency-Key': keys[0]! } });
    expect({ status: rerun.status, replayed: rerun.headers.get('idempotent-replayed') }).toEqual({ status: 200, replayed: null });
    // Another caller's key is not the big writer's to drop.
    expect((await other.patch(path, { stock: 1 }, { headers: { 'Idempotency-Key': othersKey } })).headers.get('idempotent-replayed')).toBe('true');
  });
});

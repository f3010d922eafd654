/**
 * A write whose outcome the gateway does not know (it gave up: timeout, reset, 5xx) may still be
 * committed by the service, up to the service's write deadline. Until then no read through any
 * gateway replica may be kept as fresh; and the service really holds to that deadline. Real
 * products service (MySQL), two gateway replicas sharing the real Redis. The service's commit is
 * held back with a row lock the test takes in MySQL.
 */
import mysql from 'mysql2/promise';
import { client, expectProblem, type Client } from '../support/http.js';
import { startGateway, startProductsService, type RunningGateway, type RunningService } from '../support/stack.js';
import { TcpProxy } from '../../tools/tcp-proxy.js';

const WRITE_DEADLINE_MS = 1_500;
const UPSTREAM_TIMEOUT_MS = 300;

let products: RunningService;
let gateways: RunningGateway[];
let api: Client;
let replica: Client;
let counter = 0;

beforeAll(async () => {
  products = await startProductsService({ limits: { writeDeadlineMs: WRITE_DEADLINE_MS } });
  const options = {
    upstreams: { users: products.url, products: products.url },
    upstreamTimeoutMs: UPSTREAM_TIMEOUT_MS,
    serviceWriteDeadlineMs: WRITE_DEADLINE_MS + 500,
    cache: { ttlSeconds: 60, staleSeconds: 0 },
  };
  gateways = [await startGateway(options), await startGateway(options)];
  api = client(gateways[0]!.url);
  replica = client(gateways[1]!.url);
});
afterAll(async () => {
  await Promise.all(gateways.map((gateway) => gateway.close()));
  await products.close();
});

async function createProduct() {
  const n = ++counter;
  const created = await api.post('/api/products', { sku: `UW-${n}-${Date.now()}`, name: `Unknown ${n}`, price: { amount: '2.00', currency: 'EUR' }, stock: 1 });
  expect(created.status).toBe(201);
  return { id: created.body.id as string, location: created.headers.get('location')! };
}

/** GETs `path` through `via` until the cache answers it; returns that response. */
async function untilCached(via: Client, path: string) {
  for (let attempt = 0; attempt < 200; attempt++) {
    const response = await via.get(path);
    if (response.headers.get('x-cache') === 'HIT') return response;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${path} never became a cache hit`);
}

/** Locks the product's row in a transaction of the test's own: the service's UPDATE waits for it. */
async function lockRow(id: string) {
  const connection = await mysql.createConnection(products.databaseUrl);
  await connection.query('START TRANSACTION');
  await connection.query('SELECT id FROM products WHERE id = ? FOR UPDATE', [Buffer.from(id.replaceAll('-', ''), 'hex')]);
  return {
    release: async () => {
      await connection.query('COMMIT');
      await connection.end();
    },
  };
}

/** The row as MySQL has it once no other transaction holds it (a rolled-back write has let go). */
async function settledRow(id: string): Promise<{ stock: number; version: number }> {
  const connection = await mysql.createConnection(products.databaseUrl);
  try {
    await connection.query('START TRANSACTION');
    const [rows] = await connection.query<mysql.RowDataPacket[]>('SELECT stock, version FROM products WHERE id = ? FOR UPDATE', [
      Buffer.from(id.replaceAll('-', ''), 'hex'),
    ]);
    await connection.query('COMMIT');
    return { stock: Number(rows[0]!.stock), version: Number(rows[0]!.version) };
  } finally {
    await connection.end();
  }
}

it('keeps what a write affects out of the cache, on every replica, while the service may still commit it', async () => {
  const product = await createProduct();
  await untilCached(api, product.location);
  await untilCached(replica, product.location);

  const lock = await lockRow(product.id);
  let released = false;
  try {
    // The service has the write, but cannot commit it yet: the gateway gives up (504).
    expectProblem(await api.patch(product.location, { stock: 999 }), 504, 'gateway-timeout');
    // A read now gets the old data: fine, the write has not landed. It must not be kept as fresh.
    for (const via of [api, replica]) {
      const read = await via.get(product.location);
      expect({ stock: read.body.stock, cache: read.headers.get('x-cache') }).toEqual({ stock: 1, cache: 'BYPASS' });
    }
    await lock.release();
    released = true;
  } finally {
    if (!released) await lock.release();
  }

  // The write lands after the gateway's timeout, within the service's deadline.
  expect(await settledRow(product.id)).toEqual({ stock: 999, version: 2 });
  for (const via of [api, replica]) expect((await via.get(product.location)).body.stock).toBe(999);
  // Once the write can no longer land, the cache is used again, with the data after the write.
  for (const via of [api, replica]) expect((await untilCached(via, product.location)).body.stock).toBe(999);
});

it('the service never commits a write later than WRITE_DEADLINE_MS after the request arrived: it rolls it back (503)', async () => {
  const product = await createProduct();
  const lock = await lockRow(product.id);
  let answer;
  try {
    answer = await client(products.url).patch(product.location, { stock: 7 });
  } finally {
    await lock.release();
  }
  expectProblem(answer, 503, 'service-unavailable');
  expect(answer.body.detail).toMatch(/not applied/);
  expect(await settledRow(product.id)).toEqual({ stock: 1, version: 1 });
  expect((await client(products.url).get(product.location)).body.stock).toBe(1);
});

it('a replica that could not reach Redis when it gave up on a write sets the hold once Redis is back, for what is left of it', async () => {
  const redisUrl = new URL(process.env.TEST_REDIS_URL!);
  const redisProxy = await new TcpProxy({ host: redisUrl.hostname, port: Number(redisUrl.port || 6379) }).start();
  const cutOff = await startGateway({
    upstreams: { users: products.url, products: products.url },
    upstreamTimeoutMs: UPSTREAM_TIMEOUT_MS,
    serviceWriteDeadlineMs: 6_000,
    cache: { ttlSeconds: 60, staleSeconds: 0, redisUrl: redisProxy.rewrite(redisUrl.toString()) },
  });
  const product = await createProduct();
  const lock = await lockRow(product.id);
  try {
    await untilCached(api, product.location);
    await redisProxy.cut();
    expectProblem(await client(cutOff.url).patch(product.location, { stock: 5 }), 504, 'gateway-timeout');
    await redisProxy.restore();
    // The other replica served its entry while this one could not say so; once Redis is back, the hold is there.
    let read = await api.get(product.location);
    for (let attempt = 0; attempt < 100 && read.headers.get('x-cache') !== 'BYPASS'; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      read = await api.get(product.location);
    }
    expect(read.headers.get('x-cache')).toBe('BYPASS');
  } finally {
    await lock.release();
    await cutOff.close();
    await redisProxy.cut();
  }
  // Whatever the service did with the write, the cache, once used again, agrees with it.
  const settled = await settledRow(product.id);
  expect((await untilCached(api, product.location)).body.stock).toBe(settled.stock);
});

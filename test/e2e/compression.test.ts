/**
 * Compressed answers, as clients see them: a list the gateway caches goes to a client that takes br
 * or gzip in that coding (with Vary: Accept-Encoding and Content-Length of the bytes sent), hit or
 * miss, and as it is to one that asks for nothing; a small item is never compressed. Real gateway,
 * products service and Redis; raw HTTP, so nothing decodes behind the test's back.
 */
import http from 'node:http';
import zlib from 'node:zlib';
import { seed } from '../../scripts/seed.js';
import { service as productsService } from '../../products-service/src/app.js';
import { startGateway, startProductsService, type RunningGateway, type RunningService } from '../support/stack.js';

let products: RunningService;
let gateway: RunningGateway;

beforeAll(async () => {
  products = await startProductsService();
  await seed({ databaseUrl: products.databaseUrl, service: productsService, rows: 200 });
  gateway = await startGateway({ upstreams: { products: products.url, users: products.url }, cache: {}, guard: { publicReads: ['products'] } });
});
afterAll(async () => {
  await gateway.close();
  await products.close();
});

/** One GET through the gateway: status, headers and the bytes as they came over the wire. */
function get(path: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    http
      .get(`${gateway.url}${path}`, { headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.once('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      })
      .once('error', reject);
  });
}

const LIST = '/api/products?limit=200';

describe('a list of 200 products', () => {
  let identity: Buffer;

  beforeAll(async () => {
    const first = await get(LIST);
    expect(first.status).toBe(200);
    identity = first.body;
  });

  it('goes as it is, with Vary: Accept-Encoding, to a client that asks for no coding', async () => {
    const plain = await get(LIST);
    expect(plain.headers['x-cache']).toBe('HIT');
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.headers.vary).toMatch(/accept-encoding/i);
    expect(plain.body.equals(identity)).toBe(true);
    expect(Number(plain.headers['content-length'])).toBe(identity.length);
  });

  it('goes in br to a client that takes it, a fifth of its size or less, on a miss and on a hit', async () => {
    for (const expected of ['MISS', 'HIT']) {
      const path = expected === 'MISS' ? '/api/products?limit=199' : LIST;
      const answer = await get(path, { 'accept-encoding': 'gzip, deflate, br' });
      expect(answer.status).toBe(200);
      expect(answer.headers['x-cache']).toBe(expected);
      expect(answer.headers['content-encoding']).toBe('br');
      expect(answer.headers.vary).toMatch(/accept-encoding/i);
      expect(Number(answer.headers['content-length'])).toBe(answer.body.length);
      const decoded = zlib.brotliDecompressSync(answer.body);
      expect(JSON.parse(decoded.toString()).items.length).toBe(expected === 'MISS' ? 199 : 200);
      if (expected === 'HIT') {
        expect(decoded.equals(identity)).toBe(true);
        expect(answer.body.length).toBeLessThanOrEqual(identity.length * 0.2);
      }
    }
  });

  it('goes in gzip to a client that takes gzip only, and as it is to one that refuses every coding', async () => {
    const gzipped = await get(LIST, { 'accept-encoding': 'gzip' });
    expect(gzipped.headers['content-encoding']).toBe('gzip');
    expect(zlib.gunzipSync(gzipped.body).equals(identity)).toBe(true);
    const refused = await get(LIST, { 'accept-encoding': 'br;q=0, gzip;q=0' });
    expect(refused.headers['content-encoding']).toBeUndefined();
    expect(refused.body.equals(identity)).toBe(true);
  });

  it('answers HEAD with the headers of the coding the client takes, and no body', async () => {
    const head = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = http.request(`${gateway.url}${LIST}`, { method: 'HEAD', headers: { 'accept-encoding': 'br' } }, (res) => {
        res.resume();
        res.once('end', () => resolve(res));
      });
      req.once('error', reject).end();
    });
    expect(head.headers['content-encoding']).toBe('br');
    expect(Number(head.headers['content-length'])).toBeLessThan(identity.length);
  });
});

it('never compresses an item: it is small, and its strong ETag is its version', async () => {
  const list = JSON.parse((await get('/api/products?limit=1')).body.toString()) as { items: { id: string }[] };
  const item = await get(`/api/products/${list.items[0]!.id}`, { 'accept-encoding': 'br, gzip' });
  expect(item.status).toBe(200);
  expect(item.headers['content-encoding']).toBeUndefined();
  expect(item.headers.etag).toMatch(/^"/);
});

it('compresses a list the cache takes no part in on its way through, in the coding the client takes, HEAD alike', async () => {
  const uncached = await startGateway({ upstreams: { products: products.url, users: products.url }, guard: { publicReads: ['products'] } });
  try {
    const identity = await get(LIST);
    const fetchAt = (headers: Record<string, string>, method = 'GET') =>
      new Promise<{ headers: http.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
        http
          .request(`${uncached.url}${LIST}`, { method, headers }, (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (chunk: Buffer) => chunks.push(chunk));
            res.once('end', () => resolve({ headers: res.headers, body: Buffer.concat(chunks) }));
          })
          .once('error', reject)
          .end();
      });
    const br = await fetchAt({ 'accept-encoding': 'br' });
    expect(br.headers['x-cache']).toBe('BYPASS');
    expect(br.headers['content-encoding']).toBe('br');
    expect(br.headers.vary).toMatch(/accept-encoding/i);
    expect(br.headers['content-length']).toBeUndefined();
    expect(zlib.brotliDecompressSync(br.body).equals(identity.body)).toBe(true);
    const head = await fetchAt({ 'accept-encoding': 'br' }, 'HEAD');
    expect({ encoding: head.headers['content-encoding'], vary: head.headers.vary, length: head.headers['content-length'], body: head.body.length }).toEqual({
      encoding: 'br',
      vary: br.headers.vary,
      length: undefined,
      body: 0,
    });
    const plain = await fetchAt({});
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.body.equals(identity.body)).toBe(true);
  } finally {
    await uncached.close();
  }
});

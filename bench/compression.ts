/**
 * `npm run bench -- --compression`: what compressing a page of 200 products costs and saves, the
 * figures the gateway's brotli quality and gzip level rest on (gateway/src/cache/compression.ts).
 * Starts products-service on a throwaway schema, creates 200 products, reads
 * `GET /api/products?limit=200` and compresses its body with every brotli quality and gzip level:
 * the size of each, and the CPU time of one compression (this process's, median of 5 timed batches,
 * each at least 200 ms). Then the sizes of the gateway's own `compressVariants`, both codings at once.
 */
import { performance } from 'node:perf_hooks';
import zlib from 'node:zlib';
import { BROTLI_QUALITY, compressVariants, GZIP_LEVEL } from '../gateway/dist/cache/compression.js';
import { cleanUpOnSignals, dropSchemas, median, productsServiceWithAProduct, stopAll, throwawaySchema } from './support.ts';

const PRODUCTS = 200;

/** A page of PRODUCTS products, as products-service answers it. */
async function productPage(): Promise<Buffer> {
  const schema = throwawaySchema('compression');
  cleanUpOnSignals([schema]);
  try {
    const { products } = await productsServiceWithAProduct(schema, { sku: 'COMPRESS-0', name: 'Compression product 0' });
    for (let n = 1; n < PRODUCTS; n++) {
      const created = await fetch(`${products.url}/api/products`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          sku: `COMPRESS-${n}`,
          name: `Compression product ${n}`,
          description: `Product ${n} of the compression bench.`,
          price: { amount: `${(n % 97) + 0.99}`, currency: 'EUR' },
          stock: (n * 37) % 1000,
        }),
      });
      if (created.status !== 201) throw new Error(`could not create a product: ${created.status} ${await created.text()}`);
    }
    const page = await fetch(`${products.url}/api/products?limit=${PRODUCTS}`);
    if (page.status !== 200) throw new Error(`could not read the page: ${page.status}`);
    return Buffer.from(await page.arrayBuffer());
  } finally {
    await stopAll();
    await dropSchemas([schema]);
  }
}

/** CPU time (user + system, this process) of one call of `work`, in µs: the median of 5 batches of at least 200 ms each. */
function cpuMicrosPerCall(work: () => void): number {
  const batches: number[] = [];
  for (let batch = 0; batch < 5; batch++) {
    const before = process.cpuUsage();
    const started = performance.now();
    let calls = 0;
    while (performance.now() - started < 200) {
      work();
      calls++;
    }
    const used = process.cpuUsage(before);
    batches.push((used.user + used.system) / calls);
  }
  return Math.round(median(batches));
}

export async function runCompression(): Promise<void> {
  const body = await productPage();
  console.log(`GET /api/products?limit=${PRODUCTS}: ${body.length} bytes identity; Node ${process.version}`);
  const rows: Record<string, { bytes: number; 'share %': number; 'CPU µs': number }> = {};
  const row = (compressed: Buffer, work: () => void) => ({
    bytes: compressed.length,
    'share %': Math.round((compressed.length / body.length) * 1000) / 10,
    'CPU µs': cpuMicrosPerCall(work),
  });
  for (let quality = 0; quality <= 11; quality++) {
    const options = { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: quality, [zlib.constants.BROTLI_PARAM_MODE]: zlib.constants.BROTLI_MODE_TEXT, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: body.length } };
    rows[`br q${quality}${quality === BROTLI_QUALITY ? ' (gateway)' : ''}`] = row(zlib.brotliCompressSync(body, options), () => zlib.brotliCompressSync(body, options));
  }
  for (let level = 1; level <= 9; level++) {
    rows[`gzip ${level}${level === GZIP_LEVEL ? ' (gateway)' : ''}`] = row(zlib.gzipSync(body, { level }), () => zlib.gzipSync(body, { level }));
  }
  console.table(rows);
  const variants = await compressVariants(body);
  console.log(`compressVariants: br ${variants.br?.length} bytes, gzip ${variants.gzip?.length} bytes, identity ${body.length} bytes (once per cache entry, in libuv's thread pool)`);
}

/**
 * `npm run bench:gateway-ab -- <before-checkout> [--cache on|off] [--runs N] [--seconds S]`: the
 * gateway of this checkout (after) against the gateway of another built checkout (before, e.g.
 * /work/main), side by side in one run: one products-service, both gateways in front of it, and
 * wrk runs interleaved A, B, A, B… (the machine is shared and noisy: interleaving spreads the
 * noise over both). Prints requests/s and p50/p99 of each run and the medians, and each gateway's
 * resident memory at the end. Uses the bench's helpers (bench/support.ts): servers on core 0, wrk
 * on core 1.
 */
import { parseArgs } from 'node:util';
import { cleanUpOnSignals, dropSchemas, ensureDebianTools, freePort, median, REDIS_URL, rssMiB, schemaUrl, startNode, stopAll, throwawaySchema, wrk, type LoadResult } from '../bench/support.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { cache: { type: 'string', default: 'off' }, runs: { type: 'string', default: '4' }, seconds: { type: 'string', default: '5' }, connections: { type: 'string', default: '64' } },
});
const before = positionals[0];
if (!before) throw new Error('usage: npm run bench:gateway-ab -- <before-checkout> [--cache on|off] [--runs N] [--seconds S]');
const runs = Number(values.runs);
const seconds = Number(values.seconds);
const connections = Number(values.connections);

ensureDebianTools({ wrk: 'wrk' });
const schema = throwawaySchema('ab');
cleanUpOnSignals([schema]);
try {
  const products = await startNode('products-service', 'products-service/dist/main.js', { DATABASE_URL: schemaUrl(schema) }, await freePort());
  const created = await fetch(`${products.url}/api/products`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ sku: 'AB-1', name: 'A/B widget', description: 'Measured.', price: { amount: '19.99', currency: 'EUR' }, stock: 42 }),
  });
  if (created.status !== 201) throw new Error(`could not create the product: ${created.status}`);
  const path = created.headers.get('location')!;
  // Authentication and rate limits off: this compares the cache and proxy paths of two builds.
  const env = {
    USERS_SERVICE_URL: products.url,
    PRODUCTS_SERVICE_URL: products.url,
    REDIS_URL,
    CACHE_ENABLED: values.cache === 'on' ? 'true' : 'false',
    AUTH_ENABLED: 'false',
    RATE_LIMIT_ENABLED: 'false',
  };
  const gateways = {
    before: await startNode('gateway (before)', `${before}/gateway/dist/main.js`, env, await freePort()),
    after: await startNode('gateway (after)', 'gateway/dist/main.js', env, await freePort()),
  };
  const results: Record<keyof typeof gateways, LoadResult[]> = { before: [], after: [] };
  for (const gateway of Object.values(gateways)) await wrk(`${gateway.url}${path}`, { seconds: 2, connections });
  for (let run = 0; run < runs; run++) {
    // Alternate which goes first, so neither always runs on a machine the other just warmed.
    const order = run % 2 === 0 ? (['before', 'after'] as const) : (['after', 'before'] as const);
    for (const which of order) {
      const result = await wrk(`${gateways[which].url}${path}`, { seconds, connections });
      results[which].push(result);
      console.log(`run ${run + 1} ${which.padEnd(6)} ${String(result.requestsPerSecond).padStart(6)} req/s  p50 ${result.p50Ms} ms  p99 ${result.p99Ms} ms  non-2xx ${result.non2xx}`);
    }
  }
  console.log(`\nGET ${path} through the gateway, cache ${values.cache}, wrk -t1 -c${connections}, ${runs} × ${seconds} s each, interleaved; medians:`);
  for (const which of ['before', 'after'] as const) {
    const r = results[which];
    console.log(
      `${which.padEnd(6)} ${median(r.map((x) => x.requestsPerSecond))} req/s  p50 ${median(r.map((x) => x.p50Ms))} ms  p99 ${median(r.map((x) => x.p99Ms))} ms  RSS ${rssMiB(gateways[which].pids())} MiB`,
    );
  }
} finally {
  await stopAll();
  await dropSchemas([schema]);
}

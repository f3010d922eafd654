/**
 * `npm run bench`: GET /api/products/{id} on this machine, in one process tree and one run, in
 * these ways, each its own process started here:
 *
 *   products-service straight · the floor (node:http + mysql2, the same SELECT) ·
 *   the gateway with the cache off · the gateway with a warm cache · both again with authentication
 *   (a bearer token on every request) and rate limits (counted in Redis) on ·
 *   nginx as a plain proxy · nginx with proxy_cache, warm · a bare node:http ceiling (the same bytes) ·
 *   the same-bytes peer (bare node:http answering the warm hit's exact bytes) · a bare node:http proxy · fastify + @fastify/http-proxy · node:http + http-proxy-middleware alone
 *
 * Every server runs on core 0 and wrk on core 1 (taskset) where the machine has two cores, so the
 * ratios compare one core with one core. Each target: a warm-up, then BENCH_RUNS runs of
 * BENCH_SECONDS with `wrk -t1 -c64`, in rounds over all targets, each run started on a quiet core
 * (`settle`); the median run counts. Each gateway configuration runs as three processes, measured
 * alike: two identical gateway processes can differ in throughput for their whole life by enough
 * to decide a ratio between two configurations (docs/benchmarks/2026-11-27.md). What the
 * protections cost is then measured in pairs as well (`measurePairs`): each process of a protected
 * configuration at once with each of the same configuration unprotected, both on core 0, each
 * with its own wrk. Prints requests/s, p50/p99, non-2xx, each server's CPU time per request and
 * memory, each Node server's garbage-collection time per request (its pauses, summed inside the
 * process by bench/gc-meter.mjs), and the ratios the project's speed claims rest on; writes
 * bench/results/latest.json and bench/results/latest.svg (`--publish`: also docs/bench.svg, the
 * chart the README shows).
 *
 * `npm run bench -- --scale`: the read endpoints at 10k and at 1M rows instead (see scale.ts).
 * `npm run bench -- --tracing`: what tracing costs the gateway instead (see tracing.ts).
 * `npm run bench -- --jwks`: what checking tokens against a JWKS URL's key set costs the gateway instead (see jwks.ts).
 * `npm run bench -- --compression`: what compressing a page of 200 products costs and saves (see compression.ts).
 * `npm run bench -- --hit`: only the warm hit, its peers and the proxied read's bars (see hit.ts).
 */
import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { chartSvg, type ChartRow } from './chart.ts';
import { runCompression } from './compression.ts';
import { judgedHit, proxiedBars, runHit, sameBytesPeer } from './hit.ts';
import { startNginx } from './nginx.ts';
import { runScale } from './scale.ts';
import { runJwks } from './jwks.ts';
import { runTracing } from './tracing.ts';
import { cpuRatio, printRatios, type Judged } from './ratios.ts';
import { CONNECTIONS, measureAll, measurePairs, RUNS, SECONDS, WARM_UP_SECONDS, type Figures, type PairedRatio, type Target } from './rounds.ts';
import {
  cleanUpOnSignals,
  dropSchemas,
  ensureBenchTools,
  freePort,
  GATEWAY_PROCESSES,
  GUARD_OFF,
  guardOn,
  machine,
  productsServiceWithAProduct,
  pinning,
  REDIS_URL,
  round2,
  schemaUrl,
  startNode,
  startProcesses,
  stopAll,
  throwawaySchema,
  type Server,
  warm,
} from './support.ts';

/** The page of products the compression targets read: as many products as a page holds. */
const LIST_PATH = '/api/products?limit=200';

/** Fills products-service up to a full page of products (the bench's one included), for LIST_PATH. */
async function fillAPage(products: Server): Promise<void> {
  for (let n = 1; n < 200; n += 20) {
    await Promise.all(
      Array.from({ length: Math.min(20, 200 - n) }, async (_, i) => {
        const created = await fetch(`${products.url}/api/products`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ sku: `BENCH-${n + i + 1}`, name: `Benchmark widget ${n + i + 1}`, description: 'Measured.', price: { amount: '19.99', currency: 'EUR' }, stock: n + i }),
        });
        if (created.status !== 201) throw new Error(`could not create a product: ${created.status} ${await created.text()}`);
      }),
    );
  }
}

/**
 * A compressed hit and an identity hit of the same page of 200 products, on the same protected
 * gateway process, once the gateway compresses (none before: nothing to compare). The first
 * gateway process only: the ratio compares two answers of one process.
 */
async function compressionTargets(gateway: Server, authorised: Record<string, string>): Promise<Target[]> {
  const compressed = { ...authorised, 'accept-encoding': 'br' };
  await warm(`${gateway.url}${LIST_PATH}`, compressed);
  const answer = await fetch(`${gateway.url}${LIST_PATH}`, { headers: compressed });
  await answer.arrayBuffer();
  if (answer.headers.get('content-encoding') !== 'br') {
    console.log('the gateway does not compress yet: no compressed hit measured');
    return [];
  }
  // wrk sends no Accept-Encoding: an identity hit.
  await warm(`${gateway.url}${LIST_PATH}`, { ...authorised, 'accept-encoding': 'identity' });
  return [
    { key: 'listIdentityHit', label: 'gateway, 200 products, identity hit', group: 'ours', servers: [gateway], headers: authorised, path: LIST_PATH },
    { key: 'listCompressedHit', label: 'gateway, 200 products, br hit', group: 'ours', servers: [gateway], headers: compressed, path: LIST_PATH },
  ];
}

/** The bench's one product, as products-service answers it: its path, body and cache headers. */
interface Sample {
  products: Server;
  path: string;
  body: string;
  answered: Record<string, string>;
}

async function sampleProduct(schema: string): Promise<Sample> {
  const { products, path } = await productsServiceWithAProduct(schema, { sku: 'BENCH-1', name: 'Benchmark widget' });
  const sample = await fetch(`${products.url}${path}`);
  const body = await sample.text();
  const answered = Object.fromEntries(['content-type', 'etag', 'cache-control'].map((name) => [name, sample.headers.get(name) ?? '']));
  return { products, path, body, answered };
}

/** Starts every target's server(s), warms the caches, and lists the targets in the order they run. */
async function startTargets(schema: string, { products, path, body, answered }: Sample, authorised: { env: Record<string, string>; headers: Record<string, string> }) {
  const floor = await startNode('floor', 'bench/servers/floor.ts', { DATABASE_URL: schemaUrl(schema) }, await freePort());
  const gatewayEnv = { UPSTREAM_URL_TEMPLATE: products.url, REDIS_URL };
  // Without authentication and rate limits, as before the gateway had them; then with both (a
  // budget no run reaches: what is measured is checking the token and counting the request).
  const gateways = (name: string, env: Record<string, string>) =>
    startProcesses(name, async (one) => startNode(one, 'gateway/dist/main.js', { ...gatewayEnv, ...env }, await freePort()));
  const uncached = await gateways('gateway, cache off', { ...GUARD_OFF, CACHE_ENABLED: 'false' });
  const cached = await gateways('gateway, warm cache', { ...GUARD_OFF, CACHE_ENABLED: 'true' });
  const uncachedGuarded = await gateways('gateway, cache off, auth', { ...authorised.env, CACHE_ENABLED: 'false' });
  const cachedGuarded = await gateways('gateway, warm cache, auth', { ...authorised.env, CACHE_ENABLED: 'true' });
  const nginx = await startNginx(products.url, { plain: await freePort(), cached: await freePort() });
  const ceiling = await startNode('ceiling', 'bench/servers/ceiling.ts', { RESPONSE: JSON.stringify({ body, headers: answered }) }, await freePort());
  const bareProxy = await startNode('bare proxy', 'bench/servers/bare-proxy.ts', { UPSTREAM_URL: products.url }, await freePort());
  const fastify = await startNode('fastify proxy', 'bench/servers/fastify-proxy.ts', { UPSTREAM_URL: products.url }, await freePort());
  const hpmProxy = await startNode('http-proxy-middleware alone', 'bench/servers/hpm-proxy.ts', { UPSTREAM_URL: products.url }, await freePort());
  await fillAPage(products);
  for (const gateway of cached) await warm(`${gateway.url}${path}`, {});
  for (const gateway of cachedGuarded) await warm(`${gateway.url}${path}`, authorised.headers);
  await warm(`${nginx.cached.url}${path}`, {});
  const sameBytes = await sameBytesPeer(cachedGuarded[0]!, path, authorised.headers);
  const targets: Target[] = [
    { key: 'service', label: 'products-service straight', group: 'ours', servers: [products] },
    { key: 'floor', label: 'floor: node:http + mysql2', group: 'reference', servers: [floor] },
    // Each "auth + limits" run right after its plain one: side by side in the same run.
    { key: 'gatewayCacheOff', label: 'gateway, cache off', group: 'ours', servers: uncached },
    { key: 'gatewayCacheOffGuarded', label: 'gateway, cache off, auth + limits', group: 'ours', servers: uncachedGuarded, headers: authorised.headers },
    { key: 'gatewayWarm', label: 'gateway, warm cache', group: 'ours', servers: cached },
    { key: 'gatewayWarmGuarded', label: 'gateway, warm cache, auth + limits', group: 'ours', servers: cachedGuarded, headers: authorised.headers },
    { key: 'nginxProxy', label: 'nginx proxy, no cache', group: 'nginx', servers: [nginx.plain] },
    { key: 'nginxCache', label: 'nginx proxy_cache, warm', group: 'nginx', servers: [nginx.cached] },
    { key: 'ceiling', label: 'bare node:http ceiling', group: 'reference', servers: [ceiling] },
    // Asked as the hit is, token included: Node parses the same request on both sides.
    { key: 'sameBytes', label: "bare node:http, the hit's exact bytes", group: 'reference', servers: [sameBytes], headers: authorised.headers },
    { key: 'bareProxy', label: 'bare node:http proxy', group: 'reference', servers: [bareProxy] },
    { key: 'fastifyProxy', label: 'fastify + @fastify/http-proxy', group: 'reference', servers: [fastify] },
    { key: 'hpmProxy', label: 'node:http + http-proxy-middleware alone', group: 'reference', servers: [hpmProxy] },
    ...(await compressionTargets(cachedGuarded[0]!, authorised.headers)),
  ];
  return { targets, closeNginx: nginx.close };
}

/** The throughput ratios, and the CPU and GC ratios the speed goals are judged by. */
function judge(figures: Record<string, Figures>, paired: Record<'warm' | 'cacheOff', PairedRatio>, hit: Record<string, Judged>) {
  const f = (key: string) => figures[key]!;
  // The ratios with the gateway's protections on, as it is deployed; the last four say
  // what the protections cost: measured at once (the figures that count), and one at a time.
  const ratios = {
    'warm hit / nginx proxy_cache': round2(f('gatewayWarmGuarded').requestsPerSecond / f('nginxCache').requestsPerSecond),
    'warm hit / node:http ceiling': round2(f('gatewayWarmGuarded').requestsPerSecond / f('ceiling').requestsPerSecond),
    'gateway cache-off / nginx plain proxy': round2(f('gatewayCacheOffGuarded').requestsPerSecond / f('nginxProxy').requestsPerSecond),
    'gateway cache-off p99 / service p99': round2(f('gatewayCacheOffGuarded').p99Ms / f('service').p99Ms),
    'service / floor': round2(f('service').requestsPerSecond / f('floor').requestsPerSecond),
    'warm hit, auth + limits on / off': paired.warm.ratio,
    'cache-off proxy, auth + limits on / off': paired.cacheOff.ratio,
    'warm hit, on / off, one at a time': round2(f('gatewayWarmGuarded').requestsPerSecond / f('gatewayWarm').requestsPerSecond),
    'cache-off proxy, on / off, one at a time': round2(f('gatewayCacheOffGuarded').requestsPerSecond / f('gatewayCacheOff').requestsPerSecond),
  };
  // The speed goals (issues 38 and 49): CPU time per request with the protections on, over
  // the reference's; each holds when the median of five ratios is at most its goal. The warm hit's
  // over the same-bytes peer's is measured with both loaded at once (judgedHit), the others in the
  // rounds. The proxy hop is judged against http-proxy-middleware alone, the library the gateway
  // keeps: the bare proxy and fastify are reported beside it, with no goal, as is what the library
  // costs by itself against them.
  const bars = proxiedBars(figures);
  const cpuRatios: Record<string, Judged> = {
    ...hit,
    'warm hit / same-bytes peer, one at a time': cpuRatio(figures, 'gatewayWarmGuarded', 'sameBytes'),
    'warm hit / node:http ceiling': cpuRatio(figures, 'gatewayWarmGuarded', 'ceiling'),
    ...bars.cpu,
    ...(figures.listCompressedHit ? { 'compressed hit / identity hit': { ...cpuRatio(figures, 'listCompressedHit', 'listIdentityHit'), goal: 1.1 } } : {}),
    'proxied read / bare node:http proxy': cpuRatio(figures, 'gatewayCacheOffGuarded', 'bareProxy'),
    'proxied read / fastify': cpuRatio(figures, 'gatewayCacheOffGuarded', 'fastifyProxy'),
    'http-proxy-middleware alone / bare proxy': cpuRatio(figures, 'hpmProxy', 'bareProxy'),
    'http-proxy-middleware alone / fastify': cpuRatio(figures, 'hpmProxy', 'fastifyProxy'),
  };
  // The same for the time spent collecting garbage, per request: the gateway's proxy hop, cache
  // off and protections on, over http-proxy-middleware alone's.
  return { ratios, cpuRatios, gcRatios: bars.gc };
}

/** Prints every target's figures and the ratios. */
function print(targets: Target[], figures: Record<string, Figures>, { ratios, cpuRatios, gcRatios }: ReturnType<typeof judge>): void {
  console.log();
  console.table(
    Object.fromEntries(
      targets.map((t) => {
        const x = figures[t.key]!;
        const row = { 'req/s': x.requestsPerSecond, 'p50 ms': x.p50Ms, 'p99 ms': x.p99Ms, 'non-2xx': x.non2xx, errors: x.socketErrors, 'CPU µs/req': x.cpuMicrosPerRequest };
        // No GC column for nginx: a blank cell.
        const gc = x.gcMicrosPerRequest === undefined ? {} : { 'GC µs/req': x.gcMicrosPerRequest };
        return [t.label, { ...row, ...gc, 'RSS MiB': x.rssMiB }];
      }),
    ),
  );
  console.log('CPU time per request, over the reference\'s in the same round (median; each round):');
  printRatios(cpuRatios);
  console.log('GC time per request, over the reference\'s in the same round (median; each round):');
  printRatios(gcRatios);
  console.log('throughput ratios:');
  for (const [name, value] of Object.entries(ratios)) console.log(`  ${name.padEnd(42)} ${value}`);
}

/** Writes bench/results/latest.json and latest.svg, and with `publish` the chart the README shows. */
async function write(results: { date: string; machine: ReturnType<typeof machine> }, rows: ChartRow[], publish: boolean): Promise<void> {
  const m = results.machine;
  const svg = chartSvg(
    rows,
    `GET /api/products/{id}, ${results.date.slice(0, 10)}`,
    `${m.cpus} × ${m.model}, Node ${m.node}, wrk -t1 -c${CONNECTIONS}, median of ${RUNS} × ${SECONDS} s, ${pinning ? 'servers on core 0, wrk on core 1' : 'not pinned'}`,
  );
  const out = new URL('results/', import.meta.url);
  await mkdir(out, { recursive: true });
  await writeFile(new URL('latest.json', out), `${JSON.stringify(results, null, 2)}\n`);
  await writeFile(new URL('latest.svg', out), svg);
  console.log('written to bench/results/latest.json and bench/results/latest.svg');
  if (publish) {
    await copyFile(new URL('latest.svg', out), new URL('../docs/bench.svg', import.meta.url));
    console.log('chart copied to docs/bench.svg');
  }
}

async function compare(publish: boolean): Promise<void> {
  ensureBenchTools();
  const schema = throwawaySchema('products');
  cleanUpOnSignals([schema]);
  let closeNginx: () => Promise<void> = async () => undefined;
  try {
    const sample = await sampleProduct(schema);
    const { path, body } = sample;
    const started = await startTargets(schema, sample, await guardOn());
    closeNginx = started.closeNginx;
    const { targets } = started;
    console.log(
      `GET ${path} (${Buffer.byteLength(body)} bytes), wrk -t1 -c${CONNECTIONS}, median of ${RUNS} × ${SECONDS} s, ${pinning ? 'servers on core 0, wrk on core 1' : 'not pinned'}`,
    );
    const requestHeaders = (target: Target) => ({ ...target.headers });
    const figures = await measureAll(targets, path, requestHeaders);
    const target = (key: string) => targets.find((t) => t.key === key)!;
    console.log(`each protected gateway process at once with each unprotected one, ${GATEWAY_PROCESSES ** 2} × ${SECONDS} s:`);
    const paired = {
      warm: await measurePairs(target('gatewayWarm'), target('gatewayWarmGuarded'), path, requestHeaders),
      cacheOff: await measurePairs(target('gatewayCacheOff'), target('gatewayCacheOffGuarded'), path, requestHeaders),
    };
    const judged = judge(figures, paired, await judgedHit(target, path));
    const results = {
      date: new Date().toISOString(),
      command: 'npm run bench',
      machine: machine(),
      settings: { path, bytes: Buffer.byteLength(body), connections: CONNECTIONS, runs: RUNS, gatewayProcesses: GATEWAY_PROCESSES, seconds: SECONDS, warmUpSeconds: WARM_UP_SECONDS, logLevel: 'warn' },
      targets: Object.fromEntries(targets.map((t) => [t.key, { label: t.label, ...figures[t.key]! }])),
      paired,
      ...judged,
    };
    print(targets, figures, judged);
    const rows: ChartRow[] = targets.map((t) => ({ label: t.label, requestsPerSecond: figures[t.key]!.requestsPerSecond, p99Ms: figures[t.key]!.p99Ms, group: t.group }));
    await write(results, rows, publish);
  } finally {
    await stopAll();
    await closeNginx();
    await dropSchemas([schema]);
  }
}

const { values } = parseArgs({
  options: { scale: { type: 'boolean', default: false }, tracing: { type: 'boolean', default: false }, jwks: { type: 'boolean', default: false }, compression: { type: 'boolean', default: false }, hit: { type: 'boolean', default: false }, publish: { type: 'boolean', default: false } },
});
if (values.scale) await runScale(values.publish);
else if (values.compression) await runCompression();
else if (values.hit) await runHit();
else if (values.tracing) await runTracing();
else if (values.jwks) await runJwks();
else await compare(values.publish);

/**
 * `npm run bench`: GET /api/products/{id} on this machine, in one process tree and one run, nine
 * ways, each its own process started here:
 *
 *   products-service straight · the floor (node:http + mysql2, the same SELECT) ·
 *   the gateway with the cache off · the gateway with a warm cache · both again with authentication
 *   (a bearer token on every request) and rate limits (counted in Redis) on ·
 *   nginx as a plain proxy · nginx with proxy_cache, warm · a bare node:http ceiling (the same bytes)
 *
 * Every server runs on core 0 and wrk on core 1 (taskset) where the machine has two cores, so the
 * ratios compare one core with one core. Each target: a warm-up, then BENCH_RUNS runs of
 * BENCH_SECONDS with `wrk -t1 -c64`, in rounds over all targets, each run started on a quiet core
 * (`settle`); the median run counts. Each gateway configuration runs as three processes, measured
 * alike: two identical gateway processes once differed by 12% in throughput for their whole life,
 * enough to decide a ratio between two configurations. What the protections cost is then measured
 * in pairs as well (`measurePairs`): each process of a protected configuration at once with each
 * of the same configuration unprotected, both on core 0, each with its own wrk. Prints
 * requests/s, p50/p99, non-2xx, each server's CPU time per request and memory, and the ratios the
 * project's speed claims rest on; writes bench/results/latest.json and bench/results/latest.svg
 * (`--publish`: also docs/bench.svg, the chart the README shows).
 *
 * `npm run bench -- --scale`: the read endpoints at 10k and at 1M rows instead (see scale.ts).
 * `npm run bench -- --tracing`: what tracing costs the gateway instead (see tracing.ts).
 * `npm run bench -- --compression`: what compressing a page of 200 products costs and saves (see compression.ts).
 */
import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { chartSvg, type ChartRow } from './chart.ts';
import { runCompression } from './compression.ts';
import { startNginx } from './nginx.ts';
import { runScale } from './scale.ts';
import { runTracing } from './tracing.ts';
import {
  cleanUpOnSignals,
  cpuMicros,
  dropSchemas,
  ensureDebianTools,
  freePort,
  GUARD_OFF,
  guardOn,
  machine,
  median,
  productsServiceWithAProduct,
  pinning,
  REDIS_URL,
  rssMiB,
  schemaUrl,
  settle,
  startNode,
  stopAll,
  throwawaySchema,
  wrk,
  type LoadResult,
  type Server,
} from './support.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const WARM_UP_SECONDS = 2;
const GATEWAY_PROCESSES = Number(process.env.BENCH_GATEWAY_PROCESSES ?? 3);

interface Target {
  key: string;
  label: string;
  group: ChartRow['group'];
  /** Its server; for a gateway, GATEWAY_PROCESSES processes of the same configuration, each measured every round. */
  servers: Server[];
  /** Request headers of its own (a bearer token). */
  headers?: Record<string, string>;
}

interface Figures extends LoadResult {
  /** The target's own server process(es): CPU time per request, and resident memory after the runs (the larger instance's). */
  cpuMicrosPerRequest: number;
  rssMiB: number;
  runs: LoadResult[];
}

/**
 * Every target's warm-up, then RUNS rounds that each run every target (each of its processes) once,
 * every other round in reverse order: the runs of one target are spread over the whole bench, so a
 * burst of other work on the machine falls on all targets alike instead of on whichever was being
 * measured, and no target always runs right after the same one. CPU time is counted over a target's own runs.
 */
async function measureAll(targets: Target[], path: string, headers: (target: Target) => Record<string, string>): Promise<Record<string, Figures>> {
  const options = (target: Target) => ({ connections: CONNECTIONS, headers: headers(target) });
  for (const target of targets) for (const server of target.servers) await wrk(`${server.url}${path}`, { ...options(target), seconds: WARM_UP_SECONDS });
  const runs = new Map<string, LoadResult[]>(targets.map((t) => [t.key, []]));
  const cpu = new Map<string, number>(targets.map((t) => [t.key, 0]));
  for (let round = 1; round <= RUNS; round++) {
    process.stdout.write(`  round ${round} of ${RUNS}:`);
    // Every other round in reverse order: what one run leaves behind on the machine (the service
    // both gateways share collecting the garbage of the run before, say) falls on each target of a
    // pair alike, not always on the second.
    for (const target of round % 2 === 1 ? targets : targets.toReversed()) {
      for (const server of target.servers) {
        await settle();
        const before = cpuMicros(server.pids());
        const result = await wrk(`${server.url}${path}`, { ...options(target), seconds: SECONDS });
        cpu.set(target.key, cpu.get(target.key)! + cpuMicros(server.pids()) - before);
        runs.get(target.key)!.push(result);
        process.stdout.write(` ${target.key} ${result.requestsPerSecond}`);
      }
    }
    process.stdout.write('\n');
  }
  const figures: Record<string, Figures> = {};
  for (const target of targets) {
    const own = runs.get(target.key)!;
    const requests = own.reduce((sum, r) => sum + r.requests, 0);
    figures[target.key] = {
      requestsPerSecond: median(own.map((r) => r.requestsPerSecond)),
      p50Ms: median(own.map((r) => r.p50Ms)),
      p99Ms: median(own.map((r) => r.p99Ms)),
      requests,
      non2xx: own.reduce((sum, r) => sum + r.non2xx, 0),
      socketErrors: own.reduce((sum, r) => sum + r.socketErrors, 0),
      cpuMicrosPerRequest: Math.round((cpu.get(target.key)! / Math.max(requests, 1)) * 10) / 10,
      rssMiB: Math.max(...target.servers.map((server) => rssMiB(server.pids()))),
      runs: own,
    };
  }
  return figures;
}

/** The protected configuration's throughput over the unprotected one's, run at once: each run's ratio, and their median. */
interface PairedRatio {
  ratio: number;
  runs: { off: number; on: number; ratio: number }[];
}

/**
 * What the protections cost a configuration, as a throughput ratio measured in pairs: the protected
 * and the unprotected gateway run at the same time, each with its own wrk (both on core 1), both
 * on core 0, which the kernel shares out evenly between them, so each answers in proportion to
 * how little CPU time a request costs it. Whatever the machine does meanwhile falls on both alike,
 * which one run after the other cannot promise: on a shared virtual machine the bare ceiling server
 * answered 53,000 requests a second in one round and 17,000 two minutes later, and one at a time
 * the ratio of the same two configurations ranged from 0.81 to 1.12 over four bench runs in one
 * hour. Every process of one configuration meets every process of the other once, and the median
 * of those runs counts: one process that happens to be fast or slow for its whole life moves a
 * third of the runs, not the median.
 */
async function measurePairs(off: Target, on: Target, path: string, headers: (target: Target) => Record<string, string>): Promise<PairedRatio> {
  const runs: PairedRatio['runs'] = [];
  for (const protectedServer of on.servers) {
    for (const server of off.servers) {
      await settle();
      const [offResult, onResult] = await Promise.all([
        wrk(`${server.url}${path}`, { connections: CONNECTIONS, headers: headers(off), seconds: SECONDS }),
        wrk(`${protectedServer.url}${path}`, { connections: CONNECTIONS, headers: headers(on), seconds: SECONDS }),
      ]);
      runs.push({ off: offResult.requestsPerSecond, on: onResult.requestsPerSecond, ratio: round2(onResult.requestsPerSecond / offResult.requestsPerSecond) });
    }
  }
  console.log(`  ${on.key} / ${off.key}, at once: ${runs.map((r) => `${r.on}/${r.off} = ${r.ratio}`).join(', ')}`);
  return { ratio: median(runs.map((r) => r.ratio)), runs };
}

/** Asks `url` until the response says it came from the cache (the gateway's and nginx's X-Cache). */
async function warm(url: string, headers: Record<string, string>): Promise<void> {
  for (let attempt = 0; attempt < 50; attempt++) {
    if ((await fetch(url, { headers })).headers.get('x-cache') === 'HIT') return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${url} never answered from its cache`);
}

const round2 = (n: number) => Math.round(n * 100) / 100;

async function compare(publish: boolean): Promise<void> {
  ensureDebianTools({ wrk: 'wrk', nginx: 'nginx' });
  const schema = throwawaySchema('products');
  cleanUpOnSignals([schema]);
  let closeNginx: () => Promise<void> = async () => undefined;
  try {
    const { products, path } = await productsServiceWithAProduct(schema, { sku: 'BENCH-1', name: 'Benchmark widget' });
    const sample = await fetch(`${products.url}${path}`);
    const body = await sample.text();
    const answered = Object.fromEntries(['content-type', 'etag', 'cache-control'].map((name) => [name, sample.headers.get(name) ?? '']));

    const floor = await startNode('floor', 'bench/servers/floor.ts', { DATABASE_URL: schemaUrl(schema) }, await freePort());
    const gatewayEnv = { UPSTREAM_URL_TEMPLATE: products.url, REDIS_URL };
    // Without authentication and rate limits, as before the gateway had them; then with both (a
    // budget no run reaches: what is measured is checking the token and counting the request).
    const guarded = await guardOn();
    const authorised = guarded.headers;
    const gateways = async (name: string, env: Record<string, string>) =>
      Promise.all(Array.from({ length: GATEWAY_PROCESSES }, async (_, i) => startNode(`${name} #${i + 1}`, 'gateway/dist/main.js', { ...gatewayEnv, ...env }, await freePort())));
    const uncached = await gateways('gateway, cache off', { ...GUARD_OFF, CACHE_ENABLED: 'false' });
    const cached = await gateways('gateway, warm cache', { ...GUARD_OFF, CACHE_ENABLED: 'true' });
    const uncachedGuarded = await gateways('gateway, cache off, auth', { ...guarded.env, CACHE_ENABLED: 'false' });
    const cachedGuarded = await gateways('gateway, warm cache, auth', { ...guarded.env, CACHE_ENABLED: 'true' });
    const nginx = await startNginx(products.url, { plain: await freePort(), cached: await freePort() });
    closeNginx = nginx.close;
    const ceiling = await startNode('ceiling', 'bench/servers/ceiling.ts', { RESPONSE: JSON.stringify({ body, headers: answered }) }, await freePort());
    const headers: Record<string, string> = {};
    for (const gateway of cached) await warm(`${gateway.url}${path}`, headers);
    for (const gateway of cachedGuarded) await warm(`${gateway.url}${path}`, { ...headers, ...authorised });
    await warm(`${nginx.cached.url}${path}`, headers);

    const targets: Target[] = [
      { key: 'service', label: 'products-service straight', group: 'ours', servers: [products] },
      { key: 'floor', label: 'floor: node:http + mysql2', group: 'reference', servers: [floor] },
      // Each "auth + limits" run right after its plain one: side by side in the same run.
      { key: 'gatewayCacheOff', label: 'gateway, cache off', group: 'ours', servers: uncached },
      { key: 'gatewayCacheOffGuarded', label: 'gateway, cache off, auth + limits', group: 'ours', servers: uncachedGuarded, headers: authorised },
      { key: 'gatewayWarm', label: 'gateway, warm cache', group: 'ours', servers: cached },
      { key: 'gatewayWarmGuarded', label: 'gateway, warm cache, auth + limits', group: 'ours', servers: cachedGuarded, headers: authorised },
      { key: 'nginxProxy', label: 'nginx proxy, no cache', group: 'nginx', servers: [nginx.plain] },
      { key: 'nginxCache', label: 'nginx proxy_cache, warm', group: 'nginx', servers: [nginx.cached] },
      { key: 'ceiling', label: 'bare node:http ceiling', group: 'reference', servers: [ceiling] },
    ];
    console.log(
      `GET ${path} (${Buffer.byteLength(body)} bytes), wrk -t1 -c${CONNECTIONS}, median of ${RUNS} × ${SECONDS} s, ${pinning ? 'servers on core 0, wrk on core 1' : 'not pinned'}`,
    );
    const requestHeaders = (target: Target) => ({ ...headers, ...target.headers });
    const figures = await measureAll(targets, path, requestHeaders);
    const target = (key: string) => targets.find((t) => t.key === key)!;
    console.log(`each protected gateway process at once with each unprotected one, ${GATEWAY_PROCESSES ** 2} × ${SECONDS} s:`);
    const paired = {
      warm: await measurePairs(target('gatewayWarm'), target('gatewayWarmGuarded'), path, requestHeaders),
      cacheOff: await measurePairs(target('gatewayCacheOff'), target('gatewayCacheOffGuarded'), path, requestHeaders),
    };

    const f = (key: string) => figures[key]!;
    // The issue's ratios with the gateway's protections on, as it is deployed; the last four say
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
    const results = {
      date: new Date().toISOString(),
      command: 'npm run bench',
      machine: machine(),
      settings: { path, bytes: Buffer.byteLength(body), connections: CONNECTIONS, runs: RUNS, gatewayProcesses: GATEWAY_PROCESSES, seconds: SECONDS, warmUpSeconds: WARM_UP_SECONDS, logLevel: 'warn' },
      targets: Object.fromEntries(targets.map((t) => [t.key, { label: t.label, ...f(t.key) }])),
      paired,
      ratios,
    };

    console.log();
    console.table(
      Object.fromEntries(
        targets.map((t) => {
          const x = f(t.key);
          return [t.label, { 'req/s': x.requestsPerSecond, 'p50 ms': x.p50Ms, 'p99 ms': x.p99Ms, 'non-2xx': x.non2xx, errors: x.socketErrors, 'CPU µs/req': x.cpuMicrosPerRequest, 'RSS MiB': x.rssMiB }];
        }),
      ),
    );
    console.log('ratios:');
    for (const [name, value] of Object.entries(ratios)) console.log(`  ${name.padEnd(42)} ${value}`);

    const rows: ChartRow[] = targets.map((t) => ({ label: t.label, requestsPerSecond: f(t.key).requestsPerSecond, p99Ms: f(t.key).p99Ms, group: t.group }));
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
  } finally {
    await stopAll();
    await closeNginx();
    await dropSchemas([schema]);
  }
}

const { values } = parseArgs({
  options: { scale: { type: 'boolean', default: false }, tracing: { type: 'boolean', default: false }, compression: { type: 'boolean', default: false }, publish: { type: 'boolean', default: false } },
});
if (values.scale) await runScale(values.publish);
else if (values.compression) await runCompression();
else if (values.tracing) await runTracing();
else await compare(values.publish);

/**
 * `npm run bench:service-ab -- <before-checkout> [--runs N] [--seconds S] [--connections C]`: the
 * products-service of this checkout (after) against that of another built checkout (before, e.g.
 * one without the services' metrics), side by side in one run on one schema, each asked directly
 * (no gateway) for the same product, each run loading both at once, each with its own wrk: servers
 * on core 0 and wrk on core 1 (bench/support.ts), so that whatever else the machine does in a run
 * falls on both alike (one after the other, its drifts decided the ratio: docs/performance.md).
 * Prints each run's requests/s and CPU time per request (from /proc), the medians, and the ratio
 * of CPU per request within each run's pair and their median (the verdict). The after service serves its metrics on a port of its own, unscraped: a scrape every
 * 15 s costs nothing per request.
 */
import { parseArgs } from 'node:util';
import { cleanUpOnSignals, dropSchemas, ensureBenchTools, freePort, GC_METER, median, productsServiceWithAProduct, schemaUrl, startOptions, startServer, stopAll, stopServer, throwawaySchema } from './support.ts';
import { measuredPairAtOnce } from './measured-runs.ts';
import { wrk, type LoadResult } from './wrk.ts';
import { countOf } from '../tools/env.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { runs: { type: 'string' }, seconds: { type: 'string' }, connections: { type: 'string' } },
});
const before = positionals[0];
if (!before) throw new Error('usage: npm run bench:service-ab -- <before-checkout> [--runs N] [--seconds S] [--connections C]');
const runs = countOf('--runs', values.runs, 5);
const seconds = countOf('--seconds', values.seconds, 5);
const connections = countOf('--connections', values.connections, 32);

ensureBenchTools();
const schema = throwawaySchema('service_ab');
cleanUpOnSignals([schema]);
try {
  // The schema's migrations and its product come from a process of their own, stopped before the
  // runs: the two measured processes then start alike, neither carrying what that work left in it.
  const { products: seeder, path } = await productsServiceWithAProduct(schema, { sku: 'SAB-1', name: 'Service A/B widget' });
  await stopServer(seeder);
  // Each with this checkout's start options, as deployed, and the GC meter after them (as startNode gives it).
  const startSide = async (side: string, checkout: string) =>
    startServer(`products-service (${side})`, process.execPath, [...startOptions('products-service'), ...GC_METER, `${checkout}/products-service/dist/main.js`], {
      env: { DATABASE_URL: schemaUrl(schema) },
      port: await freePort(),
      gcMeter: true,
    });
  const services = { before: await startSide('before', before), after: await startSide('after', '.') };
  const results: Record<keyof typeof services, LoadResult[]> = { before: [], after: [] };
  const cpuPerRequest: Record<keyof typeof services, number[]> = { before: [], after: [] };
  const load = (which: keyof typeof services, runSeconds: number) => wrk(`${services[which].url}${path}`, { seconds: runSeconds, connections });
  for (const which of ['before', 'after'] as const) await load(which, 2);
  for (let run = 0; run < runs; run++) {
    const loaded = (which: 'before' | 'after') => ({ server: services[which], load: () => load(which, seconds) });
    const measured = await measuredPairAtOnce(run, loaded('before'), loaded('after'));
    (['before', 'after'] as const).forEach((which, i) => {
      const { result, cpuMicros } = measured[i]!;
      cpuPerRequest[which].push(cpuMicros / Math.max(result.requests, 1));
      results[which].push(result);
      console.log(`run ${run + 1} ${which.padEnd(6)} ${String(result.requestsPerSecond).padStart(6)} req/s  ${cpuPerRequest[which].at(-1)!.toFixed(1).padStart(5)} µs CPU/req  p50 ${result.p50Ms} ms  p99 ${result.p99Ms} ms  non-2xx ${result.non2xx}`);
    });
  }
  console.log(`\nGET ${path} from products-service, wrk -t1 -c${connections} each, ${runs} × ${seconds} s, both at once; medians:`);
  for (const which of ['before', 'after'] as const) {
    console.log(`${which.padEnd(6)} ${median(results[which].map((r) => r.requestsPerSecond))} req/s  ${median(cpuPerRequest[which]).toFixed(1)} µs CPU/req`);
  }
  // Each run's pair ran side by side: its ratio is free of the machine's drift across the runs.
  const ratios = cpuPerRequest.after.map((after, run) => after / cpuPerRequest.before[run]!);
  console.log(`CPU per request, after ÷ before, run by run: ${ratios.map((ratio) => ratio.toFixed(3)).join(', ')}; median ${median(ratios).toFixed(3)}`);
} finally {
  await stopAll();
  await dropSchemas([schema]);
}

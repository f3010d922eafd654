/**
 * `npm run bench:gateway-ab -- <before-checkout> [--cache on|off] [--guard off|on] [--before-guard off|on] [--runs N] [--seconds S]`:
 * the gateway of this checkout (after) against the gateway of another built checkout (before, e.g.
 * /work/main), side by side in one run: one products-service, both gateways in front of it, and
 * each run loads both at once, each with its own wrk (the machine is shared and noisy: at once, its
 * drifts fall on both alike). `--guard on` runs the gateways with authentication and rate limits
 * on and a bearer token on every request (as `npm run bench` does); `--before-guard` sets the
 * before gateway apart, so `-- . --before-guard off --guard on` says what the protections cost in
 * this checkout. Prints requests/s, CPU time and garbage-collection time per request (the bench's
 * GC meter, bench/gc-meter.mjs, preloaded into both gateways) and p50/p99 of each run, the medians
 * of each, the ratio of CPU per request within each run's pair and their median (the A/B verdict),
 * the same for GC time, and each gateway's resident memory at the end. Uses the bench's helpers
 * (bench/support.ts): servers on core 0, wrk on core 1.
 */
import { parseArgs } from 'node:util';
import {
  cleanUpOnSignals,
  dropSchemas,
  ensureBenchTools,
  freePort,
  GC_METER,
  GUARD_OFF,
  guardOn,
  median,
  productsServiceWithAProduct,
  REDIS_URL,
  rssMiB,
  startNode,
  startOptions,
  startServer,
  stopAll,
  throwawaySchema,
} from './support.ts';
import { measuredPairAtOnce } from './measured-runs.ts';
import { wrk, type LoadResult } from './wrk.ts';
import { countOf } from '../tools/env.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    cache: { type: 'string', default: 'off' },
    guard: { type: 'string', default: 'off' },
    'before-guard': { type: 'string' },
    runs: { type: 'string' },
    seconds: { type: 'string' },
    connections: { type: 'string' },
  },
});
const before = positionals[0];
const onOff = (value: string) => value === 'on' || value === 'off';
const guard = { before: values['before-guard'] ?? values.guard, after: values.guard };
if (!before || !onOff(values.cache) || !onOff(guard.before) || !onOff(guard.after)) {
  throw new Error('usage: npm run bench:gateway-ab -- <before-checkout> [--cache on|off] [--guard off|on] [--before-guard off|on] [--runs N] [--seconds S]');
}
const runs = countOf('--runs', values.runs, 4);
const seconds = countOf('--seconds', values.seconds, 5);
const connections = countOf('--connections', values.connections, 64);

ensureBenchTools();
const schema = throwawaySchema('ab');
cleanUpOnSignals([schema]);
try {
  const { products, path } = await productsServiceWithAProduct(schema, { sku: 'AB-1', name: 'A/B widget' });
  const guarded = await guardOn();
  const setup = (on: string) => (on === 'on' ? guarded : { env: GUARD_OFF, headers: {} });
  const env = (on: string) => ({
    UPSTREAM_URL_TEMPLATE: products.url,
    REDIS_URL,
    CACHE_ENABLED: values.cache === 'on' ? 'true' : 'false',
    ...setup(on).env,
  });
  const gateways = {
    // With this checkout's start options (startNode gives them only to this checkout's entry points):
    // without them the before gateway ran with V8's default heap sizing, not as deployed. The GC
    // meter after them, as startNode gives it to the after gateway.
    before: await startServer('gateway (before)', process.execPath, [...startOptions('gateway'), ...GC_METER, `${before}/gateway/dist/main.js`], {
      env: env(guard.before),
      port: await freePort(),
      gcMeter: true,
    }),
    after: await startNode('gateway (after)', 'gateway/dist/main.js', env(guard.after), await freePort()),
  };
  const results: Record<keyof typeof gateways, LoadResult[]> = { before: [], after: [] };
  const cpuPerRequest: Record<keyof typeof gateways, number[]> = { before: [], after: [] };
  const gcPerRequest: Record<keyof typeof gateways, number[]> = { before: [], after: [] };
  const load = (which: keyof typeof gateways, runSeconds: number) => wrk(`${gateways[which].url}${path}`, { seconds: runSeconds, connections, headers: setup(guard[which]).headers });
  for (const which of ['before', 'after'] as const) await load(which, 2);
  for (let run = 0; run < runs; run++) {
    const loaded = (which: 'before' | 'after') => ({ server: gateways[which], load: () => load(which, seconds) });
    const measured = await measuredPairAtOnce(run, loaded('before'), loaded('after'));
    (['before', 'after'] as const).forEach((which, i) => {
      const { result, cpuMicros: micros, gcMicros } = measured[i]!;
      cpuPerRequest[which].push(micros / Math.max(result.requests, 1));
      gcPerRequest[which].push(gcMicros! / Math.max(result.requests, 1));
      results[which].push(result);
      console.log(
        `run ${run + 1} ${which.padEnd(6)} ${String(result.requestsPerSecond).padStart(6)} req/s  ${cpuPerRequest[which].at(-1)!.toFixed(1).padStart(5)} µs CPU/req  ${gcPerRequest[which].at(-1)!.toFixed(2).padStart(5)} µs GC/req  p50 ${result.p50Ms} ms  p99 ${result.p99Ms} ms  non-2xx ${result.non2xx}`,
      );
    });
  }
  console.log(`\nGET ${path} through the gateway, cache ${values.cache}, wrk -t1 -c${connections} each, ${runs} × ${seconds} s, both at once; medians:`);
  for (const which of ['before', 'after'] as const) {
    const r = results[which];
    console.log(
      `${which.padEnd(6)} (guard ${guard[which].padEnd(3)}) ${median(r.map((x) => x.requestsPerSecond))} req/s  ${median(cpuPerRequest[which]).toFixed(1)} µs CPU/req  ${median(gcPerRequest[which]).toFixed(2)} µs GC/req  p50 ${median(r.map((x) => x.p50Ms))} ms  p99 ${median(r.map((x) => x.p99Ms))} ms  RSS ${rssMiB(gateways[which].pids())} MiB`,
    );
  }
  // Each run's pair ran side by side: its ratio is free of the machine's drift across the runs.
  for (const [name, perRequest] of [['CPU', cpuPerRequest], ['GC', gcPerRequest]] as const) {
    const ratios = perRequest.after.map((after, run) => after / perRequest.before[run]!);
    console.log(`${name} per request, after ÷ before, run by run: ${ratios.map((ratio) => ratio.toFixed(2)).join(', ')}; median ${median(ratios).toFixed(3)}`);
  }
} finally {
  await stopAll();
  await dropSchemas([schema]);
}

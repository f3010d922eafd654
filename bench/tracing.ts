/**
 * `npm run bench -- --tracing`: what tracing costs the gateway, in CPU time per request (from
 * /proc), for a warm cache hit and for a read proxied to products-service (cache off), the
 * gateway's protections on as deployed. Three gateway configurations for each: without the SDK
 * loaded (no `--import` preload), with the preload and no exporter configured (as deployed by
 * default), and exporting over OTLP (http/protobuf, to a sink in this process) with 10% of traces
 * sampled (parentbased_traceidratio 0.1); each configuration runs as BENCH_GATEWAY_PROCESSES
 * processes (3). BENCH_TRACING_RUNS rounds (5) of BENCH_SECONDS (5) each, every round running each
 * process once, configurations in a rotated order, each run on a quiet core (`settle`); a round's
 * figure for a configuration is its processes' CPU time over the requests they answered, its ratio
 * that over the one without the SDK in that round, and the median of the rounds counts. Each
 * round also runs the SDK by itself
 * (bench/servers/otel-floor.ts: a fixed answer with one server span per request, 10% sampled, the
 * same exporter) against the same server without it: what the SDK alone adds to a request, in µs,
 * beside what the goal allows a hit (15% of the gateway's hit without the SDK). Prints every
 * round; writes bench/results/tracing.json.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  cleanUpOnSignals,
  cpuMicros,
  dropSchemas,
  ensureDebianTools,
  freePort,
  guardOn,
  machine,
  median,
  productsServiceWithAProduct,
  pinning,
  REDIS_URL,
  settle,
  startNode,
  startOptions,
  startServer,
  stopAll,
  throwawaySchema,
  wrk,
  type Server,
} from './support.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const RUNS = Number(process.env.BENCH_TRACING_RUNS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
// Processes of each configuration, each measured every round: as in `npm run bench`, one process
// per configuration lets chance decide a ratio (two identical gateways differ by about 5%).
const PROCESSES = Number(process.env.BENCH_GATEWAY_PROCESSES ?? 3);

const CONFIGURATIONS = ['noSdk', 'noExporter', 'sampled10'] as const;
type Configuration = (typeof CONFIGURATIONS)[number];
const PATHS = ['hit', 'proxied'] as const;
type Kind = (typeof PATHS)[number];

/** An OTLP/HTTP endpoint that takes every export and keeps nothing: what a collector costs the gateway is its own side only. */
async function otlpSink(): Promise<{ url: string; exports: () => number; close: () => Promise<void> }> {
  let received = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      received++;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    exports: () => received,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const round1 = (n: number) => Math.round(n * 10) / 10;
const round3 = (n: number) => Math.round(n * 1000) / 1000;

export async function runTracing(): Promise<void> {
  ensureDebianTools({ wrk: 'wrk' });
  const schema = throwawaySchema('tracing');
  cleanUpOnSignals([schema]);
  const sink = await otlpSink();
  try {
    const { products, path } = await productsServiceWithAProduct(schema, { sku: 'TRACE-1', name: 'Traced widget' });
    const guarded = await guardOn();
    const base = { UPSTREAM_URL_TEMPLATE: products.url, REDIS_URL, ...guarded.env };
    const tracing: Record<Configuration, Record<string, string>> = {
      noSdk: {},
      noExporter: {},
      sampled10: { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.1' },
    };
    // The start script's node options without the preload: the same gateway, the SDK never loaded.
    const withoutPreload = startOptions('gateway').filter((option, i, all) => option !== '--import' && all[i - 1] !== '--import');
    const processes = (start: (name: string) => Promise<Server>, name: string) => Promise.all(Array.from({ length: PROCESSES }, (_, i) => start(`${name} #${i + 1}`)));
    const start = (configuration: Configuration, kind: Kind): Promise<Server[]> => {
      const env = { ...base, ...tracing[configuration], CACHE_ENABLED: kind === 'hit' ? 'true' : 'false' };
      const name = `gateway ${configuration} ${kind}`;
      if (configuration === 'noSdk') return processes(async (one) => startServer(one, process.execPath, [...withoutPreload, 'gateway/dist/main.js'], { env, port: await freePort() }), name);
      return processes(async (one) => startNode(one, 'gateway/dist/main.js', env, await freePort()), name);
    };
    const gateways = {} as Record<Kind, Record<Configuration, Server[]>>;
    for (const kind of PATHS) {
      gateways[kind] = {} as Record<Configuration, Server[]>;
      for (const configuration of CONFIGURATIONS) gateways[kind][configuration] = await start(configuration, kind);
    }
    const floorEnv = { SDK: '1', OTEL_SERVICE_NAME: 'otel-floor', ...tracing.sampled10 };
    const floor = {
      noSdk: await processes(async (one) => startNode(one, 'bench/servers/otel-floor.ts', {}, await freePort()), 'SDK floor, no SDK'),
      sampled10: await processes(async (one) => startNode(one, 'bench/servers/otel-floor.ts', floorEnv, await freePort()), 'SDK floor, 10% sampled'),
    };
    const load = (server: Server, seconds: number) => wrk(`${server.url}${path}`, { connections: CONNECTIONS, headers: guarded.headers, seconds });
    for (const kind of PATHS) for (const configuration of CONFIGURATIONS) for (const server of gateways[kind][configuration]) await load(server, 2);
    for (const server of Object.values(floor).flat()) await load(server, 2);
    // A configuration's figure in a round: the CPU time of its processes over the requests they answered.
    const measure = async (servers: Server[]) => {
      let cpu = 0;
      let requests = 0;
      let rps = 0;
      for (const server of servers) {
        await settle();
        const before = cpuMicros(server.pids());
        const result = await load(server, SECONDS);
        if (result.non2xx > 0 || result.socketErrors > 0) throw new Error(`${server.name}: ${result.non2xx} non-2xx, ${result.socketErrors} socket errors`);
        cpu += cpuMicros(server.pids()) - before;
        requests += result.requests;
        rps += result.requestsPerSecond / servers.length;
      }
      return { cpu: round1(cpu / Math.max(requests, 1)), rps: Math.round(rps) };
    };
    const floorRounds: { noSdk: number; sampled10: number; addedMicros: number }[] = [];

    console.log(
      `GET ${path}, the gateway's protections on, wrk -t1 -c${CONNECTIONS}, ${RUNS} rounds × ${SECONDS} s, ${PROCESSES} processes of each, ${pinning ? 'servers on core 0, wrk on core 1' : 'not pinned'}`,
    );
    const rounds: { startedAt: string; kind: Kind; cpuMicrosPerRequest: Record<Configuration, number>; requestsPerSecond: Record<Configuration, number>; ratios: { noExporter: number; sampled10: number } }[] = [];
    for (let round = 0; round < RUNS; round++) {
      for (const kind of PATHS) {
        const startedAt = new Date().toISOString();
        const cpu = {} as Record<Configuration, number>;
        const rps = {} as Record<Configuration, number>;
        // Rotated each round, so no configuration always runs first or right after the same one.
        const order = CONFIGURATIONS.map((_, i) => CONFIGURATIONS[(i + round) % CONFIGURATIONS.length]!);
        for (const configuration of order) {
          const measured = await measure(gateways[kind][configuration]);
          cpu[configuration] = measured.cpu;
          rps[configuration] = measured.rps;
        }
        const ratios = { noExporter: round3(cpu.noExporter / cpu.noSdk), sampled10: round3(cpu.sampled10 / cpu.noSdk) };
        rounds.push({ startedAt, kind, cpuMicrosPerRequest: cpu, requestsPerSecond: rps, ratios });
        console.log(
          `  round ${round + 1} ${kind.padEnd(7)} ${startedAt.slice(11, 19)} UTC  CPU µs/req: no SDK ${cpu.noSdk}, no exporter ${cpu.noExporter}, 10% sampled ${cpu.sampled10}  ratios ${ratios.noExporter} / ${ratios.sampled10}`,
        );
      }
      const floorCpu = { noSdk: 0, sampled10: 0 };
      for (const configuration of round % 2 ? (['sampled10', 'noSdk'] as const) : (['noSdk', 'sampled10'] as const)) floorCpu[configuration] = (await measure(floor[configuration])).cpu;
      const addedMicros = round1(floorCpu.sampled10 - floorCpu.noSdk);
      floorRounds.push({ ...floorCpu, addedMicros });
      console.log(`  round ${round + 1} SDK alone  CPU µs/req: no SDK ${floorCpu.noSdk}, 10% sampled ${floorCpu.sampled10}: +${addedMicros} µs`);
    }
    const medians = Object.fromEntries(
      PATHS.map((kind) => {
        const own = rounds.filter((r) => r.kind === kind);
        return [kind, { noExporter: median(own.map((r) => r.ratios.noExporter)), sampled10: median(own.map((r) => r.ratios.sampled10)) }];
      }),
    );
    console.log('CPU per request over the gateway without the SDK, median of the rounds (no exporter · exporter, 10% sampled):');
    for (const kind of PATHS) console.log(`  ${kind.padEnd(8)} ${medians[kind]!.noExporter} · ${medians[kind]!.sampled10}`);
    const hitBudgets = rounds.filter((r) => r.kind === 'hit').map((r) => round1(r.cpuMicrosPerRequest.noSdk * 0.15));
    const sdkAlone = { addedMicros: median(floorRounds.map((r) => r.addedMicros)), hitBudgetMicros: median(hitBudgets), rounds: floorRounds };
    console.log(
      `the SDK alone, 10% sampled: +${sdkAlone.addedMicros} µs a request (${floorRounds.map((r) => r.addedMicros).join(' / ')}); 15% of the gateway's hit without it: ${sdkAlone.hitBudgetMicros} µs (${hitBudgets.join(' / ')})`,
    );
    console.log(`the sink took ${sink.exports()} exports`);
    const results = {
      date: new Date().toISOString(),
      command: 'npm run bench -- --tracing',
      machine: machine(),
      settings: { path, connections: CONNECTIONS, runs: RUNS, seconds: SECONDS, processes: PROCESSES, protocol: 'http/protobuf', sampler: 'parentbased_traceidratio 0.1' },
      rounds,
      medians,
      sdkAlone,
      exports: sink.exports(),
    };
    const out = new URL('results/', import.meta.url);
    await mkdir(out, { recursive: true });
    await writeFile(new URL('tracing.json', out), `${JSON.stringify(results, null, 2)}\n`);
    console.log('written to bench/results/tracing.json');
  } finally {
    await stopAll();
    await sink.close();
    await dropSchemas([schema]);
  }
}

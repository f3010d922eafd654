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
 * round also runs the SDK by itself (bench/servers/otel-floor.ts: a fixed answer with one server
 * span per request, 10% sampled, the same exporter; as many processes) against the same server
 * without it: what the SDK alone adds to a request, in µs, beside what the goal allows a hit (15%
 * of the gateway's hit without the SDK). Prints every round; writes bench/results/tracing.json.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  cleanUpOnSignals,
  dropSchemas,
  ensureBenchTools,
  freePort,
  GATEWAY_PROCESSES,
  guardOn,
  median,
  productsServiceWithAProduct,
  pinning,
  REDIS_URL,
  startNode,
  startOptions,
  startProcesses,
  startServer,
  stopAll,
  throwawaySchema,
  writeResults,
  type Server,
} from './support.ts';
import { measuredRun } from './measured-runs.ts';
import { type LoadResult, wrk } from './wrk.ts';
import { countFromEnv } from '../tools/env.ts';

const SECONDS = countFromEnv('BENCH_SECONDS', 5);
const RUNS = countFromEnv('BENCH_TRACING_RUNS', 5);
const CONNECTIONS = countFromEnv('BENCH_CONNECTIONS', 64);

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

type Load = (server: Server, seconds: number) => Promise<LoadResult>;
type Gateways = Record<Kind, Record<Configuration, Server[]>>;
interface GatewayRound {
  startedAt: string;
  kind: Kind;
  cpuMicrosPerRequest: Record<Configuration, number>;
  requestsPerSecond: Record<Configuration, number>;
  ratios: { noExporter: number; sampled10: number };
}
interface FloorRound {
  noSdk: number;
  sampled10: number;
  addedMicros: number;
}

/** A configuration's figure in a round: each of its processes run once, their CPU time over the requests they answered. */
async function measure(servers: Server[], load: Load): Promise<{ cpu: number; rps: number }> {
  let cpu = 0;
  let requests = 0;
  let rps = 0;
  for (const server of servers) {
    const run = await measuredRun(server, () => load(server, SECONDS));
    const { result } = run;
    if (result.non2xx > 0 || result.socketErrors > 0) throw new Error(`${server.name}: ${result.non2xx} non-2xx, ${result.socketErrors} socket errors`);
    cpu += run.cpuMicros;
    requests += result.requests;
    rps += result.requestsPerSecond / servers.length;
  }
  return { cpu: round1(cpu / Math.max(requests, 1)), rps: Math.round(rps) };
}

/** The gateway's processes of every configuration, for a hit and for a proxied read. */
async function startGateways(env: Record<string, string>, tracing: Record<Configuration, Record<string, string>>): Promise<Gateways> {
  // The start script's node options without the preload: the same gateway, the SDK never loaded.
  const withoutPreload = startOptions('gateway').filter((option, i, all) => option !== '--import' && all[i - 1] !== '--import');
  const gateways = {} as Gateways;
  for (const kind of PATHS) {
    gateways[kind] = {} as Record<Configuration, Server[]>;
    for (const configuration of CONFIGURATIONS) {
      const own = { ...env, ...tracing[configuration], CACHE_ENABLED: kind === 'hit' ? 'true' : 'false' };
      const args = configuration === 'noSdk' ? [...withoutPreload, 'gateway/dist/main.js'] : [...startOptions('gateway'), 'gateway/dist/main.js'];
      gateways[kind][configuration] = await startProcesses(`gateway ${configuration} ${kind}`, async (name) => startServer(name, process.execPath, args, { env: own, port: await freePort() }));
    }
  }
  return gateways;
}

/** One round of one kind of request: every configuration, in an order rotated each round so that none always runs first or right after the same one. */
async function gatewayRound(gateways: Gateways, kind: Kind, round: number, load: Load): Promise<GatewayRound> {
  const startedAt = new Date().toISOString();
  const cpu = {} as Record<Configuration, number>;
  const rps = {} as Record<Configuration, number>;
  for (const configuration of CONFIGURATIONS.map((_, i) => CONFIGURATIONS[(i + round) % CONFIGURATIONS.length]!)) {
    ({ cpu: cpu[configuration], rps: rps[configuration] } = await measure(gateways[kind][configuration], load));
  }
  const ratios = { noExporter: round3(cpu.noExporter / cpu.noSdk), sampled10: round3(cpu.sampled10 / cpu.noSdk) };
  console.log(
    `  round ${round + 1} ${kind.padEnd(7)} ${startedAt.slice(11, 19)} UTC  CPU µs/req: no SDK ${cpu.noSdk}, no exporter ${cpu.noExporter}, 10% sampled ${cpu.sampled10}  ratios ${ratios.noExporter} / ${ratios.sampled10}`,
  );
  return { startedAt, kind, cpuMicrosPerRequest: cpu, requestsPerSecond: rps, ratios };
}

/** One round of the SDK by itself: the floor server without it and 10% sampled, in alternating order. */
async function floorRound(floor: Record<'noSdk' | 'sampled10', Server[]>, round: number, load: Load): Promise<FloorRound> {
  const cpu = { noSdk: 0, sampled10: 0 };
  for (const configuration of round % 2 ? (['sampled10', 'noSdk'] as const) : (['noSdk', 'sampled10'] as const)) cpu[configuration] = (await measure(floor[configuration], load)).cpu;
  const addedMicros = round1(cpu.sampled10 - cpu.noSdk);
  console.log(`  round ${round + 1} SDK alone  CPU µs/req: no SDK ${cpu.noSdk}, 10% sampled ${cpu.sampled10}: +${addedMicros} µs`);
  return { ...cpu, addedMicros };
}

/** The medians of the rounds, printed: the ratios, and the SDK alone beside what the goal allows a hit. */
function summarise(rounds: GatewayRound[], floorRounds: FloorRound[]) {
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
  return { medians, sdkAlone };
}

export async function runTracing(): Promise<void> {
  ensureBenchTools();
  const schema = throwawaySchema('tracing');
  cleanUpOnSignals([schema]);
  const sink = await otlpSink();
  try {
    const { products, path } = await productsServiceWithAProduct(schema, { sku: 'TRACE-1', name: 'Traced widget' });
    const guarded = await guardOn();
    const tracing: Record<Configuration, Record<string, string>> = {
      noSdk: {},
      noExporter: {},
      sampled10: { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.1' },
    };
    const gateways = await startGateways({ UPSTREAM_URL_TEMPLATE: products.url, REDIS_URL, ...guarded.env }, tracing);
    const floorServer = (env: Record<string, string>) => async (name: string) => startNode(name, 'bench/servers/otel-floor.ts', env, await freePort());
    const floor = {
      noSdk: await startProcesses('SDK floor, no SDK', floorServer({})),
      sampled10: await startProcesses('SDK floor, 10% sampled', floorServer({ SDK: '1', OTEL_SERVICE_NAME: 'otel-floor', ...tracing.sampled10 })),
    };
    const load: Load = (server, seconds) => wrk(`${server.url}${path}`, { connections: CONNECTIONS, headers: guarded.headers, seconds });
    for (const server of [...PATHS.flatMap((kind) => Object.values(gateways[kind]).flat()), ...Object.values(floor).flat()]) await load(server, 2);

    console.log(
      `GET ${path}, the gateway's protections on, wrk -t1 -c${CONNECTIONS}, ${RUNS} rounds × ${SECONDS} s, ${GATEWAY_PROCESSES} processes of each, ${pinning ? 'servers on core 0, wrk on core 1' : 'not pinned'}`,
    );
    const rounds: GatewayRound[] = [];
    const floorRounds: FloorRound[] = [];
    for (let round = 0; round < RUNS; round++) {
      for (const kind of PATHS) rounds.push(await gatewayRound(gateways, kind, round, load));
      floorRounds.push(await floorRound(floor, round, load));
    }
    const { medians, sdkAlone } = summarise(rounds, floorRounds);
    console.log(`the sink took ${sink.exports()} exports`);
    const results = {
      settings: { path, connections: CONNECTIONS, runs: RUNS, seconds: SECONDS, processes: GATEWAY_PROCESSES, protocol: 'http/protobuf', sampler: 'parentbased_traceidratio 0.1' },
      rounds,
      medians,
      sdkAlone,
      exports: sink.exports(),
    };
    await writeResults('tracing', results);
  } finally {
    await stopAll();
    await sink.close();
    await dropSchemas([schema]);
  }
}

/**
 * `npm run bench:breakdown [-- --seconds S --runs N --connections C --allocations --keep-profiles]`: where a
 * request's CPU time goes, stage by stage. Starts products-service with one product, a gateway with
 * its cache off and one with it on (both with authentication and rate limits on, a bearer token on
 * every request), http-proxy-middleware alone (bench/servers/hpm-proxy.ts) and the bare node:http
 * ceiling with the service's exact bytes (bench/servers/ceiling.ts), each with V8's CPU profiler
 * on (`--cpu-prof`, a sample every 100 µs). Each is loaded with `wrk -t1 -c64` (warmed up first),
 * RUNS rounds of SECONDS each, interleaved; once every server has stopped (each writes its profile
 * as it exits), the samples taken while wrk ran are added up by group of self time (`groupOf`: a
 * gateway or shared module by its file, an npm package, a part of Node's internals, the garbage
 * collector, "(program)") and divided by the requests wrk counted in those runs. Idle time is left
 * out. Prints a proxied read (gateway, cache off, against http-proxy-middleware alone) and a warm
 * hit (gateway, cache on, against the ceiling) side by side, µs per request and the difference per
 * group, and writes them to bench/results/breakdown.json.
 *
 * With `--allocations`, the same runs count bytes instead of time: each server has V8's sampling
 * heap profiler preloaded (bench/allocation-sampler.mjs), on during the measured runs only and
 * counting the objects collected since, and the bytes it estimates each function allocated are
 * added up by the same groups, per request (bench/results/breakdown-allocations.json).
 *
 * The profiler samples wall-clock time: a process waiting for its core counts as busy in whatever
 * it was running. So products-service runs on the load generator's core, not beside the server
 * profiled, and the CPU time from /proc is printed beside each total: where the two part, other
 * work took the core. Read the split between the groups, not the absolute figures.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import {
  cleanUpOnSignals,
  dropSchemas,
  ensureBenchTools,
  freePort,
  guardOn,
  machine,
  pinning,
  productsServiceWithAProduct,
  REDIS_URL,
  ROOT,
  ALLOCATION_SAMPLER,
  ALLOCATION_SAMPLING_BYTES,
  sampleAllocations,
  startOptions,
  startServer,
  stopAll,
  throwawaySchema,
  type Server,
} from './support.ts';
import { measuredRun } from './measured-runs.ts';
import { wrk, type LoadResult } from './wrk.ts';
import { countOf } from '../tools/env.ts';

/** A V8 CPU profile as `--cpu-prof` writes it (the fields read here). */
export interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string }; children?: number[] }[];
  /** µs, on the monotonic clock `process.hrtime` reads. */
  startTime: number;
  endTime: number;
  /** The node on top of the stack at each sample. */
  samples: number[];
  /** µs from the previous sample (the first: from startTime). */
  timeDeltas: number[];
}

/** The group of the profiler's idle samples: not counted. */
export const IDLE = '(idle)';

/** Node's own modules (`node:…` URLs) by group. */
const NODE_GROUPS: [RegExp, string][] = [
  [/^node:(_http_client|_http_agent)$/, 'node: http client'],
  [/^node:(_http_server|_http_incoming|_http_outgoing|_http_common|http)$/, 'node: http server + messages'],
  [/^node:(stream|internal\/streams\/.*)$/, 'node: streams'],
  [/^node:(net|internal\/net|internal\/stream_base_commons)$/, 'node: net'],
  [/^node:(events|internal\/events\/.*)$/, 'node: events'],
  [/^node:(timers|internal\/timers|internal\/process\/task_queues|internal\/async_hooks|async_hooks)$/, 'node: timers + ticks'],
];

/**
 * The group a profile node's self time counts to, from its function name and script URL:
 * - the profiler's own nodes: "(idle)" (IDLE, left out), "(garbage collector)" as `GC`, "(program)"
 *   (V8 and Node outside any script);
 * - a file of the gateway or of shared, by its path under dist without `.js`: `gateway: stages/auth`,
 *   `shared: platform/http/observation`;
 * - http-proxy-middleware and httpxy as one group; any other npm package by its name: `npm: pino`;
 * - a reference server's own file: `bench: servers/hpm-proxy.ts`;
 * - Node's internals by part (NODE_GROUPS), the rest of them as `node: other internals`;
 * - undefined for a frame without a script (native code: `writev`, V8's builtins), whose time
 *   counts to its caller's group;
 * - anything else: `other`.
 */
export function groupOf(functionName: string, url: string): string | undefined {
  if (functionName === '(idle)') return IDLE;
  if (functionName === '(garbage collector)') return 'GC';
  if (functionName === '(program)') return '(program)';
  if (url === '') return functionName === '(root)' ? 'other' : undefined;
  const file = url.replace(/^file:\/\//, '');
  const workspace = /\/(?:node_modules\/@app\/)?(gateway|shared)\/dist\/(.+)\.js$/.exec(file);
  if (workspace && !/\/node_modules\/(?!@app\/)/.test(file)) return `${workspace[1]}: ${workspace[2]}`;
  const pkg = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(file)?.[1];
  if (pkg === 'http-proxy-middleware' || pkg === 'httpxy') return 'http-proxy-middleware + httpxy';
  if (pkg !== undefined) return `npm: ${pkg}`;
  const bench = /\/bench\/(.+\.ts)$/.exec(file)?.[1];
  if (bench !== undefined) return `bench: ${bench}`;
  if (url.startsWith('node:')) return NODE_GROUPS.find(([pattern]) => pattern.test(url))?.[1] ?? 'node: other internals';
  return 'other';
}

/**
 * The self time (µs) of `profile`'s samples taken within `windows` (µs on the profile's clock,
 * from inclusive, to exclusive), by group (`groupOf`; a frame without a group counts to its
 * nearest caller with one), idle left out. A sample lasts until the next one (the last: until
 * the profile's end), as Chrome's DevTools count it.
 */
export function selfTimeByGroup(profile: CpuProfile, windows: { from: number; to: number }[]): Map<string, number> {
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const parents = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node.id);
  const groups = new Map<number, string>();
  const groupOfNode = (id: number): string => {
    const known = groups.get(id);
    if (known !== undefined) return known;
    const { functionName, url } = nodes.get(id)!.callFrame;
    const parent = parents.get(id);
    const group = groupOf(functionName, url) ?? (parent === undefined ? 'other' : groupOfNode(parent));
    groups.set(id, group);
    return group;
  };
  const times = new Map<string, number>();
  let at = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i]!;
    const lasts = (i + 1 < profile.samples.length ? at + profile.timeDeltas[i + 1]! : profile.endTime) - at;
    if (!windows.some(({ from, to }) => at >= from && at < to)) continue;
    const group = groupOfNode(profile.samples[i]!);
    if (group !== IDLE) times.set(group, (times.get(group) ?? 0) + lasts);
  }
  return times;
}

/** A node of a sampling heap profile (the fields read here): the bytes its function allocated itself. */
export interface AllocationNode {
  callFrame: { functionName: string; url: string };
  selfSize: number;
  children: AllocationNode[];
}

/**
 * The bytes of a sampling heap profile (`head`, its root) by group, added to `into`: a node's own
 * bytes count to its group, a frame without one (V8's builtins, native code) to its nearest caller's.
 */
export function bytesByGroup(head: AllocationNode, into = new Map<string, number>()): Map<string, number> {
  const visit = (node: AllocationNode, callers: string) => {
    const group = groupOf(node.callFrame.functionName, node.callFrame.url) ?? callers;
    if (node.selfSize > 0) into.set(group, (into.get(group) ?? 0) + node.selfSize);
    for (const child of node.children) visit(child, group);
  };
  visit(head, 'other');
  return into;
}

/** One measured server of a comparison: what wrk counted, CPU from /proc, and µs per request by group. */
interface Measured {
  label: string;
  requests: number;
  requestsPerSecond: number;
  non2xx: number;
  procCpuPerRequest: number;
  totalPerRequest: number;
  perRequest: Record<string, number>;
}

const round1 = (n: number) => Math.round(n * 10) / 10;

/** A comparison's rows: every group either side has, by the gateway's µs per request, largest first. */
export function rows(gateway: Record<string, number>, reference: Record<string, number>): { group: string; gateway: number; reference: number; difference: number }[] {
  const groups = [...new Set([...Object.keys(gateway), ...Object.keys(reference)])];
  return groups
    .map((group) => ({ group, gateway: gateway[group] ?? 0, reference: reference[group] ?? 0, difference: (gateway[group] ?? 0) - (reference[group] ?? 0) }))
    .sort((a, b) => b.gateway - a.gateway || b.reference - a.reference);
}

/** What a breakdown counts: CPU time from profiles, or bytes allocated (`--allocations`). */
type Counted = 'time' | 'bytes';
/** How each is printed; rows under `small` per request on both sides as one line (the JSON has them all). */
const UNITS: Record<Counted, { header: string; total: string; digits: number; small: number }> = {
  time: { header: 'µs per request (self time)', total: 'total, idle left out', digits: 1, small: 0.2 },
  bytes: { header: 'bytes allocated per request', total: 'total', digits: 0, small: 16 },
};

function printed(title: string, gateway: Measured, reference: Measured, counted: Counted): string {
  const unit = UNITS[counted];
  const cell = (n: number) => n.toFixed(unit.digits).padStart(10);
  const diff = (n: number) => `${n >= 0 ? '+' : ''}${n.toFixed(unit.digits)}`.padStart(10);
  const all = rows(gateway.perRequest, reference.perRequest);
  const shown = all.filter((row) => row.gateway >= unit.small || row.reference >= unit.small);
  const small = all.filter((row) => !shown.includes(row));
  const sum = (list: typeof all, side: 'gateway' | 'reference' | 'difference') => list.reduce((total, row) => total + row[side], 0);
  const width = Math.max(40, ...shown.map((row) => row.group.length));
  const line = (name: string, a: number, b: number, d: number) => `${name.padEnd(width)}${cell(a)}${cell(b)}${diff(d)}`;
  return [
    title,
    `${unit.header.padEnd(width)}${'gateway'.padStart(10)}${'reference'.padStart(10)}${'diff'.padStart(10)}`,
    ...shown.map((row) => line(row.group, row.gateway, row.reference, row.difference)),
    ...(small.length > 0 ? [line(`(${small.length} groups under ${unit.small} each)`, sum(small, 'gateway'), sum(small, 'reference'), sum(small, 'difference'))] : []),
    line(unit.total, gateway.totalPerRequest, reference.totalPerRequest, gateway.totalPerRequest - reference.totalPerRequest),
    line('CPU from /proc, same runs', gateway.procCpuPerRequest, reference.procCpuPerRequest, gateway.procCpuPerRequest - reference.procCpuPerRequest),
    `gateway:   ${gateway.label}: ${gateway.requests} requests, ${gateway.requestsPerSecond} req/s, non-2xx ${gateway.non2xx}`,
    `reference: ${reference.label}: ${reference.requests} requests, ${reference.requestsPerSecond} req/s, non-2xx ${reference.non2xx}`,
  ].join('\n');
}

/** The node options that make a process write its CPU profile into `dir` when it exits. */
const profiled = (dir: string) => ['--cpu-prof', `--cpu-prof-dir=${dir}`, '--cpu-prof-interval=100'];

async function warmHit(url: string, headers: Record<string, string>): Promise<void> {
  for (let attempt = 0; attempt < 50; attempt++) {
    if ((await fetch(url, { headers })).headers.get('x-cache') === 'HIT') return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${url} never answered from its cache`);
}

interface Target {
  key: 'gatewayProxied' | 'hpm' | 'gatewayHit' | 'ceiling';
  label: string;
  server: Server;
  dir: string;
  headers: Record<string, string>;
  windows: { from: number; to: number }[];
  results: LoadResult[];
  procCpu: number;
  /** Bytes allocated in the measured runs by group (`--allocations`). */
  allocated: Map<string, number>;
}

const nowMicros = () => Number(process.hrtime.bigint() / 1000n);

/** The four servers, started with the CPU profiler writing into `profiles` or the allocation sampler; the hit's cache warmed. */
async function startTargets(products: Server, itemPath: string, profiles: string, counted: Counted): Promise<Target[]> {
  const sample = await fetch(`${products.url}${itemPath}`);
  const body = await sample.text();
  const answered = Object.fromEntries(['content-type', 'etag', 'cache-control'].map((name) => [name, sample.headers.get(name) ?? '']));
  const guarded = await guardOn();
  const start = async (key: Target['key'], label: string, file: string, env: Record<string, string>, headers: Record<string, string>, nodeOptions: string[] = []): Promise<Target> => {
    const dir = path.join(profiles, key);
    if (counted === 'time') mkdirSync(dir);
    const instrument = counted === 'bytes' ? ALLOCATION_SAMPLER : profiled(dir);
    const server = await startServer(label, process.execPath, [...nodeOptions, ...instrument, file], { env, port: await freePort(), ipc: counted === 'bytes' });
    return { key, label, server, dir, headers, windows: [], results: [], procCpu: 0, allocated: new Map() };
  };
  const gatewayEnv = (cache: boolean) => ({ UPSTREAM_URL_TEMPLATE: products.url, REDIS_URL, CACHE_ENABLED: String(cache), ...guarded.env });
  const targets = [
    await start('gatewayProxied', 'gateway, cache off, auth + limits', 'gateway/dist/main.js', gatewayEnv(false), guarded.headers, startOptions('gateway')),
    await start('hpm', 'http-proxy-middleware alone', 'bench/servers/hpm-proxy.ts', { UPSTREAM_URL: products.url }, {}),
    await start('gatewayHit', 'gateway, warm hit, auth + limits', 'gateway/dist/main.js', gatewayEnv(true), guarded.headers, startOptions('gateway')),
    await start('ceiling', 'bare node:http ceiling', 'bench/servers/ceiling.ts', { RESPONSE: JSON.stringify({ body, headers: answered }) }, {}),
  ];
  const gatewayHit = targets.find((t) => t.key === 'gatewayHit')!;
  await warmHit(`${gatewayHit.server.url}${itemPath}`, gatewayHit.headers);
  return targets;
}

/** `runs` interleaved rounds of `load` on every target, each run's window, result, CPU and (bytes) allocations kept. */
async function measureRuns(targets: Target[], runs: number, counted: Counted, load: (target: Target) => Promise<LoadResult>): Promise<void> {
  for (let run = 0; run < runs; run++) {
    for (const target of run % 2 === 0 ? targets : [...targets].reverse()) {
      let from = 0;
      const { result, cpuMicros } = await measuredRun(target.server, async () => {
        from = nowMicros();
        if (counted === 'time') return load(target);
        const sampled = await sampleAllocations<LoadResult, { head: AllocationNode }>(target.server.child, () => load(target));
        bytesByGroup(sampled.profile.head, target.allocated);
        return sampled.result;
      });
      target.windows.push({ from, to: nowMicros() });
      target.results.push(result);
      target.procCpu += cpuMicros;
      console.log(`run ${run + 1} ${target.label.padEnd(36)} ${String(result.requestsPerSecond).padStart(6)} req/s  ${(cpuMicros / Math.max(result.requests, 1)).toFixed(1).padStart(6)} µs CPU/req  non-2xx ${result.non2xx}`);
    }
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string' },
      runs: { type: 'string' },
      connections: { type: 'string' },
      allocations: { type: 'boolean', default: false },
      'keep-profiles': { type: 'boolean', default: false },
    },
  });
  const seconds = countOf('--seconds', values.seconds, 5);
  const runs = countOf('--runs', values.runs, 2);
  const connections = countOf('--connections', values.connections, 64);
  const counted: Counted = values.allocations ? 'bytes' : 'time';
  ensureBenchTools();
  const schema = throwawaySchema('breakdown');
  cleanUpOnSignals([schema]);
  const profiles = mkdtempSync(path.join(os.tmpdir(), 'breakdown-'));
  const started = new Date();
  let targets: Target[];
  let productPath: string;
  try {
    const { products, path: itemPath } = await productsServiceWithAProduct(schema, { sku: 'BREAKDOWN-1', name: 'Breakdown widget' });
    productPath = itemPath;
    // The profiler samples wall-clock time: a server sharing its core with the service it waits on
    // would count the service's turns (woken by the server's own write to it) as its own time, in
    // the write. The service moves to the load generator's core; each profiled server has the
    // servers' core to itself (but for other work on the machine).
    if (pinning) execFileSync('taskset', ['-a', '-p', '-c', pinning.load, String(products.child.pid)], { stdio: 'ignore' });
    targets = await startTargets(products, itemPath, profiles, counted);
    const load = (target: Target, runSeconds: number) => wrk(`${target.server.url}${itemPath}`, { seconds: runSeconds, connections, headers: target.headers });
    for (const target of targets) await load(target, 2);
    await measureRuns(targets, runs, counted, (target) => load(target, seconds));
  } finally {
    // Each profiled server writes its profile as it exits.
    await stopAll();
    await dropSchemas([schema]);
  }
  const measured = Object.fromEntries(targets.map((target) => [target.key, measure(target, counted)])) as Record<Target['key'], Measured>;
  if (!values['keep-profiles']) rmSync(profiles, { recursive: true, force: true });
  report({ started, seconds, runs, connections, path: productPath, measured, counted, profiles: values['keep-profiles'] ? profiles : undefined });
}

/** A target's CPU time by group within its runs, from the profile its server wrote as it exited. */
function profiledTime(target: Target): Map<string, number> {
  const files = readdirSync(target.dir).filter((file) => file.endsWith('.cpuprofile'));
  if (files.length !== 1) throw new Error(`${target.label} left ${files.length} CPU profiles in ${target.dir}, not 1 (did it exit on SIGTERM within 5 s?)`);
  const profile = JSON.parse(readFileSync(path.join(target.dir, files[0]!), 'utf8')) as CpuProfile;
  const outside = target.windows.find(({ from, to }) => from < profile.startTime || to > profile.endTime);
  if (outside) throw new Error(`${target.label}'s profile (${profile.startTime}–${profile.endTime} µs) does not cover a run (${outside.from}–${outside.to} µs): not the clock of process.hrtime?`);
  return selfTimeByGroup(profile, target.windows);
}

/** A target's runs as µs (or bytes) per request by group. */
function measure(target: Target, counted: Counted): Measured {
  const requests = target.results.reduce((sum, result) => sum + result.requests, 0);
  const counts = counted === 'time' ? profiledTime(target) : target.allocated;
  const perRequest = Object.fromEntries([...counts].map(([group, n]) => [group, n / Math.max(requests, 1)]));
  const seconds = target.windows.reduce((sum, { from, to }) => sum + (to - from), 0) / 1e6;
  return {
    label: target.label,
    requests,
    requestsPerSecond: Math.round(requests / seconds),
    non2xx: target.results.reduce((sum, result) => sum + result.non2xx, 0),
    procCpuPerRequest: target.procCpu / Math.max(requests, 1),
    totalPerRequest: Object.values(perRequest).reduce((sum, n) => sum + n, 0),
    perRequest,
  };
}

function report(run: { started: Date; seconds: number; runs: number; connections: number; path: string; measured: Record<Target['key'], Measured>; counted: Counted; profiles: string | undefined }): void {
  const { measured } = run;
  const comparisons = [
    { name: 'proxied read', title: `A proxied read: gateway (cache off) against http-proxy-middleware alone`, gateway: measured.gatewayProxied, reference: measured.hpm },
    { name: 'warm hit', title: `A warm hit: gateway (cache on) against the bare node:http ceiling`, gateway: measured.gatewayHit, reference: measured.ceiling },
  ];
  console.log(
    `\nGET ${run.path}, wrk -t1 -c${run.connections}, ${run.runs} × ${run.seconds} s per server, interleaved; ${run.counted === 'time' ? 'CPU profile every 100 µs' : `allocations sampled every ${ALLOCATION_SAMPLING_BYTES} bytes`}; started ${run.started.toISOString()}\n`,
  );
  for (const comparison of comparisons) console.log(`${printed(comparison.title, comparison.gateway, comparison.reference, run.counted)}\n`);
  if (run.profiles) console.log(`profiles kept in ${run.profiles}`);
  const round = (record: Record<string, number>) => Object.fromEntries(Object.entries(record).map(([k, v]) => [k, round1(v)]));
  const results = path.join(ROOT, 'bench/results');
  const file = run.counted === 'time' ? 'breakdown.json' : 'breakdown-allocations.json';
  mkdirSync(results, { recursive: true });
  writeFileSync(
    path.join(results, file),
    `${JSON.stringify(
      {
        date: run.started.toISOString(),
        machine: machine(),
        settings: { path: run.path, connections: run.connections, runs: run.runs, seconds: run.seconds, ...(run.counted === 'time' ? { samplingIntervalMicros: 100 } : { samplingIntervalBytes: ALLOCATION_SAMPLING_BYTES }) },
        unit: run.counted === 'time' ? 'µs of profiled self time per request, idle left out' : 'bytes allocated per request (sampled estimate)',
        comparisons: comparisons.map(({ name, gateway, reference }) => ({
          name,
          gateway: { ...gateway, procCpuPerRequest: round1(gateway.procCpuPerRequest), totalPerRequest: round1(gateway.totalPerRequest), perRequest: round(gateway.perRequest) },
          reference: { ...reference, procCpuPerRequest: round1(reference.procCpuPerRequest), totalPerRequest: round1(reference.totalPerRequest), perRequest: round(reference.perRequest) },
          rows: rows(gateway.perRequest, reference.perRequest).map((row) => ({ ...row, gateway: round1(row.gateway), reference: round1(row.reference), difference: round1(row.difference) })),
        })),
      },
      null,
      2,
    )}\n`,
  );
  console.log(`written to bench/results/${file}`);
}

if (import.meta.main) await main();

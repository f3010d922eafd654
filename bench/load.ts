/**
 * `npm run load`: the load curve. Starts the real stack as separate processes (every service in
 * services.json on throwaway schemas, the gateway with its Redis cache reached through a TCP
 * proxy this script controls), creates 500 products, then drives the gateway with wrk the way a
 * busy client population would: random `GET /api/products/{id}`, 10% of them merge-patch writes
 * instead, at 64, 256, 1,000 and 2,000 connections, 15 s per step, the whole ramp three times over
 * (`ROUNDS`). Then the same mix at the
 * concurrency of the best step (the most goodput) with Redis cut off for 2 s in the middle (the
 * proxy drops every connection; the shared Redis itself is never touched), second by second, with
 * the moments of its recovery: when the gateway judged Redis up again, when the cache served hits
 * again, when goodput was back at the best step's. The gateway runs alone on core 0, the rest of
 * the stack and wrk on core 1 (`CORES`).
 *
 * Per step it prints goodput (2xx and 304 per second), the share of writes the gateway shed (503
 * before the service saw them, from its /metrics), p50/p99 latency, status counts, the cache
 * outcomes, requests shed by the gateway, the event-loop delay of every process (bench/loop-probe.ts),
 * their RSS (/proc/<pid>/status) and how many connections waited in the gateway's accept queues
 * (/proc/net/tcp), where a client's request is already sent but the gateway cannot see it yet; it
 * writes them to bench/results/load.json and draws the curve in docs/load-curve.svg. Every process
 * is stopped and every schema dropped at the end.
 *
 * For experiments: LOAD_STEPS (e.g. `256,1000`), LOAD_STEP_SECONDS, LOAD_ROUNDS, LOAD_WRITE_PERCENT, LOAD_SKIP_CUT=1,
 * LOAD_CUT_CONNECTIONS (instead of the best step's), LOAD_LOG_LEVEL (the servers', `error` by
 * default), LOAD_GATEWAY_NODE_FLAGS (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`: the profile is
 * written when the gateway stops at the end), LISTEN_SOCKETS (passed on to every process), and the
 * gateway's own UPSTREAM_* and REDIS_COMMAND_TIMEOUT_MS variables, passed on to it.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { readServiceList } from '../shared/src/platform/services.ts';
import { TcpProxy } from '../test/support/tcp-proxy.ts';
import { cleanUpOnSignals, cpuMicros, dropSchemas, ensureDebianTools, freePort, nodeOptionsFor, pinned, pinning, REDIS_URL as REDIS, ROOT, schemaUrl, stopWithTheRest, throwawaySchema } from './support.ts';
import { countFromEnv, countsFromEnv } from '../test/support/env.ts';
import { readMetrics } from '../test/support/metrics.ts';

const REDIS_URL = new URL(REDIS);
const STEPS = countsFromEnv('LOAD_STEPS', [64, 256, 1000, 2000]);
const STEP_SECONDS = countFromEnv('LOAD_STEP_SECONDS', 15);
/**
 * Rounds of the whole ramp; a step's figures are those of its rounds together. A shared machine's
 * speed wanders within seconds and more over minutes (docs/benchmarks/2026-11-27.md): steps run
 * one after the other once each would compare their minutes as much as their concurrency, while
 * each step sampled at moments a minute apart meets the same drift as the others.
 */
const ROUNDS = countFromEnv('LOAD_ROUNDS', 3);
/** The percentiles wrk reports of each window (finer towards the tail), to pool a step's rounds by (`pooledLatency`). */
const QUANTILES = [
  ...Array.from({ length: 90 }, (_, i) => i + 1),
  ...Array.from({ length: 90 }, (_, i) => Math.round((90.1 + i * 0.1) * 10) / 10),
  ...Array.from({ length: 99 }, (_, i) => Math.round((99.01 + i * 0.01) * 100) / 100),
];
const PRODUCTS = 500;
const WRITE_PERCENT = Number(process.env.LOAD_WRITE_PERCENT ?? 10);
const CUT_SECONDS = 20;
const CUT_AT_SECOND = 8;
const CUT_FOR_MS = 2_000;
// Above the gateway's own UPSTREAM_TIMEOUT_MS (10 s): whatever the gateway gives up on reaches the client as a status.
const CLIENT_TIMEOUT = '11s';

interface Probed {
  name: string;
  child: ChildProcess;
  url: string;
  /** Where the gateway serves GET /metrics (its METRICS_PORT). */
  metricsUrl: string;
}

/**
 * Where each process runs, on a machine of two cores or more: the gateway alone on core 0, and
 * everything else of ours (the services, wrk, this script with its Redis proxy) on core 1; the
 * shared MariaDB and Redis go where the kernel puts them. Left to the kernel, the same step moves
 * with where it happens to place the gateway and wrk's threads, and the curve shows the scheduler,
 * not the gateway (docs/benchmarks/2026-11-27.md). A shared machine's drift over minutes stays.
 */
const CORES = pinning ? { gateway: pinning.server, others: pinning.load } : undefined;

/** Starts a server process with the event-loop probe preloaded (over an IPC channel), on its core (`CORES`). */
async function start(name: string, script: string, env: Record<string, string>, nodeFlags: string[] = []): Promise<Probed> {
  const port = await freePort();
  const metricsPort = await freePort();
  const [command, args] = pinned(name === 'gateway' ? CORES?.gateway : CORES?.others, process.execPath, [
    ...nodeOptionsFor(script),
    ...nodeFlags,
    '--import',
    './bench/loop-probe.ts',
    script,
  ]);
  const child = spawn(command, args, {
    cwd: ROOT,
    // Errors only: at thousands of requests a second, a warn line per shed request is load of its own.
    env: {
      PATH: process.env.PATH,
      PORT: String(port),
      METRICS_PORT: String(metricsPort),
      LOG_LEVEL: process.env.LOAD_LOG_LEVEL ?? 'error',
      ...(process.env.LISTEN_SOCKETS ? { LISTEN_SOCKETS: process.env.LISTEN_SOCKETS } : {}),
      ...env,
    },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  stopWithTheRest(child);
  const url = `http://127.0.0.1:${port}`;
  for (let attempt = 0; attempt < 200; attempt++) {
    if (child.exitCode !== null) break;
    if (await fetch(`${url}/healthz`).then((r) => r.ok, () => false)) return { name, child, url, metricsUrl: `http://127.0.0.1:${metricsPort}/metrics` };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  child.kill();
  throw new Error(`${name} did not start`);
}

interface LoopDelay {
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

/** The event-loop delay of `process` since the last ask. */
function loopDelay({ child }: Probed): Promise<LoopDelay | undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), 5_000);
    child.once('message', (message) => {
      clearTimeout(timer);
      resolve(message as LoopDelay);
    });
    child.send('event-loop-delay?');
  });
}

/** Current and peak resident memory of a process, in MB. */
function memory(pid: number | undefined): { rssMb: number; peakMb: number } | undefined {
  if (pid === undefined || !existsSync(`/proc/${pid}/status`)) return undefined;
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0);
  return { rssMb: Math.round(kb('VmRSS') / 1024), peakMb: Math.round(kb('VmHWM') / 1024) };
}

/**
 * Connections the kernel has completed but the process listening on `port` has not taken in yet:
 * the accept queues of its listening sockets (/proc/net/tcp's rx_queue of a socket in LISTEN, 0A).
 * Their clients have sent their requests and wait; nothing inside the process can see them.
 */
function acceptQueue(port: number): number {
  const local = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  let waiting = 0;
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    if (!existsSync(file)) continue;
    for (const line of readFileSync(file, 'utf8').split('\n').slice(1)) {
      const [, address, , state, queues] = line.trim().split(/\s+/);
      if (state === '0A' && address?.endsWith(local)) waiting += parseInt(queues!.split(':')[1]!, 16);
    }
  }
  return waiting;
}

function pidOf(program: string): number | undefined {
  try {
    return Number(execFileSync('pidof', ['-s', program], { encoding: 'utf8' }).trim()) || undefined;
  } catch {
    return undefined;
  }
}

/**
 * The workload, for wrk's Lua: a random product each time, a merge patch of its stock 10% of the
 * time. Every thread counts statuses, X-Cache values, 503s with Retry-After, and good answers per
 * wall-clock second; `done` prints them as lines the script parses.
 */
function workload(ids: string[]): string {
  return `
local ids = { ${ids.map((id) => `"${id}"`).join(', ')} }
local quantiles = { ${QUANTILES.join(', ')} }
local threads = {}
function setup(thread)
  table.insert(threads, thread)
  thread:set("seed", #threads)
end
function init(args)
  math.randomseed(os.time() * 1000 + seed)
  statuses, caches, seconds, shed, bypassed, hits, retry_after = {}, {}, {}, {}, {}, {}, 0
end
function request()
  local id = ids[math.random(#ids)]
  if math.random(100) <= ${WRITE_PERCENT} then
    return wrk.format("PATCH", "/api/products/" .. id, { ["Content-Type"] = "application/merge-patch+json" }, '{"stock":' .. math.random(0, 100000) .. '}')
  end
  return wrk.format("GET", "/api/products/" .. id)
end
function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
  local cache = headers["X-Cache"] or headers["x-cache"]
  if cache then caches[cache] = (caches[cache] or 0) + 1 end
  if status == 503 and (headers["Retry-After"] or headers["retry-after"]) then retry_after = retry_after + 1 end
  local second = os.time()
  if status < 300 or status == 304 then
    seconds[second] = (seconds[second] or 0) + 1
  elseif status == 503 then
    shed[second] = (shed[second] or 0) + 1
  end
  if cache == "BYPASS" then bypassed[second] = (bypassed[second] or 0) + 1 end
  if cache == "HIT" then hits[second] = (hits[second] or 0) + 1 end
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("summary %d %d %d %d %d %d %d\\n", summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout))
  io.write(string.format("latency %d %d %d\\n", latency:percentile(50), latency:percentile(99), latency.max))
  for _, p in ipairs(quantiles) do io.write(string.format("quantile %.2f %d\\n", p, latency:percentile(p))) end
  for _, thread in ipairs(threads) do
    for status, n in pairs(thread:get("statuses")) do io.write(string.format("status %d %d\\n", status, n)) end
    for cache, n in pairs(thread:get("caches")) do io.write(string.format("cache %s %d\\n", cache, n)) end
    for second, n in pairs(thread:get("seconds")) do io.write(string.format("second %d %d\\n", second, n)) end
    for second, n in pairs(thread:get("shed")) do io.write(string.format("shed %d %d\\n", second, n)) end
    for second, n in pairs(thread:get("bypassed")) do io.write(string.format("bypassed %d %d\\n", second, n)) end
    for second, n in pairs(thread:get("hits")) do io.write(string.format("hits %d %d\\n", second, n)) end
    io.write(string.format("retryafter %d\\n", thread:get("retry_after")))
  end
end
`;
}

interface WrkResult {
  requests: number;
  seconds: number;
  errors: { connect: number; read: number; write: number; timeout: number };
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** The latency (ms) at each of QUANTILES (percent): what lets the rounds of a step be pooled. */
  quantiles: [percent: number, ms: number][];
  statuses: Record<string, number>;
  xCache: Record<string, number>;
  retryAfter503: number;
  goodPerSecond: Map<number, number>;
  shedPerSecond: Map<number, number>;
  bypassedPerSecond: Map<number, number>;
  hitsPerSecond: Map<number, number>;
}

async function wrk(url: string, connections: number, seconds: number, script: string): Promise<{ result: WrkResult; pid: number | undefined; finished: Promise<void> }> {
  const [command, args] = pinned(CORES?.others, 'wrk', ['-t', '2', '-c', String(connections), '-d', `${seconds}s`, '--timeout', CLIENT_TIMEOUT, '-s', script, url]);
  const child = spawn(command, args, {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const finished = new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`wrk exited with ${code}:\n${output}`))));
  });
  const result: WrkResult = {
    requests: 0,
    seconds: 0,
    errors: { connect: 0, read: 0, write: 0, timeout: 0 },
    p50Ms: 0,
    p99Ms: 0,
    maxMs: 0,
    quantiles: [],
    statuses: {},
    xCache: {},
    retryAfter503: 0,
    goodPerSecond: new Map(),
    shedPerSecond: new Map(),
    bypassedPerSecond: new Map(),
    hitsPerSecond: new Map(),
  };
  const parsed = finished.then(() => {
    for (const line of output.split('\n')) {
      const [kind, ...fields] = line.trim().split(' ');
      const n = fields.map(Number);
      if (kind === 'summary') {
        result.requests = n[0]!;
        result.seconds = n[1]! / 1e6;
        result.errors = { connect: n[2]!, read: n[3]!, write: n[4]!, timeout: n[6]! };
      } else if (kind === 'latency') {
        [result.p50Ms, result.p99Ms, result.maxMs] = [n[0]! / 1000, n[1]! / 1000, n[2]! / 1000];
      } else if (kind === 'quantile') {
        result.quantiles.push([n[0]!, n[1]! / 1000]);
      } else if (kind === 'status') {
        result.statuses[fields[0]!] = (result.statuses[fields[0]!] ?? 0) + n[1]!;
      } else if (kind === 'cache') {
        result.xCache[fields[0]!] = (result.xCache[fields[0]!] ?? 0) + n[1]!;
      } else if (kind === 'second') {
        result.goodPerSecond.set(n[0]!, (result.goodPerSecond.get(n[0]!) ?? 0) + n[1]!);
      } else if (kind === 'shed') {
        result.shedPerSecond.set(n[0]!, (result.shedPerSecond.get(n[0]!) ?? 0) + n[1]!);
      } else if (kind === 'bypassed') {
        result.bypassedPerSecond.set(n[0]!, (result.bypassedPerSecond.get(n[0]!) ?? 0) + n[1]!);
      } else if (kind === 'hits') {
        result.hitsPerSecond.set(n[0]!, (result.hitsPerSecond.get(n[0]!) ?? 0) + n[1]!);
      } else if (kind === 'retryafter') {
        result.retryAfter503 += n[0]!;
      }
    }
  });
  return { result, pid: child.pid, finished: parsed };
}

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * Counters from the gateway's /metrics: cache outcomes, shed requests, and writes answered by status
 * (`writes 200`, `writes 503`, …): wrk's Lua cannot tell which request a response answers, the
 * gateway can.
 */
async function gatewayCounters(gateway: Probed): Promise<Record<string, number>> {
  const metrics = readMetrics(await (await fetch(gateway.metricsUrl)).text());
  const counters: Record<string, number> = {};
  for (const { labels, value } of metrics.samples('gateway_cache_outcomes_total')) counters[labels.outcome!] = value;
  for (const { labels, value } of metrics.samples('gateway_shed_total')) counters[`shed ${labels.upstream} ${labels.kind}`] = value;
  for (const { labels, value } of metrics.samples('gateway_http_requests_total')) {
    if (!WRITE_METHODS.has(labels.method ?? '')) continue;
    const name = `writes ${labels.status}`;
    counters[name] = (counters[name] ?? 0) + value;
  }
  return counters;
}

/** A step's writes as the gateway answered them: how many, how many it shed (503 before the service), how many 503s in all. */
interface Writes {
  answered: number;
  shed: number;
  unavailable: number;
  /** shed / answered, in percent (one decimal). */
  shedPercent: number;
}

function writesOf(gateway: Record<string, number>): Writes {
  let answered = 0;
  let shed = 0;
  for (const [name, n] of Object.entries(gateway)) {
    if (name.startsWith('writes ')) answered += n;
    else if (name.startsWith('shed ') && name.endsWith(' write')) shed += n;
  }
  return { answered, shed, unavailable: gateway['writes 503'] ?? 0, shedPercent: Math.round((shed / Math.max(1, answered)) * 1000) / 10 };
}

const difference = (after: Record<string, number>, before: Record<string, number>) =>
  Object.fromEntries(Object.entries(after).map(([name, value]) => [name, value - (before[name] ?? 0)]));

const good = (statuses: Record<string, number>) =>
  Object.entries(statuses).reduce((sum, [status, n]) => sum + (Number(status) < 300 || status === '304' ? n : 0), 0);

interface Step {
  connections: number;
  /** Each round's window of this step (one for the cut), in the order they ran. */
  rounds: { goodput: number; p50Ms: number; p99Ms: number; gatewayCpuMicrosPerRequest: number; writesShedPercent: number }[];
  goodput: number;
  /** The writes of the step, as the gateway answered them. */
  writes: Writes;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  statuses: Record<string, number>;
  retryAfter503: number;
  clientErrors: WrkResult['errors'];
  xCache: Record<string, number>;
  gateway: Record<string, number>;
  eventLoopDelay: Record<string, LoopDelay | undefined>;
  memory: Record<string, { rssMb: number; peakMb: number } | undefined>;
  /** The gateway's accept queues, sampled twice a second: the most connections waiting, and when they were last seen waiting. */
  acceptQueue: { max: number; lastWaitingSecond: number | null };
  /** CPU time (user + system) each process used during the step, in seconds: where the two cores went. */
  cpuSeconds: Record<string, number>;
  /** The gateway's CPU time per request answered, in µs. */
  gatewayCpuMicrosPerRequest: number;
}

/** The processes whose CPU time a step reports: the stack, the shared databases, and this script (the Redis proxy). */
function cpuPids(processes: Probed[]): Record<string, number | undefined> {
  return {
    ...Object.fromEntries(processes.map((p) => [p.name, p.child.pid])),
    'mariadbd (shared)': pidOf('mariadbd'),
    'redis-server (shared)': pidOf('redis-server'),
    'load script (Redis proxy)': process.pid,
  };
}

const cpuOf = (pids: Record<string, number | undefined>) => Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, pid === undefined ? 0 : cpuMicros([pid])]));

async function runStep(connections: number, seconds: number, target: string, script: string, processes: Probed[], during?: (startedAt: number) => Promise<void>): Promise<Window> {
  const before = await gatewayCounters(processes.find((p) => p.name === 'gateway')!);
  await Promise.all(processes.map(loopDelay)); // resets each process's histogram
  const pids = cpuPids(processes);
  const cpuBefore = cpuOf(pids);
  const startedAt = Date.now();
  const run = await wrk(target, connections, seconds, script);
  let wrkMemory: Step['memory'][string];
  // wrk's CPU time is read while it runs (its /proc entry goes when it exits): up to a second short.
  let wrkCpuMicros = 0;
  const sampler = setInterval(() => {
    wrkMemory = memory(run.pid) ?? wrkMemory;
    if (run.pid !== undefined) wrkCpuMicros = Math.max(wrkCpuMicros, cpuMicros([run.pid]));
  }, 1_000);
  const gatewayPort = Number(new URL(processes.find((p) => p.name === 'gateway')!.url).port);
  const queue: Step['acceptQueue'] = { max: 0, lastWaitingSecond: null };
  const queueSampler = setInterval(() => {
    const waiting = acceptQueue(gatewayPort);
    queue.max = Math.max(queue.max, waiting);
    if (waiting > 0) queue.lastWaitingSecond = Math.round((Date.now() - startedAt) / 100) / 10;
  }, 500);
  await during?.(startedAt);
  await run.finished;
  const cpuAfter = cpuOf(pids);
  clearInterval(sampler);
  clearInterval(queueSampler);
  const eventLoopDelay = Object.fromEntries(await Promise.all(processes.map(async (p) => [p.name, await loopDelay(p)] as const)));
  const gateway = difference(await gatewayCounters(processes.find((p) => p.name === 'gateway')!), before);
  const { result } = run;
  const goodput = Math.round(good(result.statuses) / result.seconds);
  const gatewayCpuMicrosPerRequest = Math.round((cpuAfter.gateway! - cpuBefore.gateway!) / Math.max(1, result.requests));
  const writes = writesOf(gateway);
  return {
    connections,
    rounds: [{ goodput, p50Ms: result.p50Ms, p99Ms: result.p99Ms, gatewayCpuMicrosPerRequest, writesShedPercent: writes.shedPercent }],
    result,
    goodput,
    writes,
    requestsPerSecond: Math.round(result.requests / result.seconds),
    p50Ms: result.p50Ms,
    p99Ms: result.p99Ms,
    maxMs: result.maxMs,
    statuses: result.statuses,
    retryAfter503: result.retryAfter503,
    clientErrors: result.errors,
    xCache: result.xCache,
    gateway,
    eventLoopDelay,
    memory: {
      ...Object.fromEntries(processes.map((p) => [p.name, memory(p.child.pid)])),
      wrk: wrkMemory,
      'load script (Redis proxy)': memory(process.pid),
      'redis-server (shared)': memory(pidOf('redis-server')),
      'mariadbd (shared)': memory(pidOf('mariadbd')),
    },
    acceptQueue: queue,
    cpuSeconds: {
      ...Object.fromEntries(Object.keys(pids).map((name) => [name, Math.round((cpuAfter[name]! - cpuBefore[name]!) / 1e4) / 100])),
      wrk: Math.round(wrkCpuMicros / 1e4) / 100,
    },
    gatewayCpuMicrosPerRequest,
  };
}

/** One wrk run of a step: its figures, and wrk's own result to pool rounds by. */
type Window = Step & { result: WrkResult };

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);
const sumRecords = (records: Record<string, number>[]) => {
  const total: Record<string, number> = {};
  for (const record of records) for (const [name, n] of Object.entries(record)) total[name] = (total[name] ?? 0) + n;
  return total;
};

/**
 * The latency at `percent` of all the requests of `results` together: the first latency at which
 * their counts up to it, each round's read off its quantiles, reach that share of them all. wrk
 * reports percentiles of one run only, and a median of the rounds' p99s is not the p99 of the step.
 */
function pooledLatency(results: WrkResult[], percent: number): number {
  const total = sum(results.map((r) => r.requests));
  const candidates = [...new Set(results.flatMap((r) => r.quantiles.map(([, ms]) => ms)))].sort((a, b) => a - b);
  const below = (r: WrkResult, ms: number) => Math.max(0, ...r.quantiles.filter(([, at]) => at <= ms).map(([p]) => p)) / 100;
  return candidates.find((ms) => sum(results.map((r) => r.requests * below(r, ms))) >= (percent / 100) * total) ?? Math.max(...candidates);
}

/** A step's figures over all its rounds: counts and CPU time added up, latencies pooled, the worst event-loop delay, the last memory reading. */
function combine(windows: Window[]): Step {
  const results = windows.map((w) => w.result);
  const seconds = sum(results.map((r) => r.seconds));
  const requests = sum(results.map((r) => r.requests));
  const last = windows.at(-1)!;
  const worst = (name: string, field: keyof LoopDelay) => Math.max(...windows.flatMap((w) => w.eventLoopDelay[name]?.[field] ?? []));
  const gateway = sumRecords(windows.map((w) => w.gateway));
  return {
    connections: last.connections,
    rounds: windows.flatMap((w) => w.rounds),
    goodput: Math.round(sum(results.map((r) => good(r.statuses))) / seconds),
    writes: writesOf(gateway),
    requestsPerSecond: Math.round(requests / seconds),
    p50Ms: windows.length === 1 ? last.p50Ms : pooledLatency(results, 50),
    p99Ms: windows.length === 1 ? last.p99Ms : pooledLatency(results, 99),
    maxMs: Math.max(...windows.map((w) => w.maxMs)),
    statuses: sumRecords(windows.map((w) => w.statuses)),
    retryAfter503: sum(windows.map((w) => w.retryAfter503)),
    clientErrors: sumRecords(windows.map((w) => w.clientErrors)) as WrkResult['errors'],
    xCache: sumRecords(windows.map((w) => w.xCache)),
    gateway,
    eventLoopDelay: Object.fromEntries(
      Object.keys(last.eventLoopDelay).map((name) => [name, windows.some((w) => w.eventLoopDelay[name]) ? { p50Ms: worst(name, 'p50Ms'), p99Ms: worst(name, 'p99Ms'), maxMs: worst(name, 'maxMs') } : undefined]),
    ),
    memory: last.memory,
    acceptQueue: {
      max: Math.max(...windows.map((w) => w.acceptQueue.max)),
      lastWaitingSecond: windows.reduce<number | null>((latest, w) => (w.acceptQueue.lastWaitingSecond === null ? latest : Math.max(latest ?? 0, w.acceptQueue.lastWaitingSecond)), null),
    },
    cpuSeconds: Object.fromEntries(Object.entries(sumRecords(windows.map((w) => w.cpuSeconds))).map(([name, cpu]) => [name, Math.round(cpu * 100) / 100])),
    gatewayCpuMicrosPerRequest: Math.round((sum(windows.map((w) => w.gatewayCpuMicrosPerRequest * w.result.requests))) / Math.max(1, requests)),
  };
}

function printStep(step: Step): void {
  const list = (record: Record<string, number>) => Object.entries(record).map(([k, v]) => `${k}: ${v}`).join(', ');
  console.log(`\n${step.connections} connections: goodput ${step.goodput}/s (all ${step.requestsPerSecond}/s), p50 ${step.p50Ms} ms, p99 ${step.p99Ms} ms, max ${step.maxMs} ms`);
  if (step.rounds.length > 1) console.log(`  rounds: goodput ${step.rounds.map((r) => r.goodput).join(' / ')}/s, p99 ${step.rounds.map((r) => Math.round(r.p99Ms)).join(' / ')} ms`);
  const { writes } = step;
  console.log(
    `  writes: ${writes.answered} answered, ${writes.shed} shed by the gateway (${writes.shedPercent}%${step.rounds.length > 1 ? `; rounds ${step.rounds.map((r) => r.writesShedPercent).join(' / ')}%` : ''}), ${writes.unavailable} answered 503 in all`,
  );
  console.log(`  statuses: ${list(step.statuses)}; 503 with Retry-After: ${step.retryAfter503}; client errors: ${list(step.clientErrors)}`);
  console.log(`  X-Cache: ${list(step.xCache)}`);
  console.log(`  gateway counters: ${list(step.gateway)}`);
  for (const [name, delay] of Object.entries(step.eventLoopDelay)) {
    console.log(`  event-loop delay ${name}: ${delay ? `p50 ${delay.p50Ms} ms, p99 ${delay.p99Ms} ms, max ${delay.maxMs} ms` : 'no answer'}`);
  }
  const { max, lastWaitingSecond } = step.acceptQueue;
  console.log(
    `  connections waiting for the gateway to take them in (its accept queues): at most ${max}${lastWaitingSecond === null ? '' : `, the last seen ${lastWaitingSecond} s into the step`}`,
  );
  console.log(
    `  CPU seconds: ${Object.entries(step.cpuSeconds).map(([name, seconds]) => `${name} ${seconds}`).join(', ')}; the gateway's per request: ${step.gatewayCpuMicrosPerRequest} µs`,
  );
  console.log(`  RSS (MB, now/peak): ${Object.entries(step.memory).map(([name, m]) => `${name} ${m ? `${m.rssMb}/${m.peakMb}` : '-'}`).join(', ')}`);
}

/** The load curve as an SVG: goodput (bars) and p99 (line) per step, and the Redis cut second by second. */
function chart(steps: Step[], cut: { second: number; goodput: number }[], cutWindow: [number, number], cutConnections: number, meta: string): string {
  const width = 860;
  const height = 360;
  const panel = { x: 60, y: 40, w: 360, h: 250 };
  const maxGoodput = Math.max(...steps.map((s) => s.goodput), ...cut.map((c) => c.goodput), 1);
  const maxP99 = Math.max(...steps.map((s) => s.p99Ms), 1);
  const yGood = (v: number) => panel.y + panel.h - (v / maxGoodput) * panel.h;
  const band = panel.w / steps.length;
  const bars = steps
    .map((s, i) => {
      const x = panel.x + i * band + band * 0.2;
      return `<rect x="${x}" y="${yGood(s.goodput)}" width="${band * 0.6}" height="${panel.y + panel.h - yGood(s.goodput)}" fill="#4c78a8"/>
<text x="${x + band * 0.3}" y="${yGood(s.goodput) - 4}" text-anchor="middle" font-size="11">${s.goodput}</text>
<text x="${x + band * 0.3}" y="${panel.y + panel.h + 16}" text-anchor="middle" font-size="12">${s.connections}</text>`;
    })
    .join('\n');
  const p99Points = steps.map((s, i) => `${panel.x + i * band + band / 2},${panel.y + panel.h - (s.p99Ms / maxP99) * panel.h}`);
  const p99Labels = steps
    .map((s, i) => `<text x="${panel.x + i * band + band / 2 + 4}" y="${panel.y + panel.h - (s.p99Ms / maxP99) * panel.h + 14}" font-size="11" fill="#e45756">${Math.round(s.p99Ms)} ms</text>`)
    .join('\n');
  const right = { x: 500, y: 40, w: 320, h: 250 };
  const xCut = (i: number) => right.x + (cut.length > 1 ? (i / (cut.length - 1)) * right.w : 0);
  const yCut = (v: number) => right.y + right.h - (v / maxGoodput) * right.h;
  const cutLine = cut.map((c, i) => `${xCut(i)},${yCut(c.goodput)}`).join(' ');
  const first = cut[0]?.second ?? 0;
  const shade = (second: number) => xCut(Math.max(0, Math.min(cut.length - 1, second - first)));
  const best = Math.max(...steps.map((s) => s.goodput));
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif">
<rect width="100%" height="100%" fill="#fff"/>
<text x="${panel.x}" y="20" font-size="14" font-weight="bold">Goodput (bars, 2xx/s) and p99 (red) per step</text>
<line x1="${panel.x}" y1="${panel.y + panel.h}" x2="${panel.x + panel.w}" y2="${panel.y + panel.h}" stroke="#333"/>
${bars}
<polyline points="${p99Points.join(' ')}" fill="none" stroke="#e45756" stroke-width="2"/>
${p99Labels}
<text x="${panel.x + panel.w / 2}" y="${panel.y + panel.h + 34}" text-anchor="middle" font-size="12">concurrent connections</text>
<text x="${right.x}" y="20" font-size="14" font-weight="bold">Redis cut for 2 s at ${cutConnections} connections (2xx/s)</text>
<rect x="${shade(cutWindow[0])}" y="${right.y}" width="${Math.max(2, shade(cutWindow[1]) - shade(cutWindow[0]))}" height="${right.h}" fill="#f2cf5b" opacity="0.5"/>
<line x1="${right.x}" y1="${yCut(best)}" x2="${right.x + right.w}" y2="${yCut(best)}" stroke="#999" stroke-dasharray="4 3"/>
<text x="${right.x + right.w}" y="${yCut(best) - 4}" text-anchor="end" font-size="11" fill="#666">best step ${best}/s</text>
<polyline points="${cutLine}" fill="none" stroke="#4c78a8" stroke-width="2"/>
<line x1="${right.x}" y1="${right.y + right.h}" x2="${right.x + right.w}" y2="${right.y + right.h}" stroke="#333"/>
<text x="${right.x + right.w / 2}" y="${right.y + right.h + 16}" text-anchor="middle" font-size="12">seconds (Redis cut: shaded)</text>
<text x="${panel.x}" y="${height - 12}" font-size="11" fill="#666">${meta}</text>
</svg>
`;
}

/** The figures as a Markdown table, for the README. */
function markdown(steps: Step[], cut: Step, recovery: { perSecond: { second: number; goodput: number }[] }): string {
  const n = (value: number) => Math.round(value).toLocaleString('en-US');
  const others = (s: Step) =>
    Object.entries(s.statuses)
      .filter(([status]) => status !== '200')
      .map(([status, count]) => `${n(count)} × ${status}`)
      .join(', ') || '—';
  const delay = (s: Step, name: string) => {
    const d = s.eventLoopDelay[name];
    return d ? `${Math.round(d.p99Ms)}` : '—';
  };
  const rss = (s: Step, name: string) => s.memory[name]?.peakMb ?? '—';
  const row = (label: string, s: Step) =>
    `| ${label} | ${n(s.goodput)} | ${s.writes.shedPercent}% | ${n(s.p50Ms)} ms | ${n(s.p99Ms)} ms | ${others(s)} | ${n(s.xCache.HIT ?? 0)} / ${n(s.xCache.MISS ?? 0)} / ${n(s.xCache.BYPASS ?? 0)} | ${Object.values(s.clientErrors).reduce((a, b) => a + b, 0)} | ${delay(s, 'gateway')} / ${delay(s, 'products-service')} ms | ${rss(s, 'gateway')} / ${rss(s, 'products-service')} MB |`;
  return [
    '| connections | goodput/s | writes shed | p50 | p99 | non-200 | HIT / MISS / BYPASS | client errors, timeouts | event-loop delay p99, gateway / products | peak RSS, gateway / products |',
    '|---:|---:|---:|---:|---:|---|---|---:|---|---|',
    ...steps.map((s) => row(n(s.connections), s)),
    row(`${n(cut.connections)}, Redis cut 2 s`, cut),
    '',
    `Goodput per round: ${steps.map((s) => `${n(s.connections)}: ${s.rounds.map((r) => n(r.goodput)).join(' / ')}`).join('; ')}.`,
    '',
    `Writes shed per round: ${steps.map((s) => `${n(s.connections)}: ${s.rounds.map((r) => `${r.writesShedPercent}%`).join(' / ')}`).join('; ')}.`,
    '',
    `Around the cut, 2xx per second (0 = the second Redis came back in): ${recovery.perSecond.map((p) => `${p.second}: ${n(p.goodput)}`).join(', ')}.`,
  ].join('\n');
}

async function main(): Promise<void> {
  ensureDebianTools({ wrk: 'wrk' });
  // This script relays every Redis command (its TCP proxy): with the others, off the gateway's core.
  if (CORES) execFileSync('taskset', ['-a', '-cp', CORES.others, String(process.pid)], { stdio: 'ignore' });
  // Every listed service, as npm start runs them; the curve's subject is products.
  const services = readServiceList();
  const schemas = services.map(({ name }) => throwawaySchema(name));
  const tag = schemas[0]!.split('_')[1]!;
  cleanUpOnSignals(schemas);
  const processes: Probed[] = [];
  const redisProxy = await new TcpProxy({ host: REDIS_URL.hostname, port: Number(REDIS_URL.port || 6379) }).start();
  try {
    const started = await Promise.all(services.map(({ workspace }, i) => start(workspace, `${workspace}/dist/main.js`, { DATABASE_URL: schemaUrl(schemas[i]!) })));
    processes.push(...started);
    const gateway = await start('gateway', 'gateway/dist/main.js', {
      GATEWAY_UPSTREAMS: services.map(({ name }, i) => `${name}=${started[i]!.url}`).join(','),
      REDIS_URL: redisProxy.rewrite(REDIS_URL.toString()),
      // The curve is about the cache and the limits in front of the services: no tokens, no per-client rate limits.
      AUTH_ENABLED: 'false',
      RATE_LIMIT_ENABLED: 'false',
      ...Object.fromEntries(Object.entries(process.env).filter(([name]) => name.startsWith('UPSTREAM_') || name.startsWith('REDIS_COMMAND'))),
    }, (process.env.LOAD_GATEWAY_NODE_FLAGS ?? '').split(' ').filter(Boolean));
    processes.push(gateway);

    const ids: string[] = [];
    for (let batch = 0; batch < PRODUCTS / 25; batch++) {
      const created = await Promise.all(
        Array.from({ length: 25 }, async (_, i) => {
          const n = batch * 25 + i;
          const response = await fetch(`${gateway.url}/api/products`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ sku: `LOAD-${tag}-${n}`, name: `Load product ${n}`, price: { amount: '9.99', currency: 'EUR' }, stock: n }),
          });
          if (response.status !== 201) throw new Error(`creating a product: ${response.status} ${await response.text()}`);
          return ((await response.json()) as { id: string }).id;
        }),
      );
      ids.push(...created);
    }
    const script = `${os.tmpdir()}/load-${tag}.lua`;
    await writeFile(script, workload(ids));
    const target = `${gateway.url}/`;
    const machine = `${os.cpus().length} × ${os.cpus()[0]?.model}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
    console.log(`${PRODUCTS} products; GET /api/products/{id} with ${WRITE_PERCENT}% merge-patch writes; ${ROUNDS} rounds of ${STEP_SECONDS} s per step; ${machine}`);
    console.log(`load average before: ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);

    await runStep(64, 3, target, script, processes); // warm-up: JIT, pools, keep-alive sockets, the cache
    const windows = new Map<number, Window[]>(STEPS.map((connections) => [connections, []]));
    for (let round = 1; round <= ROUNDS; round++) {
      for (const connections of STEPS) {
        const window = await runStep(connections, STEP_SECONDS, target, script, processes);
        console.log(`round ${round}, ${connections} connections: goodput ${window.goodput}/s, writes shed ${window.writes.shedPercent}%, p99 ${window.p99Ms} ms, the gateway's CPU per request ${window.gatewayCpuMicrosPerRequest} µs`);
        windows.get(connections)!.push(window);
      }
    }
    const steps = STEPS.map((connections) => combine(windows.get(connections)!));
    for (const step of steps) printStep(step);
    const best = Math.max(...steps.map((s) => s.goodput));
    const bestStep = steps.find((s) => s.goodput === best)!;
    console.log(`\nbest step: ${bestStep.connections} connections, ${best}/s`);

    if (process.env.LOAD_SKIP_CUT) return;
    // The cut runs at the best step's concurrency, so that its recovery is judged against the goodput
    // of the same client population, not of a larger or smaller one.
    const cutConnections = countFromEnv('LOAD_CUT_CONNECTIONS', bestStep.connections);
    let cutAt = 0;
    let restoredAt = 0;
    // What the gateway says of Redis, four times a second from just before the cut until 8 s after.
    const cacheStates: { atMs: number; redisUp: number; owed: number }[] = [];
    const cutRun = await runStep(cutConnections, CUT_SECONDS, target, script, processes, async (startedAt) => {
      await new Promise((resolve) => setTimeout(resolve, startedAt + (CUT_AT_SECOND - 1) * 1000 - Date.now()));
      const sampling = (async () => {
        const until = Date.now() + 11_000;
        while (Date.now() < until) {
          const metrics = readMetrics(await (await fetch(gateway.metricsUrl)).text());
          const gauge = (name: string) => (metrics.has(name) ? metrics.value(name) : NaN);
          cacheStates.push({ atMs: Date.now(), redisUp: gauge('gateway_redis_up'), owed: gauge('gateway_cache_owed_invalidations') });
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
      })();
      // The cut starts on a whole second of the clock wrk counts by, so that Redis returns on one
      // too (CUT_FOR_MS is whole seconds): each second counted after the return then lies wholly
      // after it, and five of them fit in the five seconds the recovery is judged over. Returning at
      // a random point of a second left its first part in the second of the return and only four
      // whole seconds inside the five.
      await new Promise((resolve) => setTimeout(resolve, 2_000 - (Date.now() % 1000)));
      cutAt = Date.now();
      await redisProxy.cut();
      await new Promise((resolve) => setTimeout(resolve, cutAt - (cutAt % 1000) + CUT_FOR_MS - Date.now()));
      await redisProxy.restore();
      restoredAt = Date.now();
      await sampling;
    });
    const cutStep = combine([cutRun]);
    const { goodPerSecond: perSecond, shedPerSecond, bypassedPerSecond, hitsPerSecond } = cutRun.result;
    console.log(`  the gateway on Redis (ms after Redis came back: up, owed): ${cacheStates.map((c) => `${c.atMs - restoredAt}: ${c.redisUp}, ${c.owed}`).join('; ')}`);
    console.log(`\nRedis cut for ${CUT_FOR_MS / 1000} s at ${cutConnections} connections (the best step's):`);
    printStep(cutStep);
    // Whole seconds only: the first and last are partly outside the run.
    const seconds = [...perSecond.keys()].sort((a, b) => a - b).slice(1, -1);
    const timeline = seconds.map((second) => ({
      second,
      goodput: perSecond.get(second)!,
      shed: shedPerSecond.get(second) ?? 0,
      bypassed: bypassedPerSecond.get(second) ?? 0,
      hits: hitsPerSecond.get(second) ?? 0,
    }));
    const restoredSecond = Math.floor(restoredAt / 1000);
    // A second after the return counts from Redis' return to that second's end (one decimal): the
    // goodput it shows was all there by then. The second Redis came back in is not one of them.
    const after = (t: { second: number } | undefined) => (t ? Math.round(((t.second + 1) * 1000 - restoredAt) / 100) / 10 : null);
    const recovered = (share: number) => after(timeline.find((t) => t.second > restoredSecond && t.goodput >= best * share));
    // The key moments of the recovery: when /metrics (asked every 250 ms, answered late by a busy
    // gateway) first said Redis was up again, and the first second after the one Redis returned in
    // with at least half the cache hits per second of the seconds before the cut.
    const judgedUp = cacheStates.find((c) => c.atMs > restoredAt && c.redisUp === 1);
    const beforeCut = timeline.filter((t) => t.second < Math.floor(cutAt / 1000));
    const hitsBeforeCut = beforeCut.reduce((sum, t) => sum + t.hits, 0) / Math.max(1, beforeCut.length);
    const hitsBack = timeline.find((t) => t.second > restoredSecond && t.hits >= hitsBeforeCut / 2);
    const goodputBeforeCut = Math.round(beforeCut.reduce((sum, t) => sum + t.goodput, 0) / Math.max(1, beforeCut.length));
    const backToBeforeCut = timeline.find((t) => t.second > restoredSecond && t.goodput >= goodputBeforeCut);
    const recovery = {
      cutAt: new Date(cutAt).toISOString(),
      restoredAt: new Date(restoredAt).toISOString(),
      bestStepGoodput: best,
      perSecond: timeline.map((t) => ({ second: t.second - restoredSecond, goodput: t.goodput, shed: t.shed, bypassed: t.bypassed, hits: t.hits })),
      msToRedisJudgedUp: judgedUp ? judgedUp.atMs - restoredAt : null,
      secondsToHitsBack: after(hitsBack),
      secondsToBest: recovered(1),
      secondsTo90PercentOfBest: recovered(0.9),
      goodputBeforeCut,
      secondsToGoodputBeforeCut: after(backToBeforeCut),
    };
    console.log(`  per second (second 0 = the one Redis came back in), good/shed/bypassed/hits: ${recovery.perSecond.map((p) => `${p.second}: ${p.goodput}/${p.shed}/${p.bypassed}/${p.hits}`).join(', ')}`);
    console.log(
      `  after Redis returned: judged up by the gateway ${recovery.msToRedisJudgedUp ?? 'never'} ms later (as /metrics said it); hits at half their rate before the cut again by ${recovery.secondsToHitsBack ?? 'never'} s after`,
    );
    console.log(
      `  a whole second at the best step's goodput (${best}/s, ${bestStep.connections} connections) again by ${recovery.secondsToBest ?? 'never'} s after Redis returned; at 90% of it by ${recovery.secondsTo90PercentOfBest ?? 'never'} s; at this run's own goodput before the cut (${goodputBeforeCut}/s on average) by ${recovery.secondsToGoodputBeforeCut ?? 'never'} s`,
    );

    const at = (connections: number) => steps.find((s) => s.connections === connections);
    const verdicts = {
      'goodput at 1000 ≥ 90% of best': at(1000) ? at(1000)!.goodput >= 0.9 * best : null,
      'goodput at 2000 ≥ 90% of best': at(2000) ? at(2000)!.goodput >= 0.9 * best : null,
      'writes shed at 256 ≤ 2%': at(256) ? at(256)!.writes.shedPercent <= 2 : null,
      'writes shed at 1000 ≤ 10%': at(1000) ? at(1000)!.writes.shedPercent <= 10 : null,
      'p99 at 1000 ≤ 3 × p99 at 256': at(1000) && at(256) ? at(1000)!.p99Ms <= 3 * at(256)!.p99Ms : null,
      'no bypass while Redis is up': steps.every((s) => (s.gateway.bypass ?? 0) === 0),
      'no client timeouts or socket errors': [...steps, cutStep].every((s) => Object.values(s.clientErrors).every((n) => n === 0)),
      'every non-2xx documented (503 with Retry-After, 409, 412)': [...steps, cutStep].every((s) =>
        Object.entries(s.statuses).every(([status, n]) => Number(status) < 300 || status === '304' || status === '409' || status === '412' || (status === '503' && n === s.retryAfter503)),
      ),
      "a second at the best step's goodput within 5 s of Redis returning": recovery.secondsToBest !== null && recovery.secondsToBest <= 5,
    };
    console.table(verdicts);

    const results = {
      date: new Date().toISOString(),
      machine,
      loadAverageAfter: os.loadavg(),
      settings: { products: PRODUCTS, writePercent: WRITE_PERCENT, stepSeconds: STEP_SECONDS, rounds: ROUNDS, clientTimeout: CLIENT_TIMEOUT, wrkThreads: 2 },
      steps,
      redisCut: { connections: cutConnections, seconds: CUT_SECONDS, step: cutStep, recovery, gatewayOnRedis: cacheStates.map((c) => ({ msAfterReturn: c.atMs - restoredAt, redisUp: c.redisUp, owed: c.owed })) },
      verdicts,
    };
    await mkdir(new URL('results/', import.meta.url), { recursive: true });
    await writeFile(new URL('results/load.json', import.meta.url), `${JSON.stringify(results, null, 2)}\n`);
    const cutWindow: [number, number] = [Math.floor(cutAt / 1000), restoredSecond];
    const meta = `npm run load, ${results.date.slice(0, 16)}Z, ${machine}; ${WRITE_PERCENT}% writes, ${ROUNDS} rounds of ${STEP_SECONDS} s per step`;
    await writeFile(new URL('../docs/load-curve.svg', import.meta.url), chart(steps, timeline, cutWindow, cutConnections, meta));
    console.log('written to bench/results/load.json and docs/load-curve.svg');
    console.log(`\nFor the README:\n\n${markdown(steps, cutStep, recovery)}`);
  } finally {
    // The gateway first, so that it does not answer its last requests with 502s from stopped services.
    for (const { child } of processes.reverse()) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 5_000))]);
    }
    await redisProxy.cut();
    await dropSchemas(schemas);
  }
}

await main();

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
 *
 * The workload is bench/load.lua, run and read back by bench/load-wrk.ts; what is read of the
 * processes is in bench/load-probes.ts, the statistics in bench/load-stats.ts, the printed report
 * in bench/load-report.ts and the chart in bench/chart.ts.
 */
import { execFileSync } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { readServiceList } from '../shared/src/platform/services.ts';
import { TcpProxy } from '../tools/tcp-proxy.ts';
import { countFromEnv, countsFromEnv } from '../tools/env.ts';
import { loadCurveSvg } from './chart.ts';
import { acceptQueue, cpuOf, cpuPids, gatewayCounters, loopDelay, memory, memoryOf, redisState, startProbed, type Memory, type Probed } from './load-probes.ts';
import { markdown, printCut, printStep } from './load-report.ts';
import { combine, difference, good, recoveryOf, timelineOf, verdictsOf, writesOf, type RedisState, type Step, type Window } from './load-stats.ts';
import { CLIENT_TIMEOUT, runWorkload, WRK_THREADS, type WrkResult } from './load-wrk.ts';
import { cleanUpOnSignals, cpuMicros, dropSchemas, ensureBenchTools, pinning, REDIS_URL as REDIS, schemaUrl, stopAll, stopServer, throwawaySchema } from './support.ts';

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
const PRODUCTS = 500;
const WRITE_PERCENT = Number(process.env.LOAD_WRITE_PERCENT ?? 10);
const CUT_SECONDS = 20;
const CUT_AT_SECOND = 8;
const CUT_FOR_MS = 2_000;

/**
 * Where each process runs, on a machine of two cores or more: the gateway alone on core 0, and
 * everything else of ours (the services, wrk, this script with its Redis proxy) on core 1; the
 * shared MariaDB and Redis go where the kernel puts them. Left to the kernel, the same step moves
 * with where it happens to place the gateway and wrk's threads, and the curve shows the scheduler,
 * not the gateway (docs/benchmarks/2026-11-27.md). A shared machine's drift over minutes stays.
 */
const CORES = pinning ? { gateway: pinning.server, others: pinning.load } : undefined;

/** The stack under load: every process (the gateway last), the gateway, its Redis proxy, and the file of product ids wrk reads. */
interface Stack {
  processes: Probed[];
  gateway: Probed;
  redisProxy: TcpProxy;
  idsFile: string;
}

/** Every service in services.json, on `schemas`, and the gateway in front of them with its Redis through `redisProxy`. */
async function startStack(schemas: string[], redisProxy: TcpProxy): Promise<Probed[]> {
  const services = readServiceList();
  const started = await Promise.all(
    services.map(({ workspace }, i) => startProbed(workspace, `${workspace}/dist/main.js`, { env: { DATABASE_URL: schemaUrl(schemas[i]!) }, core: CORES?.others })),
  );
  const gateway = await startProbed('gateway', 'gateway/dist/main.js', {
    core: CORES?.gateway,
    nodeFlags: (process.env.LOAD_GATEWAY_NODE_FLAGS ?? '').split(' ').filter(Boolean),
    env: {
      GATEWAY_UPSTREAMS: services.map(({ name }, i) => `${name}=${started[i]!.url}`).join(','),
      REDIS_URL: redisProxy.rewrite(REDIS_URL.toString()),
      // The curve is about the cache and the limits in front of the services: no tokens, no per-client rate limits.
      AUTH_ENABLED: 'false',
      RATE_LIMIT_ENABLED: 'false',
      ...Object.fromEntries(Object.entries(process.env).filter(([name]) => name.startsWith('UPSTREAM_') || name.startsWith('REDIS_COMMAND'))),
    },
  });
  return [...started, gateway];
}

/** Creates PRODUCTS products through the gateway, 25 at a time; their ids. */
async function createProducts(gateway: Probed, tag: string): Promise<string[]> {
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
  return ids;
}

/**
 * Samples what can only be read while wrk runs: its memory and CPU time, every second (its /proc
 * entry goes when it exits, so its CPU time is up to a second short), and the gateway's accept
 * queues twice a second. `stop` ends the sampling and gives what it saw.
 */
function sampleDuringRun(wrkPid: number | undefined, gatewayPort: number, startedAt: number) {
  let wrkMemory: Memory | undefined;
  let wrkCpuMicros = 0;
  const wrkSampler = setInterval(() => {
    wrkMemory = memory(wrkPid) ?? wrkMemory;
    if (wrkPid !== undefined) wrkCpuMicros = Math.max(wrkCpuMicros, cpuMicros([wrkPid]));
  }, 1_000);
  const queue: Step['acceptQueue'] = { max: 0, lastWaitingSecond: null };
  const queueSampler = setInterval(() => {
    const waiting = acceptQueue(gatewayPort);
    queue.max = Math.max(queue.max, waiting);
    if (waiting > 0) queue.lastWaitingSecond = Math.round((Date.now() - startedAt) / 100) / 10;
  }, 500);
  return () => {
    clearInterval(wrkSampler);
    clearInterval(queueSampler);
    return { wrkMemory, wrkCpuMicros, queue };
  };
}

/** The figures of one step's window from wrk's result and the gateway's counters over it. */
function windowOf(connections: number, result: WrkResult, gateway: Record<string, number>, gatewayCpuMicros: number): Omit<Window, 'eventLoopDelay' | 'memory' | 'acceptQueue' | 'cpuSeconds'> {
  const goodput = Math.round(good(result.statuses) / result.seconds);
  const gatewayCpuMicrosPerRequest = Math.round(gatewayCpuMicros / Math.max(1, result.requests));
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
    gatewayCpuMicrosPerRequest,
  };
}

/** One window of `connections` for `seconds`, with `during` run alongside from its start. */
async function runStep(stack: Stack, connections: number, seconds: number, during?: (startedAt: number) => Promise<void>): Promise<Window> {
  const { processes, gateway } = stack;
  const before = await gatewayCounters(gateway);
  await Promise.all(processes.map(loopDelay)); // resets each process's histogram
  const pids = cpuPids(processes);
  const cpuBefore = cpuOf(pids);
  const startedAt = Date.now();
  const run = runWorkload(`${gateway.url}/`, { connections, seconds, idsFile: stack.idsFile, writePercent: WRITE_PERCENT, core: CORES?.others });
  const stopSampling = sampleDuringRun(run.pid, Number(new URL(gateway.url).port), startedAt);
  await during?.(startedAt);
  const result = await run.result;
  const cpuAfter = cpuOf(pids);
  const { wrkMemory, wrkCpuMicros, queue } = stopSampling();
  const eventLoopDelay = Object.fromEntries(await Promise.all(processes.map(async (p) => [p.name, await loopDelay(p)] as const)));
  const counters = difference(await gatewayCounters(gateway), before);
  return {
    ...windowOf(connections, result, counters, cpuAfter.gateway! - cpuBefore.gateway!),
    eventLoopDelay,
    memory: memoryOf(processes, wrkMemory),
    acceptQueue: queue,
    cpuSeconds: {
      ...Object.fromEntries(Object.keys(pids).map((name) => [name, Math.round((cpuAfter[name]! - cpuBefore[name]!) / 1e4) / 100])),
      wrk: Math.round(wrkCpuMicros / 1e4) / 100,
    },
  };
}

/** A warm-up, then ROUNDS rounds of every step; each step's figures over its rounds. */
async function runRamp(stack: Stack): Promise<Step[]> {
  await runStep(stack, 64, 3); // warm-up: JIT, pools, keep-alive sockets, the cache
  const windows = new Map<number, Window[]>(STEPS.map((connections) => [connections, []]));
  for (let round = 1; round <= ROUNDS; round++) {
    for (const connections of STEPS) {
      const window = await runStep(stack, connections, STEP_SECONDS);
      console.log(`round ${round}, ${connections} connections: goodput ${window.goodput}/s, writes shed ${window.writes.shedPercent}%, p99 ${window.p99Ms} ms, the gateway's CPU per request ${window.gatewayCpuMicrosPerRequest} µs`);
      windows.get(connections)!.push(window);
    }
  }
  return STEPS.map((connections) => combine(windows.get(connections)!));
}

const sleepUntil = (at: number) => new Promise((resolve) => setTimeout(resolve, at - Date.now()));

/**
 * A CUT_SECONDS window at `connections` with Redis cut off for CUT_FOR_MS from CUT_AT_SECOND (the
 * proxy drops every connection; the shared Redis itself is never touched), and what the gateway
 * said of Redis four times a second from just before the cut until 8 s after.
 */
async function runCut(stack: Stack, connections: number) {
  const moments = { cutAt: 0, restoredAt: 0 };
  const states: RedisState[] = [];
  const window = await runStep(stack, connections, CUT_SECONDS, async (startedAt) => {
    await sleepUntil(startedAt + (CUT_AT_SECOND - 1) * 1000);
    const sampling = (async () => {
      const until = Date.now() + 11_000;
      while (Date.now() < until) {
        states.push({ atMs: Date.now(), ...(await redisState(stack.gateway)) });
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    })();
    // The cut starts on a whole second of the clock wrk counts by, so that Redis returns on one
    // too (CUT_FOR_MS is whole seconds): each second counted after the return then lies wholly
    // after it, and five of them fit in the five seconds the recovery is judged over.
    await new Promise((resolve) => setTimeout(resolve, 2_000 - (Date.now() % 1000)));
    moments.cutAt = Date.now();
    await stack.redisProxy.cut();
    await sleepUntil(moments.cutAt - (moments.cutAt % 1000) + CUT_FOR_MS);
    await stack.redisProxy.restore();
    moments.restoredAt = Date.now();
    await sampling;
  });
  return { window, states, ...moments };
}

/** The Redis cut at the best step's concurrency (or LOAD_CUT_CONNECTIONS), printed, then the verdicts, the results file, the chart and the table. */
async function cutAndReport(stack: Stack, steps: Step[], machine: string): Promise<void> {
  const best = Math.max(...steps.map((s) => s.goodput));
  const bestStep = steps.find((s) => s.goodput === best)!;
  // The cut runs at the best step's concurrency, so that its recovery is judged against the goodput
  // of the same client population, not of a larger or smaller one.
  const cutConnections = countFromEnv('LOAD_CUT_CONNECTIONS', bestStep.connections);
  const { window, states, cutAt, restoredAt } = await runCut(stack, cutConnections);
  const cutStep = combine([window]);
  const timeline = timelineOf(window.result);
  const recovery = recoveryOf(timeline, states, { cutAt, restoredAt }, best);
  printCut({ connections: cutConnections, forMs: CUT_FOR_MS, step: cutStep, states, restoredAt, recovery, bestStep });
  const verdicts = verdictsOf(steps, cutStep, recovery);
  console.table(verdicts);

  const results = {
    date: new Date().toISOString(),
    machine,
    loadAverageAfter: os.loadavg(),
    settings: { products: PRODUCTS, writePercent: WRITE_PERCENT, stepSeconds: STEP_SECONDS, rounds: ROUNDS, clientTimeout: CLIENT_TIMEOUT, wrkThreads: WRK_THREADS },
    steps,
    redisCut: { connections: cutConnections, seconds: CUT_SECONDS, step: cutStep, recovery, gatewayOnRedis: states.map((c) => ({ msAfterReturn: c.atMs - restoredAt, redisUp: c.redisUp, owed: c.owed })) },
    verdicts,
  };
  await mkdir(new URL('results/', import.meta.url), { recursive: true });
  await writeFile(new URL('results/load.json', import.meta.url), `${JSON.stringify(results, null, 2)}\n`);
  const cutWindow: [number, number] = [Math.floor(cutAt / 1000), Math.floor(restoredAt / 1000)];
  const meta = `npm run load, ${results.date.slice(0, 16)}Z, ${machine}; ${WRITE_PERCENT}% writes, ${ROUNDS} rounds of ${STEP_SECONDS} s per step`;
  await writeFile(new URL('../docs/load-curve.svg', import.meta.url), loadCurveSvg(steps, timeline, cutWindow, cutConnections, meta));
  console.log('written to bench/results/load.json and docs/load-curve.svg');
  console.log(`\nFor the README:\n\n${markdown(steps, cutStep, recovery)}`);
}

async function main(): Promise<void> {
  ensureBenchTools();
  // This script relays every Redis command (its TCP proxy): with the others, off the gateway's core.
  if (CORES) execFileSync('taskset', ['-a', '-cp', CORES.others, String(process.pid)], { stdio: 'ignore' });
  // Every listed service, as npm start runs them; the curve's subject is products.
  const schemas = readServiceList().map(({ name }) => throwawaySchema(name));
  const tag = schemas[0]!.split('_')[1]!;
  const idsFile = `${os.tmpdir()}/load-${tag}.ids`;
  cleanUpOnSignals(schemas);
  const processes: Probed[] = [];
  const redisProxy = await new TcpProxy({ host: REDIS_URL.hostname, port: Number(REDIS_URL.port || 6379) }).start();
  try {
    processes.push(...(await startStack(schemas, redisProxy)));
    const stack: Stack = { processes, gateway: processes.at(-1)!, redisProxy, idsFile };
    await writeFile(idsFile, `${(await createProducts(stack.gateway, tag)).join('\n')}\n`);
    const machine = `${os.cpus().length} × ${os.cpus()[0]?.model}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
    console.log(`${PRODUCTS} products; GET /api/products/{id} with ${WRITE_PERCENT}% merge-patch writes; ${ROUNDS} rounds of ${STEP_SECONDS} s per step; ${machine}`);
    console.log(`load average before: ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
    const steps = await runRamp(stack);
    for (const step of steps) printStep(step);
    const bestStep = steps.reduce((best, s) => (s.goodput > best.goodput ? s : best));
    console.log(`\nbest step: ${bestStep.connections} connections, ${bestStep.goodput}/s`);
    if (!process.env.LOAD_SKIP_CUT) await cutAndReport(stack, steps, machine);
  } finally {
    // The gateway first, so that it does not answer its last requests with 502s from stopped services.
    for (const server of processes.reverse()) await stopServer(server);
    await stopAll();
    await redisProxy.cut();
    await rm(idsFile, { force: true });
    await dropSchemas(schemas);
  }
}

await main();

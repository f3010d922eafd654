/**
 * How `npm run bench` measures its targets: every target's processes in interleaved rounds, CPU
 * and GC time per request from each process, and the protections' cost in pairs run at once.
 */
import type { ChartRow } from './chart.ts';
import { measuredRun } from './measured-runs.ts';
import { median, round2, rssMiB, settle, type Server } from './support.ts';
import { combinedRuns, wrk, type LoadResult } from './wrk.ts';
import { countFromEnv } from '../tools/env.ts';

export const SECONDS = countFromEnv('BENCH_SECONDS', 4);
// Five: the project's speed ratios are judged by the median of five interleaved runs.
export const RUNS = countFromEnv('BENCH_RUNS', 5);
export const CONNECTIONS = countFromEnv('BENCH_CONNECTIONS', 64);
export const WARM_UP_SECONDS = 2;

export interface Target {
  key: string;
  label: string;
  group: ChartRow['group'];
  /** Its server; for a gateway, GATEWAY_PROCESSES processes of the same configuration, each measured every round. */
  servers: Server[];
  /** Request headers of its own (a bearer token, Accept-Encoding). */
  headers?: Record<string, string>;
  /** The path it is asked for, when not the bench's one product. */
  path?: string;
}

/** One run of a target: wrk's figures, and the CPU time (and, for a Node server, the GC time) its server used per request meanwhile. */
export interface Run extends LoadResult {
  cpuMicrosPerRequest: number;
  gcMicrosPerRequest?: number;
}

export interface Figures extends LoadResult {
  /** The target's own server process(es): CPU time per request, and resident memory after the runs (the larger instance's). */
  cpuMicrosPerRequest: number;
  /** CPU time per request of each round (all of the target's processes together), in round order. */
  cpuMicrosPerRequestByRound: number[];
  /** A Node target's garbage-collection time per request (bench/gc-meter.mjs), over all its runs and round by round, as for CPU time; none for nginx. */
  gcMicrosPerRequest?: number;
  gcMicrosPerRequestByRound?: number[];
  rssMiB: number;
  runs: Run[];
}

/**
 * Every target's warm-up, then RUNS rounds that each run every target (each of its processes) once,
 * every other round in reverse order: the runs of one target are spread over the whole bench, so a
 * burst of other work on the machine falls on all targets alike instead of on whichever was being
 * measured, and no target always runs right after the same one. CPU time is counted over a target's own runs.
 */
export async function measureAll(targets: Target[], path: string, headers: (target: Target) => Record<string, string>): Promise<Record<string, Figures>> {
  const options = (target: Target) => ({ connections: CONNECTIONS, headers: headers(target) });
  const url = (target: Target, server: Server) => `${server.url}${target.path ?? path}`;
  for (const target of targets) for (const server of target.servers) await wrk(url(target, server), { ...options(target), seconds: WARM_UP_SECONDS });
  const runs = new Map<string, Run[]>(targets.map((t) => [t.key, []]));
  const rounds = new Map<string, { cpu: number; gc: number | undefined; requests: number }[]>(targets.map((t) => [t.key, []]));
  for (let round = 1; round <= RUNS; round++) {
    process.stdout.write(`  round ${round} of ${RUNS}:`);
    // Every other round in reverse order: what one run leaves behind on the machine (the service
    // both gateways share collecting the garbage of the run before, say) falls on each target of a
    // pair alike, not always on the second.
    for (const target of round % 2 === 1 ? targets : targets.toReversed()) {
      const thisRound: { cpu: number; gc: number | undefined; requests: number } = { cpu: 0, gc: 0, requests: 0 };
      for (const server of target.servers) {
        const { result, cpuMicros: cpu, gcMicros: gc } = await measuredRun(server, () => wrk(url(target, server), { ...options(target), seconds: SECONDS }));
        thisRound.cpu += cpu;
        thisRound.gc = thisRound.gc === undefined || gc === undefined ? undefined : thisRound.gc + gc;
        thisRound.requests += result.requests;
        runs.get(target.key)!.push({ ...result, cpuMicrosPerRequest: perRequest(cpu, result.requests), ...(gc === undefined ? {} : { gcMicrosPerRequest: gcPerRequest(gc, result.requests) }) });
        process.stdout.write(` ${target.key} ${result.requestsPerSecond}`);
      }
      rounds.get(target.key)!.push(thisRound);
    }
    process.stdout.write('\n');
  }
  const figures: Record<string, Figures> = {};
  for (const target of targets) {
    const own = runs.get(target.key)!;
    const byRound = rounds.get(target.key)!;
    const measuredGc = byRound.flatMap(({ gc, requests }) => (gc === undefined ? [] : [{ gc, requests }]));
    const gcRounds = measuredGc.length === byRound.length ? measuredGc : undefined;
    figures[target.key] = {
      ...combinedRuns(own),
      cpuMicrosPerRequest: perRequest(
        byRound.reduce((sum, r) => sum + r.cpu, 0),
        byRound.reduce((sum, r) => sum + r.requests, 0),
      ),
      cpuMicrosPerRequestByRound: byRound.map((r) => perRequest(r.cpu, r.requests)),
      ...(gcRounds && {
        gcMicrosPerRequest: gcPerRequest(
          gcRounds.reduce((sum, r) => sum + r.gc, 0),
          gcRounds.reduce((sum, r) => sum + r.requests, 0),
        ),
        gcMicrosPerRequestByRound: gcRounds.map((r) => gcPerRequest(r.gc, r.requests)),
      }),
      rssMiB: Math.max(...target.servers.map((server) => rssMiB(server.pids()))),
      runs: own,
    };
  }
  return figures;
}

/** CPU µs per request, one decimal. */
const perRequest = (cpuMicros: number, requests: number) => Math.round((cpuMicros / Math.max(requests, 1)) * 10) / 10;

/** GC µs per request, two decimals: a few µs, where one decimal would move a ratio by several percent. */
const gcPerRequest = (gcMicros: number, requests: number) => Math.round((gcMicros / Math.max(requests, 1)) * 100) / 100;

/** The protected configuration's throughput over the unprotected one's, run at once: each run's ratio, and their median. */
export interface PairedRatio {
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
export async function measurePairs(off: Target, on: Target, path: string, headers: (target: Target) => Record<string, string>): Promise<PairedRatio> {
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

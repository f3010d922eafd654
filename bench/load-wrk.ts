/**
 * The load curve's client: wrk running bench/load.lua against the gateway, and what its `done`
 * prints read back into figures.
 */
import { spawnWrk } from './wrk.ts';

const SCRIPT = new URL('load.lua', import.meta.url).pathname;
// How long a client waits for an answer: every request, shed or not, is to be answered within it
// (wrk counts a later answer as a timeout and leaves it out of the latencies).
export const CLIENT_TIMEOUT = '2s';
export const WRK_THREADS = 2;

export interface WrkResult {
  requests: number;
  seconds: number;
  errors: { connect: number; read: number; write: number; timeout: number };
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** The latency (ms) at each percentile bench/load.lua reports: what lets the rounds of a step be pooled. */
  quantiles: [percent: number, ms: number][];
  statuses: Record<string, number>;
  xCache: Record<string, number>;
  retryAfter503: number;
  goodPerSecond: Map<number, number>;
  shedPerSecond: Map<number, number>;
  bypassedPerSecond: Map<number, number>;
  hitsPerSecond: Map<number, number>;
}

const add = (record: Record<string, number>, key: string, n: number) => (record[key] = (record[key] ?? 0) + n);
const addAt = (map: Map<number, number>, second: number, n: number) => map.set(second, (map.get(second) ?? 0) + n);

/** The figures in the lines bench/load.lua's `done` writes, every thread's added up. */
export function parseWorkloadOutput(output: string): WrkResult {
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
  const perSecond: Record<string, Map<number, number>> = { second: result.goodPerSecond, shed: result.shedPerSecond, bypassed: result.bypassedPerSecond, hits: result.hitsPerSecond };
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
      add(result.statuses, fields[0]!, n[1]!);
    } else if (kind === 'cache') {
      add(result.xCache, fields[0]!, n[1]!);
    } else if (kind !== undefined && Object.hasOwn(perSecond, kind)) {
      addAt(perSecond[kind]!, n[0]!, n[1]!);
    } else if (kind === 'retryafter') {
      result.retryAfter503 += n[0]!;
    }
  }
  return result;
}

/**
 * Starts wrk against `url` on `core` with the workload over the product ids in `idsFile`: its pid,
 * to sample it while it runs, and its figures once it has finished.
 */
export function runWorkload(
  url: string,
  options: { connections: number; seconds: number; idsFile: string; writePercent: number; core: string | undefined },
): { pid: number | undefined; result: Promise<WrkResult> } {
  const { connections, seconds, idsFile, writePercent, core } = options;
  const args = ['-t', String(WRK_THREADS), '-c', String(connections), '-d', `${seconds}s`, '--timeout', CLIENT_TIMEOUT, '-s', SCRIPT, url, '--', idsFile, String(writePercent)];
  const run = spawnWrk(args, core);
  return { pid: run.pid, result: run.output.then(parseWorkloadOutput) };
}

/**
 * The load curve's statistics: a step's figures from its rounds (counts added up, latencies
 * pooled), the writes the gateway shed, the recovery after the Redis cut, and the verdicts.
 */
import type { LoopDelay, Memory } from './load-probes.ts';
import type { WrkResult } from './load-wrk.ts';

/** A step's writes as the gateway answered them: how many, how many it shed (503 before the service), how many 503s in all. */
export interface Writes {
  answered: number;
  shed: number;
  unavailable: number;
  /** shed / answered, in percent (one decimal). */
  shedPercent: number;
}

export function writesOf(gateway: Record<string, number>): Writes {
  let answered = 0;
  let shed = 0;
  for (const [name, n] of Object.entries(gateway)) {
    if (name.startsWith('writes ')) answered += n;
    else if (name.startsWith('shed ') && name.endsWith(' write')) shed += n;
  }
  return { answered, shed, unavailable: gateway['writes 503'] ?? 0, shedPercent: Math.round((shed / Math.max(1, answered)) * 1000) / 10 };
}

export const difference = (after: Record<string, number>, before: Record<string, number>) =>
  Object.fromEntries(Object.entries(after).map(([name, value]) => [name, value - (before[name] ?? 0)]));

/** The good answers among `statuses`: 2xx and 304. */
export const good = (statuses: Record<string, number>) =>
  Object.entries(statuses).reduce((sum, [status, n]) => sum + (Number(status) < 300 || status === '304' ? n : 0), 0);

export interface Step {
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
  memory: Record<string, Memory | undefined>;
  /** The gateway's accept queues, sampled twice a second: the most connections waiting, and when they were last seen waiting. */
  acceptQueue: { max: number; lastWaitingSecond: number | null };
  /** CPU time (user + system) each process used during the step, in seconds: where the two cores went. */
  cpuSeconds: Record<string, number>;
  /** The gateway's CPU time per request answered, in µs. */
  gatewayCpuMicrosPerRequest: number;
}

/** One wrk run of a step: its figures, and wrk's own result to pool rounds by. */
export type Window = Step & { result: WrkResult };

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
export function pooledLatency(results: WrkResult[], percent: number): number {
  const total = sum(results.map((r) => r.requests));
  const candidates = [...new Set(results.flatMap((r) => r.quantiles.map(([, ms]) => ms)))].sort((a, b) => a - b);
  const below = (r: WrkResult, ms: number) => Math.max(0, ...r.quantiles.filter(([, at]) => at <= ms).map(([p]) => p)) / 100;
  return candidates.find((ms) => sum(results.map((r) => r.requests * below(r, ms))) >= (percent / 100) * total) ?? Math.max(...candidates);
}

/** The worst event-loop delay of each process over `windows`. */
function worstLoopDelays(windows: Window[]): Step['eventLoopDelay'] {
  const worst = (name: string, field: keyof LoopDelay) => Math.max(...windows.flatMap((w) => w.eventLoopDelay[name]?.[field] ?? []));
  return Object.fromEntries(
    Object.keys(windows.at(-1)!.eventLoopDelay).map((name) => [name, windows.some((w) => w.eventLoopDelay[name]) ? { p50Ms: worst(name, 'p50Ms'), p99Ms: worst(name, 'p99Ms'), maxMs: worst(name, 'maxMs') } : undefined]),
  );
}

/** A step's figures over all its rounds: counts and CPU time added up, latencies pooled, the worst event-loop delay, the last memory reading. */
export function combine(windows: Window[]): Step {
  const results = windows.map((w) => w.result);
  const seconds = sum(results.map((r) => r.seconds));
  const requests = sum(results.map((r) => r.requests));
  const last = windows.at(-1)!;
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
    eventLoopDelay: worstLoopDelays(windows),
    memory: last.memory,
    acceptQueue: {
      max: Math.max(...windows.map((w) => w.acceptQueue.max)),
      lastWaitingSecond: windows.reduce<number | null>((latest, w) => (w.acceptQueue.lastWaitingSecond === null ? latest : Math.max(latest ?? 0, w.acceptQueue.lastWaitingSecond)), null),
    },
    cpuSeconds: Object.fromEntries(Object.entries(sumRecords(windows.map((w) => w.cpuSeconds))).map(([name, cpu]) => [name, Math.round(cpu * 100) / 100])),
    gatewayCpuMicrosPerRequest: Math.round(sum(windows.map((w) => w.gatewayCpuMicrosPerRequest * w.result.requests)) / Math.max(1, requests)),
  };
}

/** One whole second of the cut's run, by wrk's clock: good answers, 503s, cache bypasses and hits. */
export interface Second {
  second: number;
  goodput: number;
  shed: number;
  bypassed: number;
  hits: number;
}

/** The cut's run second by second; whole seconds only: the first and last are partly outside the run. */
export function timelineOf(result: WrkResult): Second[] {
  const { goodPerSecond, shedPerSecond, bypassedPerSecond, hitsPerSecond } = result;
  return [...goodPerSecond.keys()]
    .sort((a, b) => a - b)
    .slice(1, -1)
    .map((second) => ({
      second,
      goodput: goodPerSecond.get(second)!,
      shed: shedPerSecond.get(second) ?? 0,
      bypassed: bypassedPerSecond.get(second) ?? 0,
      hits: hitsPerSecond.get(second) ?? 0,
    }));
}

/** What the gateway said of Redis at `atMs` (from its /metrics). */
export interface RedisState {
  atMs: number;
  redisUp: number;
  owed: number;
}

export type Recovery = ReturnType<typeof recoveryOf>;

/**
 * The moments of the recovery after Redis returned at `restoredAt` (ms), having been cut at `cutAt`:
 * when /metrics (asked every 250 ms, answered late by a busy gateway) first said Redis was up
 * again; the first second after the one Redis returned in with at least half the cache hits per
 * second of the seconds before the cut; and with the best step's goodput (`best`), 90% of it, and
 * the goodput before the cut.
 */
export function recoveryOf(timeline: Second[], states: RedisState[], moments: { cutAt: number; restoredAt: number }, best: number) {
  const { cutAt, restoredAt } = moments;
  const restoredSecond = Math.floor(restoredAt / 1000);
  // A second after the return counts from Redis' return to that second's end (one decimal): the
  // goodput it shows was all there by then. The second Redis came back in is not one of them.
  const after = (t: Second | undefined) => (t ? Math.round(((t.second + 1) * 1000 - restoredAt) / 100) / 10 : null);
  const firstAfter = (test: (t: Second) => boolean) => after(timeline.find((t) => t.second > restoredSecond && test(t)));
  const judgedUp = states.find((c) => c.atMs > restoredAt && c.redisUp === 1);
  const beforeCut = timeline.filter((t) => t.second < Math.floor(cutAt / 1000));
  const hitsBeforeCut = sum(beforeCut.map((t) => t.hits)) / Math.max(1, beforeCut.length);
  const goodputBeforeCut = Math.round(sum(beforeCut.map((t) => t.goodput)) / Math.max(1, beforeCut.length));
  return {
    cutAt: new Date(cutAt).toISOString(),
    restoredAt: new Date(restoredAt).toISOString(),
    bestStepGoodput: best,
    perSecond: timeline.map((t) => ({ ...t, second: t.second - restoredSecond })),
    msToRedisJudgedUp: judgedUp ? judgedUp.atMs - restoredAt : null,
    secondsToHitsBack: firstAfter((t) => t.hits >= hitsBeforeCut / 2),
    secondsToBest: firstAfter((t) => t.goodput >= best),
    secondsTo90PercentOfBest: firstAfter((t) => t.goodput >= best * 0.9),
    goodputBeforeCut,
    secondsToGoodputBeforeCut: firstAfter((t) => t.goodput >= goodputBeforeCut),
  };
}

/** The load curve's pass marks, each true, false, or null when the run had no step to judge it by. */
export function verdictsOf(steps: Step[], cutStep: Step, recovery: Recovery): Record<string, boolean | null> {
  const best = Math.max(...steps.map((s) => s.goodput));
  const at = (connections: number) => steps.find((s) => s.connections === connections);
  const [at256, at1000, at2000] = [at(256), at(1000), at(2000)];
  return {
    'goodput at 1000 ≥ 90% of best': at1000 ? at1000.goodput >= 0.9 * best : null,
    'goodput at 2000 ≥ 90% of best': at2000 ? at2000.goodput >= 0.9 * best : null,
    'writes shed at 256 ≤ 2%': at256 ? at256.writes.shedPercent <= 2 : null,
    'writes shed at 1000 ≤ 10%': at1000 ? at1000.writes.shedPercent <= 10 : null,
    'p99 at 1000 ≤ 3 × p99 at 256': at1000 && at256 ? at1000.p99Ms <= 3 * at256.p99Ms : null,
    'no bypass while Redis is up': steps.every((s) => (s.gateway.bypass ?? 0) === 0),
    'no client timeouts or socket errors': [...steps, cutStep].every((s) => Object.values(s.clientErrors).every((n) => n === 0)),
    'every non-2xx documented (503 with Retry-After, 409, 412)': [...steps, cutStep].every((s) =>
      Object.entries(s.statuses).every(([status, n]) => Number(status) < 300 || status === '304' || status === '409' || status === '412' || (status === '503' && n === s.retryAfter503)),
    ),
    "a second at the best step's goodput within 5 s of Redis returning": recovery.secondsToBest !== null && recovery.secondsToBest <= 5,
  };
}

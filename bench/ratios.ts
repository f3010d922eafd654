/**
 * The ratios `npm run bench` judges: one target's time per request over another's, round by
 * round, with the goal where it has one.
 */
import { measuredPairAtOnce } from './measured-runs.ts';
import { CONNECTIONS, RUNS, SECONDS, type Figures, type Target } from './rounds.ts';
import { median, round2 } from './support.ts';
import { wrk } from './wrk.ts';

/**
 * One target's CPU (or GC) time per request over another's, round by round (both measured in the
 * same round, a few seconds apart), and the median of those ratios: what a speed goal is judged by.
 */
export interface CpuRatio {
  ratio: number;
  byRound: number[];
}

/** A ratio with the goal for it (at most), or without one: reported only. */
export type Judged = CpuRatio & { goal?: number };

/** `of` over `over`, round by round (the same index: the same round), and the median of those ratios. */
export function ratioByRound(over: number[], of: number[]): CpuRatio {
  const byRound = of.map((value, i) => round2(value / over[i]!));
  return { ratio: median(byRound), byRound };
}

export const cpuRatio = (figures: Record<string, Figures>, numerator: string, denominator: string): CpuRatio =>
  ratioByRound(figures[denominator]!.cpuMicrosPerRequestByRound, figures[numerator]!.cpuMicrosPerRequestByRound);

export function gcRatio(figures: Record<string, Figures>, numerator: string, denominator: string): CpuRatio {
  const [of, over] = [figures[numerator]!.gcMicrosPerRequestByRound, figures[denominator]!.gcMicrosPerRequestByRound];
  if (!of || !over) throw new Error(`no GC time measured for ${of ? denominator : numerator}`);
  return ratioByRound(over, of);
}

/** Prints each ratio: its median, each round's, and whether its goal holds (or that it is reported only). */
export function printRatios(ratios: Record<string, Judged>): void {
  for (const [name, { ratio, byRound, goal }] of Object.entries(ratios)) {
    const verdict = goal === undefined ? 'reported' : `goal ≤ ${goal}: ${ratio <= goal ? 'holds' : 'not yet'}`;
    console.log(`  ${name.padEnd(60)} ${ratio} (${byRound.join(' / ')}); ${verdict}`);
  }
}

/**
 * `ours`'s CPU time per request over `reference`'s, both loaded at once (each with its own wrk,
 * both on the servers' core), RUNS times, each run with the next of `ours`'s processes: whatever
 * else the machine does in a run falls on both alike (side by side in one run, as the project
 * judges a speed claim).
 */
export async function cpuRatioAtOnce(ours: Target, reference: Target, path: string): Promise<CpuRatio> {
  const perRequest: { ours: number; reference: number }[] = [];
  for (let run = 0; run < RUNS; run++) {
    const loaded = (target: Target) => {
      const server = target.servers[run % target.servers.length]!;
      return { server, load: () => wrk(`${server.url}${target.path ?? path}`, { connections: CONNECTIONS, headers: target.headers, seconds: SECONDS }) };
    };
    const measured = await measuredPairAtOnce(run, loaded(ours), loaded(reference));
    const [oursCpu, referenceCpu] = measured.map(({ cpuMicros, result }) => cpuMicros / Math.max(result.requests, 1));
    const pair = { ours: oursCpu!, reference: referenceCpu! };
    perRequest.push(pair);
    console.log(`  run ${run + 1}: ${ours.key} ${pair.ours.toFixed(1)} µs CPU/req, ${reference.key} ${pair.reference.toFixed(1)}: ${round2(pair.ours / pair.reference)}`);
  }
  return ratioByRound(perRequest.map((run) => run.reference), perRequest.map((run) => run.ours));
}

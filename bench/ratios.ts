/**
 * The ratios `npm run bench` judges: one target's time per request over another's, round by
 * round, with the goal where it has one.
 */
import type { Figures } from './rounds.ts';
import { median, round2 } from './support.ts';

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

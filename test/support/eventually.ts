import { setTimeout as delay } from 'node:timers/promises';

/**
 * Polls `check` every `everyMs` until it holds and resolves with the milliseconds that took; rejects
 * once `withinMs` have passed without it. For a state a test waits for, instead of a sleep.
 */
export async function eventually(check: () => Promise<boolean>, { withinMs, everyMs = 50 }: { withinMs: number; everyMs?: number }): Promise<number> {
  const began = performance.now();
  for (;;) {
    if (await check()) return performance.now() - began;
    if (performance.now() - began >= withinMs) throw new Error(`condition not reached within ${withinMs} ms`);
    await delay(everyMs);
  }
}

import fc from 'fast-check';
import { RETRY_BUDGET_FLOOR, RETRY_BUDGET_RATIO, RETRY_BUDGET_WINDOW_MS, RetryBudget } from '../../src/proxy/retry-budget.js';

/** One thing that happens to the budget, `afterMs` after the one before. */
type Step = { afterMs: number; retry: boolean };

/** The budget as its definition says it, over every first try and granted retry kept with its time. */
function model() {
  const bucketMs = RETRY_BUDGET_WINDOW_MS / 10;
  const tries: number[] = [];
  const retries: number[] = [];
  const inWindow = (times: number[], now: number) => times.filter((t) => Math.floor(t / bucketMs) > Math.floor(now / bucketMs) - 10).length;
  return {
    tried: (now: number) => tries.push(now),
    withdraw: (now: number) => {
      const granted = inWindow(retries, now) + 1 <= Math.max(RETRY_BUDGET_FLOOR, RETRY_BUDGET_RATIO * inWindow(tries, now));
      if (granted) retries.push(now);
      return granted;
    },
    retriesInWindow: (now: number) => inWindow(retries, now),
    triesInWindow: (now: number) => inWindow(tries, now),
  };
}

describe('the retry budget', () => {
  it('grants a retry exactly when the window then holds at most max(floor, ratio × first tries): never more', () => {
    // Bursts (many steps at one time or close together) as well as pauses past a bucket or the window.
    const afterMs = fc.oneof(
      { arbitrary: fc.constant(0), weight: 4 },
      { arbitrary: fc.integer({ min: 0, max: 300 }), weight: 4 },
      { arbitrary: fc.integer({ min: 0, max: RETRY_BUDGET_WINDOW_MS * 1.5 }), weight: 1 },
    );
    const step = fc.record({ afterMs, retry: fc.boolean() });
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1e9 }), fc.array(step, { minLength: 20, maxLength: 300, size: 'max' }), (start, steps: Step[]) => {
        let now = start;
        const budget = new RetryBudget(() => now);
        const expected = model();
        for (const { afterMs, retry } of steps) {
          now += afterMs;
          if (!retry) {
            budget.tried();
            expected.tried(now);
            continue;
          }
          expect(budget.withdraw()).toBe(expected.withdraw(now));
          expect(expected.retriesInWindow(now)).toBeLessThanOrEqual(Math.max(RETRY_BUDGET_FLOOR, RETRY_BUDGET_RATIO * expected.triesInWindow(now)));
        }
      }),
    );
  });

  it('lets a quiet service have its floor, a busy one a fifth of its first tries, and forgets both after the window', () => {
    let now = 0;
    const budget = new RetryBudget(() => now);
    const granted = (asked: number) => Array.from({ length: asked }, () => budget.withdraw()).filter(Boolean).length;
    expect(granted(50)).toBe(RETRY_BUDGET_FLOOR);
    now += RETRY_BUDGET_WINDOW_MS;
    for (let i = 0; i < 1_000; i++) budget.tried();
    expect(granted(500)).toBe(1_000 * RETRY_BUDGET_RATIO);
    now += RETRY_BUDGET_WINDOW_MS;
    expect(granted(50)).toBe(RETRY_BUDGET_FLOOR);
  });
});

/** A service's retries may be at most this share of its first tries over the window… */
export const RETRY_BUDGET_RATIO = 0.2;
/** …or this many, when that is more: a quiet gateway can still retry a few. */
export const RETRY_BUDGET_FLOOR = 10;
/** The sliding window both are counted over, in BUDGET_BUCKETS steps. */
export const RETRY_BUDGET_WINDOW_MS = 10_000;
const BUDGET_BUCKETS = 10;
const BUCKET_MS = RETRY_BUDGET_WINDOW_MS / BUDGET_BUCKETS;

/**
 * How many retries one service may get (Envoy's `retry_budget`, Finagle's and Linkerd's budgets):
 * over the last RETRY_BUDGET_WINDOW_MS, at most max(RETRY_BUDGET_FLOOR, RETRY_BUDGET_RATIO × first
 * tries). A service that is down then gets at most that many extra requests, not one per request:
 * no retry storm. Envoy counts its budget over the requests active at once; a window of time, as
 * Finagle's and Linkerd's, is what a gateway without a view of concurrent retries can count
 * cheaply: a first try costs one addition to the current bucket.
 * Written here because no npm library fits: cockatiel and the like budget a retry loop around one
 * call, not a share of a stream of calls; the counting is a dozen lines.
 */
export class RetryBudget {
  /** One per BUCKET_MS of the window, reused: which step of time it holds, and what it counted then. */
  readonly #buckets: Bucket[] = Array.from({ length: BUDGET_BUCKETS }, () => ({ step: -Infinity, tries: 0, retries: 0 }));

  /** `now` is monotonic (performance.now): a clock set back must not empty or stretch the window. */
  constructor(private readonly now: () => number = () => performance.now()) {}

  /** Counts a first try: a request sent to the service for the first time. */
  tried(): void {
    this.#current().tries += 1;
  }

  /** Takes a retry from the budget: false, and nothing taken, when the window's share is spent. */
  withdraw(): boolean {
    const current = this.#current();
    let tries = 0;
    let retries = 0;
    for (const bucket of this.#buckets) {
      if (bucket.step <= current.step - BUDGET_BUCKETS) continue;
      tries += bucket.tries;
      retries += bucket.retries;
    }
    // Granted only while the retry it grants keeps the window within its share: 11 of 51 is over 20%.
    if (retries + 1 > Math.max(RETRY_BUDGET_FLOOR, RETRY_BUDGET_RATIO * tries)) return false;
    current.retries += 1;
    return true;
  }

  /** The bucket of now, emptied first when it last held an older step. */
  #current(): Bucket {
    const step = Math.floor(this.now() / BUCKET_MS);
    const bucket = this.#buckets[step % BUDGET_BUCKETS] as Bucket;
    if (bucket.step !== step) {
      bucket.step = step;
      bucket.tries = 0;
      bucket.retries = 0;
    }
    return bucket;
  }
}

interface Bucket {
  step: number;
  tries: number;
  retries: number;
}

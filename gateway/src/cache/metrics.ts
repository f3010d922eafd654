import { currentServerSpan } from '@app/shared/telemetry/spans';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { CacheOutcome } from '../exchange.js';
import { addTallies, Tally } from '@app/shared/platform/tallies';

/**
 * `gateway_cache_outcomes_total`, in `registry`; returns what counts an outcome (and puts it on the
 * request's trace: `X-Cache` says less, a collapsed request is a MISS). Counted in tallies, added to
 * the counter when /metrics is read.
 */
export function cacheOutcomeCounter(registry: Registry): (outcome: CacheOutcome) => void {
  const tallies = new Map<CacheOutcome, Tally<{ outcome: CacheOutcome }>>();
  const counter: Counter<'outcome'> = new Counter({
    name: 'gateway_cache_outcomes_total',
    help: 'GET/HEAD requests under /api by cache outcome.',
    labelNames: ['outcome'],
    registers: [registry],
    collect: (): void => addTallies(counter, tallies.values()),
  });
  return (outcome) => {
    currentServerSpan()?.setAttribute('gateway.cache.outcome', outcome);
    let tally = tallies.get(outcome);
    if (!tally) tallies.set(outcome, (tally = new Tally({ outcome })));
    tally.uncounted += 1;
  };
}

/** `gateway_redis_up` and `gateway_cache_owed_invalidations`, in `registry`, read when /metrics is asked. */
export function observeCache(registry: Registry, cache: { state: { redisUp: boolean; owed: number } }): void {
  new Gauge({
    name: 'gateway_redis_up',
    help: 'Whether the cache uses Redis now (1), or judges it down and bypasses it (0).',
    registers: [registry],
    collect() {
      this.set(cache.state.redisUp ? 1 : 0);
    },
  });
  new Gauge({
    name: 'gateway_cache_owed_invalidations',
    help: 'Generation renewals and holds that writes asked for and Redis has not taken yet: their scopes are bypassed.',
    registers: [registry],
    collect() {
      this.set(cache.state.owed);
    },
  });
}

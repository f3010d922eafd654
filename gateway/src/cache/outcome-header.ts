import { CACHE_OUTCOME_HEADER } from '@app/shared/platform/http/headers';
import type { CacheOutcome } from '../exchange.js';
import type { ResponseHeaders } from '../respond.js';

const X_CACHE: Record<CacheOutcome, string> = { hit: 'HIT', miss: 'MISS', collapsed: 'MISS', stale: 'STALE', bypass: 'BYPASS' };

/**
 * `X-Cache` on every response to a read under /api (or to a path no route knows): what the cache
 * did, `BYPASS` when it took no part (a refusal, the cache off). Each outcome is counted as it is said.
 */
export const cacheOutcomeHeader =
  (count: (outcome: CacheOutcome) => void): ResponseHeaders =>
  (exchange, headers) => {
    if (exchange.kind !== 'read') return;
    const outcome = exchange.cache ?? (exchange.underApi || exchange.target === undefined ? 'bypass' : undefined);
    if (outcome === undefined) return;
    headers.push(CACHE_OUTCOME_HEADER, X_CACHE[outcome]);
    count(outcome);
  };

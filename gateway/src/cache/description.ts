import { header } from '@app/shared/api-description/openapi';
import { CACHE_OUTCOME_HEADER } from '@app/shared/platform/http/headers';
import { z } from 'zod';
import type { FeatureDescription } from '../feature.js';

/** What the cache says on every read (GET and HEAD) it may answer. */
export const cacheDescription: FeatureDescription = {
  headers: {
    XCache: header(
      z.enum(['HIT', 'MISS', 'BYPASS', 'STALE']).optional(),
      "What the gateway's response cache did: `HIT` (served from it), `MISS` (fetched and stored), `BYPASS` (not cacheable), `STALE` (served from it while the service is unavailable). Sent on every gateway response to GET and HEAD under `/api` (`BYPASS` on all of them when the cache is off); a service answering directly does not send it.",
    ),
    Age: header(z.int().min(0).optional(), 'Seconds since the cached response was fetched, on a `HIT` or `STALE`.'),
  },
  operation: ({ kind }) => (kind === 'read' ? { headers: { [CACHE_OUTCOME_HEADER]: 'XCache', Age: 'Age' } } : {}),
};

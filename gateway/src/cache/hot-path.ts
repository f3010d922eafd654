import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { observeResponse } from '@app/shared/platform/http/observation';
import type { Logger } from '@app/shared/platform/logger';
import { requestTargets } from '../front-door.js';
import { rateLimitHeaders } from '../guard.js';
import type { GatewayMetrics } from '../metrics.js';
import type { FetchedResponse } from '../upstream.js';
import { sendHeld, storableHeaders, type CachedResponse } from './entry.js';
import type { Fills } from './fills.js';
import type { Lookup, ResponseCache } from './response-cache.js';
import type { CacheScopes, ReadScope } from './scope.js';

/**
 * What the hot path found for a cacheable request it did not answer, so the miss path neither asks
 * Redis again nor works out the keys again (nor joins another fill than the one it waited for). A
 * request without an entry here bypasses the cache.
 */
export const misses = new WeakMap<IncomingMessage, { scope: ReadScope; lookup: Lookup; fill?: Promise<FetchedResponse> }>();

/**
 * Whether the cache may answer this request at all. If-Match on a read is the service's to evaluate
 * (412, or 400 when malformed): the cache only answers If-None-Match.
 */
function isCacheableRequest(req: IncomingMessage): boolean {
  const { authorization, cookie } = req.headers;
  return (req.method === 'GET' || req.method === 'HEAD') && authorization === undefined && cookie === undefined && req.headers['if-match'] === undefined;
}

/**
 * Serves fresh cache hits before express does any work: from this gateway's memory when it holds the
 * entry (no round trip), else one Redis round trip; the same headers and log line as any response.
 * A miss whose fill is under way (fetched under the generation this request's own lookup found) waits
 * for it here too and is answered as express would (MISS, collapsed), unless the fill failed or got a
 * 5xx: express decides those (stale or a problem). Anything else goes on to the express app.
 */
export function withCacheHotPath(
  app: RequestListener,
  options: { cache: ResponseCache; fills: Fills; scopes: CacheScopes; logger: Logger; metrics: GatewayMetrics },
): RequestListener {
  const { cache, fills, scopes, logger, metrics } = options;
  const serveHit = (req: IncomingMessage, res: ServerResponse, entry: CachedResponse) => {
    const { requestId } = observeResponse(logger, req, res, metrics.requestFinished);
    metrics.cacheOutcome('hit');
    sendHeld(req, res, entry, { outcome: 'HIT', ageSeconds: cache.ageSeconds(entry), requestId, more: rateLimitHeaders(req) });
  };
  const serveFilled = (req: IncomingMessage, res: ServerResponse, fetched: FetchedResponse) => {
    const { requestId } = observeResponse(logger, req, res, metrics.requestFinished);
    metrics.cacheOutcome('collapsed');
    // As cached-reads.ts answers a collapsed request: the storable headers (never a cookie).
    sendHeld(req, res, { status: fetched.status, headers: storableHeaders(fetched.headers), body: fetched.body }, { outcome: 'MISS', requestId, more: rateLimitHeaders(req) });
  };
  /** The Redis round trip, for a request whose entry is not held in memory. */
  const tryRedis = async (req: IncomingMessage, res: ServerResponse, scope: ReadScope): Promise<boolean> => {
    const lookup = await cache.lookup(scope);
    if (!lookup) return false;
    const { entry } = lookup;
    if (entry && cache.isFresh(entry)) {
      serveHit(req, res, entry);
      return true;
    }
    const { generation } = lookup;
    const underWay = generation === null ? undefined : fills.underWay(scope, generation);
    if (!underWay) {
      if (generation !== null) fills.announce(scope, generation, res);
      misses.set(req, { scope, lookup });
      return false;
    }
    const started = await underWay;
    misses.set(req, { scope, lookup, fill: started?.flight });
    if (!started) return false;
    const fetched = await started.flight.catch(() => undefined);
    if (!fetched || fetched.status >= 500) return false;
    serveFilled(req, res, fetched);
    return true;
  };
  return (req, res) => {
    const target = requestTargets.get(req);
    const scope = target && isCacheableRequest(req) ? scopes.read(target) : undefined;
    if (!scope) {
      app(req, res);
      return;
    }
    // A hit from memory is answered synchronously: no promise, no round trip.
    const held = cache.held(scope);
    if (held) {
      serveHit(req, res, held);
      return;
    }
    tryRedis(req, res, scope).then(
      (served) => served || app(req, res),
      () => app(req, res),
    );
  };
}

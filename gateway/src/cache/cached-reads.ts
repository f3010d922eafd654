import type http from 'node:http';
import { sendProblem } from '@app/shared/platform/http/responses';
import type { RequestHandler, Response } from 'express';
import type { ConcurrencyLimit } from '../concurrency-limit.js';
import type { GatewayMetrics } from '../metrics.js';
import { fetchFromUpstream, upstreamProblem, type Deadlines, type FetchedResponse, type Upstream } from '../upstream.js';
import { isStorable, sendHeld, storableHeaders } from './entry.js';
import type { Fills } from './fills.js';
import { misses } from './hot-path.js';
import type { ResponseCache } from './response-cache.js';

export interface CachedUpstream {
  upstream: Upstream;
  agent: http.Agent;
  /** The requests in flight to it (a fill takes one slot, however many requests it answers). */
  limit: ConcurrencyLimit;
}

/**
 * GET and HEAD under /api that the hot path did not answer. Every such response says how the cache
 * took part (`X-Cache`). A miss is fetched once per key and generation however many requests want
 * it at the same moment (request collapsing, `fills`), stored when storable, and shared; when the
 * service fails, an entry that expired less than CACHE_STALE_SECONDS ago is served instead (STALE).
 * A request the hot path already waited on a fill for (which failed, or answered 5xx) is answered
 * here from that same fill.
 */
export function cachedReads(options: {
  cache: ResponseCache | undefined;
  fills: Fills;
  upstreamFor: (path: string) => CachedUpstream | undefined;
  deadlines: Deadlines;
  metrics: GatewayMetrics;
}): RequestHandler {
  const { cache, fills, upstreamFor, deadlines, metrics } = options;

  return async (req, res, next) => {
    if ((req.method !== 'GET' && req.method !== 'HEAD') || !(req.path === '/api' || req.path.startsWith('/api/'))) {
      next();
      return;
    }
    const miss = misses.get(req);
    const target = upstreamFor(req.path);
    const generation = cache && miss ? await cache.generationFor(miss.scope, miss.lookup) : undefined;
    if (!cache || !miss || !target || generation === undefined) {
      res.setHeader('X-Cache', 'BYPASS');
      metrics.cacheOutcome('bypass');
      next();
      return;
    }

    const { scope, lookup } = miss;
    const serveStale = () => {
      const stale = lookup.entry;
      if (!stale || !cache.isServableStale(stale)) return false;
      metrics.cacheOutcome('stale');
      sendHeld(req, res, stale, { outcome: 'STALE', ageSeconds: cache.ageSeconds(stale) });
      return true;
    };

    let flight = miss.fill ?? fills.started(scope, generation);
    const leads = flight === undefined;
    if (!flight) {
      const release = target.limit.tryAcquire(false);
      if (!release) {
        metrics.shed(target.limit, false);
        if (serveStale()) return;
        res.setHeader('X-Cache', 'MISS');
        metrics.cacheOutcome('miss');
        sendProblem(req, res, target.limit.shedProblem());
        return;
      }
      flight = fetchFromUpstream(
        target.upstream,
        { path: req.originalUrl, headers: req.headers, requestId: (res as Response).locals.requestId, remoteAddress: req.socket.remoteAddress },
        { deadlines, agent: target.agent },
      );
      // The slot is the service's: given back once its answer is read, not after the store in Redis
      // (a whole event-loop turn more under load, when a cut Redis comes back and every entry needs a fill).
      const stored = flight
        .finally(release)
        .then(async (fetched) => {
          if (isStorable(fetched.status, fetched.headers)) {
            await cache.store(scope, { generation, storedAt: cache.now(), status: fetched.status, headers: storableHeaders(fetched.headers), body: fetched.body });
          }
        })
        .catch(() => undefined);
      fills.start(scope, generation, flight, stored);
    }

    let fetched: FetchedResponse;
    try {
      fetched = await flight;
    } catch (error) {
      if (serveStale()) return;
      res.setHeader('X-Cache', 'MISS');
      metrics.cacheOutcome('miss');
      res.locals.log.warn({ upstream: target.upstream.name, err: error }, 'upstream request failed');
      throw upstreamProblem(target.upstream.name, error as Error);
    }
    if (fetched.status >= 500 && serveStale()) return;
    metrics.cacheOutcome(leads ? 'miss' : 'collapsed');
    const headers = storableHeaders(fetched.headers);
    // A cookie is for the one client whose request made it: never shared with collapsed requests.
    const cookie = leads ? fetched.headers['set-cookie'] : undefined;
    if (cookie) res.setHeader('Set-Cookie', cookie);
    sendHeld(req, res, { status: fetched.status, headers, body: fetched.body }, { outcome: 'MISS' });
  };
}

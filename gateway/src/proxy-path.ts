import type { IncomingMessage, RequestListener } from 'node:http';
import { answerFailure, BODY_LIMIT_BYTES, observeResponse, writeProblem } from '@app/shared/platform/http';
import type { Logger } from '@app/shared/platform/logger';
import { holdSlot, type ConcurrencyLimit } from './concurrency-limit.js';
import { requestTargets } from './front-door.js';
import { rateLimitHeaders } from './guard.js';
import type { GatewayMetrics } from './metrics.js';
import { keepOwnHeaders, setOwnHeaders, type upstreamProxy } from './upstream.js';

/** One service as the proxy path reaches it: its proxy (http-proxy-middleware) and its concurrency limit. */
export interface ProxyHop {
  serves: (path: string) => boolean;
  proxy: ReturnType<typeof upstreamProxy>;
  limit: ConcurrencyLimit;
}

function hopFor(hops: readonly ProxyHop[], path: string): ProxyHop | undefined {
  for (const hop of hops) if (hop.serves(path)) return hop;
  return undefined;
}

/** A body declared larger than the limit: express refuses it (413) before anything reaches a service. */
const declaresOversizedBody = (req: IncomingMessage) => {
  const declared = req.headers['content-length'];
  return declared !== undefined && Number(declared) > BODY_LIMIT_BYTES;
};

/**
 * The proxy hop before express, as the cache's hot path is: a request for a service that no cache
 * fill answers (every one while the cache is off; writes; reads the cache bypasses) goes straight
 * to its service's proxy, with what express's middleware gave it on the way there: the request id
 * and log line, the RateLimit headers, `X-Cache: BYPASS` on a read, the concurrency limit (503).
 * Express's router, its request and response prototypes and the middleware meant for other
 * requests were a third of the gateway's CPU time on a proxied request (CPU profile). Anything else
 * goes on to `app`: the gateway's own endpoints, a target with no canonical form, a body declared
 * over the limit, and a read the hot path found missing from the cache (`isCacheMiss`: it is
 * fetched, collapsed and stored there).
 */
export function withProxyPath(
  app: RequestListener,
  options: { hops: readonly ProxyHop[]; isCacheMiss: (req: IncomingMessage) => boolean; logger: Logger; metrics: GatewayMetrics },
): RequestListener {
  const { hops, isCacheMiss, logger, metrics } = options;
  return (req, res) => {
    const target = requestTargets.get(req);
    const path = target?.path;
    const hop = path === undefined ? undefined : hopFor(hops, path);
    if (!hop || path === undefined || isCacheMiss(req) || declaresOversizedBody(req)) {
      app(req, res);
      return;
    }
    // Its logger (`.log`) is made on first use: not here.
    const observation = observeResponse(logger, req, res, metrics.requestFinished);
    const own = ['X-Request-Id', observation.requestId];
    if (req.method === 'GET' || req.method === 'HEAD') {
      own.push('X-Cache', 'BYPASS');
      metrics.cacheOutcome('bypass');
    }
    const limits = rateLimitHeaders(req);
    if (limits) for (const name in limits) own.push(name, limits[name] as string);
    keepOwnHeaders(res, own);
    if (!holdSlot(hop.limit, req, res, metrics.shed)) {
      setOwnHeaders(res);
      writeProblem(res, path, hop.limit.shedProblem());
      return;
    }
    // The proxy calls back only when it fails (or, never here, when its path filter refuses the path).
    hop.proxy(req, res, (error) => {
      setOwnHeaders(res);
      answerFailure(res, path, error ?? new Error(`no proxy took ${path}`), observation.log);
    });
  };
}

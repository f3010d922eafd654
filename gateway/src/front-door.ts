import type { IncomingMessage, RequestListener } from 'node:http';
import { stampArrival } from '@app/shared/platform/http/observation';
import { noCanonicalForm } from '@app/shared/platform/http/routing';
import { requestTarget, type RequestTarget } from '@app/shared/platform/request-target';
import type { RequestHandler } from 'express';
import type { GatewayMetrics } from './metrics.js';

const TARGET = Symbol('canonical target');
type TargetedRequest = IncomingMessage & { [TARGET]?: RequestTarget };

/**
 * The canonical target of every request the front door let in (see shared/src/platform/request-target.ts).
 * Kept on the request itself rather than in a WeakMap: every request would add an entry that
 * garbage collection has to trace as an ephemeron.
 */
export const requestTargets = {
  get: (req: IncomingMessage): RequestTarget | undefined => (req as TargetedRequest)[TARGET],
  has: (req: IncomingMessage): boolean => (req as TargetedRequest)[TARGET] !== undefined,
};

/**
 * The first thing every request meets: its target is turned into its canonical form once, and
 * `req.url` becomes it, so the cache, the proxy, the metrics (and whatever decides by path later)
 * all see the one spelling the service will act on. Its arrival is stamped first, so that its
 * duration in the log and the metrics counts whatever it waits for before it is observed (the
 * guard's key fetch, a Redis round trip, a fill under way). A target with no canonical form goes on
 * unchanged, straight to express, which refuses it (`refuseNonCanonical`, 404) with the usual log line.
 */
export function withFrontDoor(handler: RequestListener): RequestListener {
  return (req, res) => {
    stampArrival(req);
    const target = requestTarget(req.url ?? '/');
    if (target) req.url = target.url;
    // Set on every request, `undefined` included, so that every request has the same shape.
    (req as TargetedRequest)[TARGET] = target;
    handler(req, res);
  };
}


/** 404 for a request the front door found no canonical form for; never cached (`X-Cache: BYPASS`). */
export function refuseNonCanonical(metrics: GatewayMetrics): RequestHandler {
  return (req, res, next) => {
    if (requestTargets.has(req)) {
      next();
      return;
    }
    if (req.method === 'GET' || req.method === 'HEAD') {
      res.setHeader('X-Cache', 'BYPASS');
      metrics.cacheOutcome('bypass');
    }
    throw noCanonicalForm();
  };
}

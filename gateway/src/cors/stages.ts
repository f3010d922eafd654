import cors from 'cors';
import type { Request, Response } from 'express';
import type { Exchange } from '../exchange.js';
import type { Stage } from '../pipeline.js';
import type { ResponseWriter } from '../respond.js';

const noop = () => undefined;

/**
 * CORS for the origins whose browser pages may call the API: their headers on every response to
 * them, and their preflights answered (204) once counted against the address's read budget, like
 * any request (browsers send no token with a preflight). Two stages: `headers` first, `preflight`
 * after the rate limits. `exposedHeaders`: what a page may read (every feature's, cors/feature.ts). Any other OPTIONS is a request like any other (auth, limits, 404 or Allow).
 */
export function corsStages(origins: readonly string[], writer: ResponseWriter, exposedHeaders: readonly string[]): { headers: Stage; preflight: Stage } {
  const allowed = new Set(origins);
  const handler = cors({
    origin: [...origins],
    methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'],
    // docs/api.md ("Browsers") names both lists: keep it in step.
    allowedHeaders: ['Authorization', 'Content-Type', 'If-Match', 'If-None-Match', 'Idempotency-Key', 'X-Request-Id'],
    exposedHeaders: [...exposedHeaders],
    maxAge: 600,
  });
  // The cors package decides synchronously for a fixed list of origins.
  const apply = (exchange: Exchange, next: () => void) => handler(exchange.req as Request, exchange.res as Response, next);
  const headers: Stage = {
    name: 'cors headers',
    run(exchange) {
      const { req } = exchange;
      if (exchange.kind !== 'options') apply(exchange, noop);
      else if (allowed.has(req.headers.origin ?? '') && req.headers['access-control-request-method'] !== undefined) exchange.preflight = true;
      return false;
    },
  };
  const preflight: Stage = {
    name: 'cors preflight',
    run(exchange) {
      if (!exchange.preflight) return false;
      writer.ownHeaders(exchange);
      apply(exchange, noop);
      return true;
    },
  };
  return { headers, preflight };
}

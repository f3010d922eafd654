import type { IncomingMessage, RequestListener } from 'node:http';
import { BODY_LIMIT_BYTES, bodyTooLarge, declaresOversizedBody } from '@app/shared/platform/http/bodies';
import { answerFailure } from '@app/shared/platform/http/failures';
import { observeResponse } from '@app/shared/platform/http/observation';
import { writeProblem } from '@app/shared/platform/http/responses';
import type { Logger } from '@app/shared/platform/logger';
import { HttpProblem } from '@app/shared/platform/problem';
import { holdSlot, type ConcurrencyLimit } from './concurrency-limit.js';
import { requestTargets } from './front-door.js';
import { rateLimitHeaders } from './guard.js';
import type { GatewayMetrics } from './metrics.js';
import { keepOwnHeaders, receivedBodies, setOwnHeaders, type upstreamProxy } from './upstream.js';

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

/** A request with a body still to come: one that declares a length above 0, or is chunked. */
const hasBody = (req: IncomingMessage) => {
  const declared = req.headers['content-length'];
  return declared === undefined ? req.headers['transfer-encoding'] !== undefined : declared !== '0';
};

/**
 * The whole request body, in memory (at most BODY_LIMIT_BYTES), for the proxy to send on at once
 * (`receivedBodies`); a problem when it is larger (413) or has not all arrived within
 * `timeoutMs` (408). The connection closes after either: the rest of the body may still come.
 */
function receiveBody(req: IncomingMessage, timeoutMs: number): Promise<void> {
  if (declaresOversizedBody(req.headers)) return Promise.reject(bodyTooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const fail = (problem: HttpProblem) => {
      clearTimeout(deadline);
      req.removeListener('data', take);
      req.removeListener('end', done);
      reject(problem);
    };
    const take = (chunk: Buffer) => {
      size += chunk.length;
      if (size > BODY_LIMIT_BYTES) fail(bodyTooLarge());
      else chunks.push(chunk);
    };
    const done = () => {
      clearTimeout(deadline);
      receivedBodies.set(req, Buffer.concat(chunks, size));
      resolve();
    };
    const deadline = setTimeout(() => fail(new HttpProblem('request-timeout', `The request body did not arrive within ${timeoutMs} ms`)), timeoutMs);
    req.on('data', take);
    req.once('end', done);
    req.once('error', () => fail(new HttpProblem('bad-request', 'The request body could not be read')));
  });
}

/**
 * The proxy hop before express, as the cache's hot path is: a request for a service that no cache
 * fill answers (every one while the cache is off; writes; reads the cache bypasses) goes straight
 * to its service's proxy, with what express's middleware gave it on the way there: the request id
 * and log line, the RateLimit headers, `X-Cache: BYPASS` on a read, the body limit (413), the
 * concurrency limit (503). Express's router, its prototypes and the middleware meant for other
 * requests would cost every proxied request a large share of its time. Anything else goes on to
 * `app`: the gateway's own endpoints, a target with no canonical form, and a read the hot path
 * found missing from the cache (`isCacheMiss`: it is fetched, collapsed and stored there).
 */
export function withProxyPath(
  app: RequestListener,
  options: { hops: readonly ProxyHop[]; isCacheMiss: (req: IncomingMessage) => boolean; requestBodyMs: number; logger: Logger; metrics: GatewayMetrics },
): RequestListener {
  const { hops, isCacheMiss, requestBodyMs, logger, metrics } = options;
  return (req, res) => {
    const target = requestTargets.get(req);
    const path = target?.path;
    const hop = path === undefined ? undefined : hopFor(hops, path);
    if (!hop || path === undefined || isCacheMiss(req)) {
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
    const forward = () => {
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
    if (!hasBody(req)) {
      forward();
      return;
    }
    // A slot is the service's time: a body still on its way holds none (slow senders would hold them all).
    receiveBody(req, requestBodyMs).then(forward, (problem: HttpProblem) => {
      setOwnHeaders(res);
      res.setHeader('Connection', 'close');
      writeProblem(res, path, problem);
    });
  };
}

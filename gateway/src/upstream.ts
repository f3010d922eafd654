import type http from 'node:http';
import { sendProblem } from '@app/shared/http';
import { HttpProblem } from '@app/shared/problem';
import { KEEP_ALIVE_TIMEOUT_MS } from '@app/shared/server';
import type { Request, Response } from 'express';
import { createProxyMiddleware } from 'http-proxy-middleware';
import { retireAgedSocket, upstreamAgent } from './upstream-agent.js';

export interface Upstream {
  /** A name for logs and problem details; never a host name. */
  name: string;
  url: string;
  /** The path prefix it serves, e.g. `/api/users` (and everything below it). */
  prefix: string;
}

class UpstreamTimeout extends Error {
  constructor(readonly timeoutMs: number) {
    super(`no response headers within ${timeoutMs} ms`);
    this.name = 'UpstreamTimeout';
  }
}

/**
 * A keep-alive proxy to one service. Paths go through unchanged. An upstream that does not send
 * response headers within `timeoutMs` is cut off (504); one that cannot be reached is a 502.
 */
export function upstreamProxy(upstream: Upstream, options: { timeoutMs: number }) {
  const { prefix } = upstream;
  return createProxyMiddleware<http.IncomingMessage, http.ServerResponse>({
    target: upstream.url,
    agent: upstreamAgent(upstream.url),
    xfwd: true,
    pathFilter: (path) => path === prefix || path.startsWith(`${prefix}/`),
    on: {
      proxyReq: (proxyReq, _req, res) => {
        const { locals } = res as Response;
        proxyReq.setHeader('X-Request-Id', locals.requestId);
        retireAgedSocket(proxyReq);
        const deadline = setTimeout(() => proxyReq.destroy(new UpstreamTimeout(options.timeoutMs)), options.timeoutMs);
        proxyReq.once('response', () => clearTimeout(deadline));
        proxyReq.once('close', () => clearTimeout(deadline));
      },
      // Connection and Keep-Alive are hop-by-hop: the client's connection is the gateway's, not the
      // service's (and is closing while the gateway shuts down).
      proxyRes: (proxyRes, req, res) => {
        const decided = res.getHeader('connection');
        const close = decided === 'close' || /\bclose\b/i.test(req.headers.connection ?? '');
        proxyRes.headers.connection = close ? 'close' : 'keep-alive';
        if (close) delete proxyRes.headers['keep-alive'];
        else proxyRes.headers['keep-alive'] = `timeout=${KEEP_ALIVE_TIMEOUT_MS / 1000}`;
      },
      // httpxy hands failures only to this listener (never to express's `next`), so it answers here.
      error: (error, req, res) => {
        if (!('setHeader' in res)) return;
        const response = res as Response;
        response.locals.log.warn({ upstream: upstream.name, err: error }, 'upstream request failed');
        if (response.headersSent) response.destroy();
        else sendProblem(req as Request, response, upstreamProblem(upstream.name, error));
      },
    },
  });
}

/** A timeout is a 504; anything else that stops the proxy from getting a response is a 502. */
function upstreamProblem(upstream: string, error: Error): HttpProblem {
  if (error instanceof UpstreamTimeout) {
    return new HttpProblem('gateway-timeout', `The ${upstream} service did not answer within ${error.timeoutMs} ms`);
  }
  return new HttpProblem('bad-gateway', `The ${upstream} service could not be reached`);
}

import http from 'node:http';
import https from 'node:https';
import { HttpProblem } from '@app/shared/problem';
import type { Logger } from '@app/shared/logger';
import type { Response } from 'express';
import { createProxyMiddleware } from 'http-proxy-middleware';

/**
 * How long an idle keep-alive socket to a service is kept. Shorter than the services' server
 * keep-alive timeout (KEEP_ALIVE_TIMEOUT_MS), so the gateway never reuses a socket the service is
 * closing.
 */
export const UPSTREAM_IDLE_SOCKET_MS = 30_000;

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

/** Errors a proxy reported, with the upstream they came from: only these become 502/504. */
const failedUpstreams = new WeakMap<object, string>();

/**
 * A keep-alive proxy to one service. Paths go through unchanged. An upstream that does not send
 * response headers within `timeoutMs` is cut off (504); one that cannot be reached is a 502.
 */
export function upstreamProxy(upstream: Upstream, options: { timeoutMs: number; logger: Logger }) {
  const secure = upstream.url.startsWith('https:');
  const agentOptions = { keepAlive: true, timeout: UPSTREAM_IDLE_SOCKET_MS };
  const agent = secure ? new https.Agent(agentOptions) : new http.Agent(agentOptions);
  const { prefix } = upstream;
  return createProxyMiddleware<http.IncomingMessage, http.ServerResponse>({
    target: upstream.url,
    agent,
    xfwd: true,
    pathFilter: (path) => path === prefix || path.startsWith(`${prefix}/`),
    on: {
      proxyReq: (proxyReq, _req, res) => {
        const { locals } = res as Response;
        proxyReq.setHeader('X-Request-Id', locals.requestId);
        const deadline = setTimeout(() => proxyReq.destroy(new UpstreamTimeout(options.timeoutMs)), options.timeoutMs);
        proxyReq.once('response', () => clearTimeout(deadline));
        proxyReq.once('close', () => clearTimeout(deadline));
      },
      error: (error, _req, res) => {
        // The response itself is written by the app's problem handler (HPM passes the error on).
        failedUpstreams.set(error, upstream.name);
        const log = 'locals' in res ? (res as Response).locals.log : options.logger;
        log.warn({ upstream: upstream.name, err: error }, 'upstream request failed');
      },
    },
  });
}

/** Maps proxy failures to 502/504 problems; anything else is not the gateway's to classify. */
export function upstreamProblem(error: unknown): HttpProblem | undefined {
  const upstream = typeof error === 'object' && error !== null ? failedUpstreams.get(error) : undefined;
  if (upstream === undefined) return undefined;
  if (error instanceof UpstreamTimeout) {
    return new HttpProblem('gateway-timeout', `The ${upstream} service did not answer within ${error.timeoutMs} ms`);
  }
  return new HttpProblem('bad-gateway', `The ${upstream} service could not be reached`);
}

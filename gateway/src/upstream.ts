import http from 'node:http';
import https from 'node:https';
import { sendProblem } from '@app/shared/http';
import { HttpProblem } from '@app/shared/problem';
import type { Request, Response } from 'express';
import { createProxyMiddleware } from 'http-proxy-middleware';
import { retireAgedSocket } from './upstream-agent.js';

export interface Upstream {
  /** A name for logs and problem details; never a host name. */
  name: string;
  url: string;
  /** The path prefix it serves, e.g. `/api/users` (and everything below it). */
  prefix: string;
}

/** Whether the upstream serves `path`: its prefix and everything below it (not `/api/usersx`). */
export const servesPath = (upstream: Pick<Upstream, 'prefix'>, path: string) =>
  path === upstream.prefix || path.startsWith(`${upstream.prefix}/`);

/** Headers about the connection or this one delivery: never stored, never forwarded. */
export const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);
class UpstreamTimeout extends Error {
  constructor(readonly timeoutMs: number) {
    super(`no response headers within ${timeoutMs} ms`);
    this.name = 'UpstreamTimeout';
  }
}

/**
 * A keep-alive proxy to one service. Paths go through unchanged. An upstream that does not send
 * response headers within `timeoutMs` is cut off (504); one that cannot be reached is a 502.
 * `onSettled` runs once the request is settled (the service answered with `status`, or it failed:
 * 502) and before the client hears back: the cache invalidates writes there.
 */
export function upstreamProxy(
  upstream: Upstream,
  options: { timeoutMs: number; agent: http.Agent; onSettled?: (req: http.IncomingMessage, status: number) => Promise<void> },
) {
  return createProxyMiddleware<http.IncomingMessage, http.ServerResponse>({
    target: upstream.url,
    agent: options.agent,
    xfwd: true,
    selfHandleResponse: true,
    pathFilter: (path) => servesPath(upstream, path),
    on: {
      proxyReq: (proxyReq, _req, res) => {
        proxyReq.setHeader('X-Request-Id', (res as Response).locals.requestId);
        superviseUpstreamRequest(proxyReq, options.timeoutMs);
      },
      proxyRes: async (proxyRes, req, res) => {
        await options.onSettled?.(req, proxyRes.statusCode ?? 502);
        res.statusCode = proxyRes.statusCode ?? 502;
        // Hop-by-hop headers describe the service's connection, not the client's: Node sets its own.
        for (const [name, value] of Object.entries(proxyRes.headers)) {
          if (value !== undefined && !HOP_BY_HOP.has(name)) res.setHeader(name, value);
        }
        proxyRes.once('error', () => res.destroy());
        proxyRes.pipe(res);
      },
      // httpxy hands failures only to this listener (never to express's `next`), so it answers here.
      error: async (error, req, res) => {
        if (!('setHeader' in res)) return;
        const response = res as Response;
        response.locals.log.warn({ upstream: upstream.name, err: error }, 'upstream request failed');
        await options.onSettled?.(req, 502);
        if (response.headersSent) response.destroy();
        else sendProblem(req as Request, response, upstreamProblem(upstream.name, error));
      },
    },
  });
}

/**
 * What every request to a service gets: its socket retired once old (see upstream-agent.ts), and a
 * cut-off (UpstreamTimeout) when no response headers arrive within `timeoutMs`.
 */
function superviseUpstreamRequest(request: http.ClientRequest, timeoutMs: number): void {
  retireAgedSocket(request);
  const deadline = setTimeout(() => request.destroy(new UpstreamTimeout(timeoutMs)), timeoutMs);
  request.once('response', () => clearTimeout(deadline));
  request.once('close', () => clearTimeout(deadline));
}

export interface FetchedResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

// Request headers a cache fill does not pass on: the gateway fetches the full representation and
// answers conditionals itself.
const NOT_FORWARDED = new Set([...HOP_BY_HOP, 'host', 'if-none-match', 'if-modified-since', 'content-length']);

/** A plain GET of `path` from the service, body in memory: what the cache stores and shares. */
export function fetchFromUpstream(
  upstream: Upstream,
  request: { path: string; headers: http.IncomingHttpHeaders; requestId: string; remoteAddress?: string },
  options: { timeoutMs: number; agent: http.Agent },
): Promise<FetchedResponse> {
  const headers: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(request.headers)) if (!NOT_FORWARDED.has(name)) headers[name] = value;
  headers['x-forwarded-for'] ??= request.remoteAddress;
  headers['x-request-id'] = request.requestId;
  const get = upstream.url.startsWith('https:') ? https.get : http.get;
  return new Promise((resolve, reject) => {
    const outgoing = get(new URL(request.path, upstream.url), { agent: options.agent, headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.once('end', () => resolve({ status: response.statusCode ?? 502, headers: response.headers, body: Buffer.concat(chunks) }));
      response.once('error', reject);
    });
    superviseUpstreamRequest(outgoing, options.timeoutMs);
    outgoing.once('error', reject);
  });
}

/** A timeout is a 504; anything else that stops the gateway from getting a response is a 502. */
export function upstreamProblem(upstream: string, error: Error): HttpProblem {
  if (error instanceof UpstreamTimeout) {
    return new HttpProblem('gateway-timeout', `The ${upstream} service did not answer within ${error.timeoutMs} ms`);
  }
  return new HttpProblem('bad-gateway', `The ${upstream} service could not be reached`);
}

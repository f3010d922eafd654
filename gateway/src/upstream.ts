import http from 'node:http';
import https from 'node:https';
import { sendProblem } from '@app/shared/platform/http';
import { HttpProblem } from '@app/shared/platform/problem';
import type { Request, Response } from 'express';
import { createProxyMiddleware, debugProxyErrorsPlugin, proxyEventsPlugin } from 'http-proxy-middleware';
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
/** The service was too slow: no response headers, or no end of its response body, in time. */
class UpstreamTimeout extends Error {
  constructor(
    readonly timeoutMs: number,
    readonly stalled: 'headers' | 'body',
  ) {
    super(`no response ${stalled} within ${timeoutMs} ms`);
    this.name = 'UpstreamTimeout';
  }
}

/** The client was too slow: its request body had not arrived when the body deadline passed. */
class RequestBodyTimeout extends Error {
  constructor(readonly timeoutMs: number) {
    super(`request body not received within ${timeoutMs} ms`);
    this.name = 'RequestBodyTimeout';
  }
}

export interface Deadlines {
  /** For the service: its response headers, once the request is sent, and then its whole body. */
  upstreamMs: number;
  /** For the client: its whole request body, from the moment the gateway starts forwarding it. */
  requestBodyMs: number;
}

/**
 * A keep-alive proxy to one service. Paths go through unchanged. A request body that has not
 * arrived within `deadlines.requestBodyMs` is the client's fault (408, connection closed); an
 * upstream that does not send response headers within `deadlines.upstreamMs` of the whole request
 * is cut off (504), and one whose body then stalls is cut (the client sees the connection cut);
 * one that cannot be reached is a 502.
 * `onSettled` runs once the request is settled (the service answered with `status`, or it failed:
 * 502) and before the client hears back: the cache invalidates writes there.
 */
export function upstreamProxy(
  upstream: Upstream,
  options: { deadlines: Deadlines; agent: http.Agent; onSettled?: (req: http.IncomingMessage, status: number) => Promise<void> },
) {
  return createProxyMiddleware<http.IncomingMessage, http.ServerResponse>({
    target: upstream.url,
    agent: options.agent,
    xfwd: true,
    selfHandleResponse: true,
    pathFilter: (path) => servesPath(upstream, path),
    // The default plugins without the logger plugin: for every response it built the target's URL
    // and a log line for a logger that writes nothing (the gateway logs requests itself). Errors
    // are answered by `on.error` below.
    ejectPlugins: true,
    plugins: [debugProxyErrorsPlugin, proxyEventsPlugin],
    on: {
      proxyReq: (proxyReq, req, res) => {
        proxyReq.setHeader('X-Request-Id', (res as Response).locals.requestId);
        superviseUpstreamRequest(proxyReq, options.deadlines, req);
      },
      proxyRes: async (proxyRes, req, res) => {
        await options.onSettled?.(req, proxyRes.statusCode ?? 502);
        if (res.headersSent) {
          // The gateway already answered (the request body deadline passed): the service's answer is moot.
          proxyRes.resume();
          return;
        }
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
        else {
          // The client's own body is still (slowly) arriving: this connection cannot be reused.
          if (error instanceof RequestBodyTimeout) response.setHeader('Connection', 'close');
          sendProblem(req as Request, response, upstreamProblem(upstream.name, error));
        }
      },
    },
  });
}

/**
 * What every request to a service gets: its socket retired once old (see upstream-agent.ts) and
 * three deadlines, each blaming whoever is late. While the client's body (`incoming`) is still
 * arriving, only the client is waited for (RequestBodyTimeout after `requestBodyMs`); then the
 * service has `upstreamMs` for its response headers, and `upstreamMs` more for its body
 * (UpstreamTimeout). Whichever passes destroys the request, which fails it and its response.
 */
function superviseUpstreamRequest(request: http.ClientRequest, deadlines: Deadlines, incoming?: http.IncomingMessage): void {
  retireAgedSocket(request);
  let deadline: NodeJS.Timeout | undefined;
  const cutAfter = (ms: number, error: () => Error) => {
    clearTimeout(deadline);
    deadline = setTimeout(() => request.destroy(error()), ms);
  };
  const awaitHeaders = () => cutAfter(deadlines.upstreamMs, () => new UpstreamTimeout(deadlines.upstreamMs, 'headers'));
  if (!incoming || incoming.complete) awaitHeaders();
  else {
    cutAfter(deadlines.requestBodyMs, () => new RequestBodyTimeout(deadlines.requestBodyMs));
    incoming.once('end', () => {
      if (!request.destroyed) awaitHeaders();
    });
  }
  let responded = false;
  request.once('response', (response: http.IncomingMessage) => {
    responded = true;
    if (response.complete) clearTimeout(deadline);
    else cutAfter(deadlines.upstreamMs, () => new UpstreamTimeout(deadlines.upstreamMs, 'body'));
    response.once('close', () => clearTimeout(deadline));
  });
  request.once('close', () => {
    if (!responded) clearTimeout(deadline);
  });
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
  options: { deadlines: Deadlines; agent: http.Agent },
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
      // A body cut short (the body deadline, or the service going away) fails the fetch: never a hang.
      response.once('close', () => {
        if (!response.complete) reject(new UpstreamTimeout(options.deadlines.upstreamMs, 'body'));
      });
    });
    superviseUpstreamRequest(outgoing, options.deadlines);
    outgoing.once('error', reject);
  });
}

/**
 * A client whose body did not arrive in time is a 408; a service's timeout is a 504; anything else
 * that stops the gateway from getting a response is a 502.
 */
export function upstreamProblem(upstream: string, error: Error): HttpProblem {
  if (error instanceof RequestBodyTimeout) {
    return new HttpProblem('request-timeout', `The request body did not arrive within ${error.timeoutMs} ms`);
  }
  if (error instanceof UpstreamTimeout) {
    const what = error.stalled === 'headers' ? 'did not answer' : 'did not finish its answer';
    return new HttpProblem('gateway-timeout', `The ${upstream} service ${what} within ${error.timeoutMs} ms`);
  }
  return new HttpProblem('bad-gateway', `The ${upstream} service could not be reached`);
}

import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { REQUEST_ID_FIELD } from '@app/shared/platform/http/headers';
import type { HttpProblem } from '@app/shared/platform/problem';
import { ROLE_HEADER, SUBJECT_HEADER } from '@app/shared/platform/subject';
import { endClientSpan, type RequestTrace, startClientSpan, traceOf } from '@app/shared/telemetry/spans';
import { createProxyMiddleware, proxyEventsPlugin } from 'http-proxy-middleware';
import { exchangeOf, type Exchange } from '../exchange.js';
import type { Upstream } from '../upstream-model.js';
import { upstreamTimedOut, upstreamUnreachable, type Stalled } from './problems.js';

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

/**
 * Headers the gateway has set on a request before its hop (identify: who the caller is), which a
 * client's `Connection` may not take away: without them a service would see no caller, and serve
 * every owner's records.
 */
const SET_BEFORE_THE_HOP = new Set([SUBJECT_HEADER, ROLE_HEADER]);

/** Whether a request header goes no further than the gateway: HOP_BY_HOP, any `Proxy-*`, or one the client's `Connection` names. */
const staysHere = (name: string, named: ReadonlySet<string> | undefined): boolean =>
  HOP_BY_HOP.has(name) || name.startsWith('proxy-') || (named !== undefined && named.has(name));

/** The headers a `Connection` value names, but those set before the hop; undefined for the usual `keep-alive` or `close`, which name none. */
function namedByConnection(connection: string): Set<string> | undefined {
  const usual = connection.toLowerCase();
  if (usual === 'keep-alive' || usual === 'close') return undefined;
  const named = new Set(usual.split(',').map((token) => token.trim()));
  for (const name of SET_BEFORE_THE_HOP) named.delete(name);
  return named;
}

/**
 * A request's headers as its service gets them: without those about the client's connection to the
 * gateway (staysHere), which is not the gateway's to the service: a client's `Connection: close`
 * would close a kept-alive socket to the service after each request. The same object when there
 * is nothing to drop; else a new one (not `delete`: see `without` in auth/stages.ts).
 */
export function endToEndHeaders(headers: http.IncomingHttpHeaders): http.IncomingHttpHeaders {
  const named = headers.connection === undefined ? undefined : namedByConnection(headers.connection);
  for (const name in headers) {
    if (!staysHere(name, named)) continue;
    const kept: http.IncomingHttpHeaders = {};
    for (const other in headers) if (!staysHere(other, named)) kept[other] = headers[other];
    return kept;
  }
  return headers;
}

/** The service was too slow: no response headers, or no end of its response body, in time. */
class UpstreamTimeout extends Error {
  constructor(
    readonly timeoutMs: number,
    readonly stalled: Stalled,
  ) {
    super(`no response ${stalled} within ${timeoutMs} ms`);
    this.name = 'UpstreamTimeout';
  }
}

export interface Deadlines {
  /** For the service: its response headers, once the request is sent, and then its whole body. */
  upstreamMs: number;
  /** For the client: its whole request body, received before anything is sent to the service (request-body.ts). */
  requestBodyMs: number;
}

/**
 * The client span of each proxied request whose call to the service is traced (sampled), ended when
 * the service answers or the call fails. Not a property of the request: a sampled request of another
 * shape than the rest would make the code every request runs through polymorphic.
 */
const clientSpans = new WeakMap<http.IncomingMessage, NonNullable<ReturnType<typeof startClientSpan>>>();

/** What the proxy hands a failure to: answers it (problem+json), or cuts the response under way. Routing chose the upstream: the proxy takes every path it is given. */
export type ProxyNext = (error?: unknown) => void;

/** What the proxy does with the service's answer, and with a failure to get one. */
export interface ProxyEvents {
  /** The service answered: its response, to relay (respond.ts). */
  response: (req: http.IncomingMessage, proxyRes: http.IncomingMessage) => void;
  /** No answer: the service could not be reached (502) or was too slow (504). */
  error: (req: http.IncomingMessage, res: http.ServerResponse, error: Error) => void;
}

/** A proxy to one service: a request's first try, and its retry. */
export interface UpstreamProxy {
  /** Sends the request on a pooled keep-alive connection. */
  send(exchange: Exchange, next: ProxyNext): void;
  /** Sends it again, with the headers its first try set, on a connection of its own (the retry agent). */
  resend(exchange: Exchange, next: ProxyNext): void;
}

/**
 * A proxy to one service (http-proxy-middleware): through `agent` for first tries, `retryAgent` for
 * retries. Paths go through unchanged. An upstream that does not send response headers within
 * `deadlines.upstreamMs` of the whole request is cut off, and one whose body then stalls is cut
 * (the client sees the connection cut). A body the gateway received whole (`body`) is sent on as
 * soon as the proxy has a connection, on a retry as well.
 */
export function upstreamProxy(
  upstream: Upstream,
  options: { deadlines: Deadlines; agent: http.Agent; retryAgent: http.Agent; events: ProxyEvents },
): UpstreamProxy {
  const service = new URL(upstream.url);
  const { events } = options;
  const through = (agent: http.Agent) =>
    createProxyMiddleware<http.IncomingMessage, http.ServerResponse>({
      // A URL, not a string: http-proxy-middleware and httpxy would each parse the string again for every request.
      target: service,
      agent,
      selfHandleResponse: true,
      // Only the plugin that subscribes `on` below. The logger plugin built the target's URL and a log
      // line per response for a logger that writes nothing (the gateway logs requests itself); the
      // debug plugin added two listeners per request that only write to `debug`, off in production.
      ejectPlugins: true,
      plugins: [proxyEventsPlugin],
      on: {
        proxyReq: (proxyReq, req) => {
          superviseUpstreamRequest(proxyReq, options.deadlines.upstreamMs);
          const exchange = exchangeOf(req);
          if (!exchange) return;
          if (proxyReq.socket) noteConnection(exchange, proxyReq.socket);
          // Written before httpxy pipes the (ended) request stream, which then only ends the request.
          if (exchange.body) proxyReq.write(exchange.body);
        },
        proxyRes: (proxyRes, req) => {
          endClientSpan(clientSpans.get(req), proxyRes.statusCode ?? 502);
          events.response(req, proxyRes);
        },
        // httpxy hands failures only to this listener (never to `next`), so it answers here.
        error: (error, req, res) => {
          endClientSpan(clientSpans.get(req), error);
          if ('setHeader' in res) events.error(req, res, error);
        },
      },
    });
  const pooled = through(options.agent);
  const fresh = through(options.retryAgent);
  // With tracing on, each try is a client span of its own, its context (traceparent) on the request: never the client's own.
  const traced = (req: http.IncomingMessage) => {
    const span = startClientSpan(traceOf(req), req.method ?? 'GET', service, req.url ?? '/', req.headers);
    if (span) clientSpans.set(req, span);
  };
  return {
    send(exchange, next) {
      const { req, res } = exchange;
      forwardedHeaders(exchange);
      traced(req);
      pooled(req, res, next);
    },
    resend(exchange, next) {
      traced(exchange.req);
      fresh(exchange.req, exchange.res, next);
    },
  };
}

/**
 * What the service hears besides the request: its end-to-end headers, its id, and the client's
 * address (as a cache fill sends them). Set on the request's headers, which the proxy copies: no
 * header set on its request after that (nor httpxy's xfwd, which also added X-Forwarded-Port,
 * -Proto and -Host). A body received whole goes with its length: the proxy frames it anew.
 */
function forwardedHeaders(exchange: Exchange): void {
  const { req } = exchange;
  req.headers = endToEndHeaders(req.headers);
  if (exchange.body) req.headers['content-length'] = String(exchange.body.length);
  req.headers[REQUEST_ID_FIELD] = exchange.requestId;
  const chain = forwardedFor(req.headers['x-forwarded-for'], req.socket.remoteAddress);
  if (chain === undefined) delete req.headers['x-forwarded-for'];
  else req.headers['x-forwarded-for'] = chain;
}

/** Notes the connection a try goes on, and what it had read so far: whether a response began, should the try fail (upstream-retry.ts). */
function noteConnection(tried: ConnectionNote, socket: Socket): void {
  tried.upstreamSocket = socket;
  tried.upstreamBytesRead = socket.bytesRead;
}

type ConnectionNote = Pick<Exchange, 'upstreamSocket' | 'upstreamBytesRead'>;

/**
 * X-Forwarded-For as the service gets it: what came in, with the address the gateway heard the
 * request from added at the end, as every proxy does; the service trusts the last entry, never a
 * list the client wrote alone. A client that has hung up has no address any more (Node asks the
 * live socket): its request still goes on (a fill serves everyone collapsed on it) with no
 * X-Forwarded-For at all, since what it wrote itself is not to be trusted alone.
 */
function forwardedFor(received: string | string[] | undefined, peer: string | undefined): string | undefined {
  if (peer === undefined) return undefined;
  const chain = Array.isArray(received) ? received.join(', ') : received;
  return chain ? `${chain}, ${peer}` : peer;
}

/**
 * What every request to a service gets (its agent retires aged sockets: upstream-agent.ts): two
 * deadlines, both the service's (the client's body has been received whole before it is sent):
 * `upstreamMs` for its response headers, and `upstreamMs` more for its body (UpstreamTimeout).
 * Whichever passes destroys the request, which fails it and its response.
 */
function superviseUpstreamRequest(request: http.ClientRequest, upstreamMs: number): void {
  let stalled: 'headers' | 'body' = 'headers';
  const deadline = setTimeout(() => request.destroy(new UpstreamTimeout(upstreamMs, stalled)), upstreamMs);
  // `on`, not `once`, for events that come once anyway: `once` makes a wrapper and a bound
  // function per listener, for every request proxied.
  let responded = false;
  request.on('response', (response: http.IncomingMessage) => {
    responded = true;
    if (response.complete) {
      clearTimeout(deadline);
      return;
    }
    stalled = 'body';
    deadline.refresh();
    response.on('close', () => clearTimeout(deadline));
  });
  request.on('close', () => {
    if (!responded) clearTimeout(deadline);
  });
}

export interface FetchedResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

// End-to-end request headers a cache fill does not pass on: the gateway fetches the full
// representation and answers conditionals itself.
const NOT_FORWARDED = new Set(['host', 'if-none-match', 'if-modified-since', 'content-length']);

/**
 * A plain GET of `path` from the service, body in memory: what the cache stores and shares. Traced
 * as a call made on behalf of the request whose context is `trace`.
 */
export function fetchFromUpstream(
  upstream: Upstream,
  request: { path: string; headers: http.IncomingHttpHeaders; requestId: string; remoteAddress?: string; trace: RequestTrace | undefined },
  options: { deadlines: Deadlines; agent: http.Agent; tried?: ConnectionNote },
): Promise<FetchedResponse> {
  const headers: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(endToEndHeaders(request.headers))) if (!NOT_FORWARDED.has(name)) headers[name] = value;
  const chain = forwardedFor(request.headers['x-forwarded-for'], request.remoteAddress);
  if (chain !== undefined) headers['x-forwarded-for'] = chain;
  headers[REQUEST_ID_FIELD] = request.requestId;
  const get = upstream.url.startsWith('https:') ? https.get : http.get;
  const target = new URL(request.path, upstream.url);
  const span = startClientSpan(request.trace, 'GET', target, request.path, headers);
  const fetched = new Promise<FetchedResponse>((resolve, reject) => {
    const outgoing = get(target, { agent: options.agent, headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.once('end', () => resolve({ status: response.statusCode ?? 502, headers: response.headers, body: Buffer.concat(chunks) }));
      response.once('error', reject);
      // A body cut short (the body deadline, or the service going away) fails the fetch: never a hang.
      response.once('close', () => {
        if (!response.complete) reject(new UpstreamTimeout(options.deadlines.upstreamMs, 'body'));
      });
    });
    superviseUpstreamRequest(outgoing, options.deadlines.upstreamMs);
    const { tried } = options;
    if (tried) outgoing.once('socket', (socket: Socket) => noteConnection(tried, socket));
    outgoing.once('error', reject);
  });
  if (span) fetched.then((response) => endClientSpan(span, response.status), (error: Error) => endClientSpan(span, error));
  return fetched;
}

/** A service's timeout is a 504; anything else that stops the gateway from getting a response is a 502. */
export function upstreamProblem(upstream: string, error: Error): HttpProblem {
  return error instanceof UpstreamTimeout ? upstreamTimedOut(upstream, error.stalled, error.timeoutMs) : upstreamUnreachable(upstream);
}

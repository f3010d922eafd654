import http from 'node:http';
import https from 'node:https';
import { observationOf } from '@app/shared/platform/http/observation';
import { writeProblem } from '@app/shared/platform/http/responses';
import { HttpProblem } from '@app/shared/platform/problem';
import { endClientSpan, startClientSpan } from '@app/shared/telemetry/spans';
import { createProxyMiddleware, proxyEventsPlugin } from 'http-proxy-middleware';
import { retireAgedSocket } from './upstream-agent.js';

export interface Upstream {
  /** A name for logs and problem details; never a host name. */
  name: string;
  url: string;
  /** The path prefix it serves, e.g. `/api/users` (and everything below it). */
  prefix: string;
}

/** Whether the upstream serves `path`: its prefix and everything below it (not `/api/usersx`). */
export const servesPath = ({ prefix }: Pick<Upstream, 'prefix'>, path: string) =>
  path.startsWith(prefix) && (path.length === prefix.length || path.charCodeAt(prefix.length) === 0x2f); // '/'; no string made per request

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

/** Response headers of a service the gateway does not relay: hop-by-hop ones, and the request id it sets itself. */
const NOT_RELAYED = new Set([...HOP_BY_HOP, 'x-request-id']);

const OWN_HEADERS = Symbol('own headers');
type WithOwnHeaders = http.ServerResponse & { [OWN_HEADERS]?: string[] };

/**
 * The gateway's own headers for a proxied response (`[name, value, …]`), kept until the response
 * is written rather than set on it: the service's answer then goes out with them in one
 * `writeHead`, which Node writes without building a header map (one header set before makes it
 * merge them all into its map). A response the gateway writes itself (a problem) takes them
 * first (`setOwnHeaders`).
 */
export function keepOwnHeaders(res: http.ServerResponse, headers: string[]): void {
  (res as WithOwnHeaders)[OWN_HEADERS] = headers;
}

/** Sets the headers `keepOwnHeaders` kept on the response itself: before the gateway answers it. */
export function setOwnHeaders(res: http.ServerResponse): void {
  const own = (res as WithOwnHeaders)[OWN_HEADERS];
  if (!own) return;
  (res as WithOwnHeaders)[OWN_HEADERS] = undefined;
  for (let i = 0; i < own.length; i += 2) res.setHeader(own[i] as string, own[i + 1] as string);
}

/**
 * The service's response to the client: its status and headers (but NOT_RELAYED) in one
 * `writeHead`, from the raw header lines (Node builds a response's header object only when asked),
 * then its body.
 */
function relay(proxyRes: http.IncomingMessage, res: http.ServerResponse): void {
  if (res.headersSent) {
    // The gateway already answered (the request body deadline passed): the service's answer is moot.
    proxyRes.resume();
    return;
  }
  const raw = proxyRes.rawHeaders;
  const headers: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    if (!NOT_RELAYED.has(name.toLowerCase())) headers.push(name, raw[i + 1] as string);
  }
  const own = (res as WithOwnHeaders)[OWN_HEADERS];
  if (own) for (const field of own) headers.push(field);
  res.writeHead(proxyRes.statusCode ?? 502, headers);
  proxyRes.once('error', () => res.destroy());
  proxyRes.pipe(res);
}

/**
 * The client span of each proxied request whose call to the service is traced (sampled), ended when
 * the service answers or the call fails. Not a property of the request: a sampled request of another
 * shape than the rest would make the code every request runs through polymorphic.
 */
const clientSpans = new WeakMap<http.IncomingMessage, NonNullable<ReturnType<typeof startClientSpan>>>();

const RECEIVED_BODY = Symbol('received body');
type WithReceivedBody = http.IncomingMessage & { [RECEIVED_BODY]?: Buffer };

/**
 * A request body the gateway received whole before it took a slot to the service (proxy-path.ts):
 * the proxy sends it on as soon as it has a connection; the request stream itself has ended.
 */
export const receivedBodies = {
  set: (req: http.IncomingMessage, body: Buffer) => {
    (req as WithReceivedBody)[RECEIVED_BODY] = body;
    // The body is here: the service has nothing to agree to (and httpxy skips `proxyReq` for an Expect).
    if (req.headers.expect !== undefined) delete req.headers.expect;
  },
  get: (req: http.IncomingMessage): Buffer | undefined => (req as WithReceivedBody)[RECEIVED_BODY],
};

/** What the proxy hands a failure to: answers it (problem+json), or cuts the response under way. */
export type ProxyNext = (error?: unknown) => void;

/**
 * A keep-alive proxy to one service. Paths go through unchanged. A request body that has not
 * arrived within `deadlines.requestBodyMs` is the client's fault (408, connection closed); an
 * upstream that does not send response headers within `deadlines.upstreamMs` of the whole request
 * is cut off (504), and one whose body then stalls is cut (the client sees the connection cut);
 * one that cannot be reached is a 502.
 * `onSettled` runs once the request is settled (the service answered with `status`, or it failed:
 * 502) and before the client hears back: the cache invalidates writes there (a promise to wait
 * for; undefined when there is nothing to do).
 * A plain `(req, res, next)` handler on Node's own request and response: express mounts it, and so
 * does the proxy path before express (proxy-path.ts). The request must have been observed
 * (`observeRequest`), for its request id and logger.
 */
export function upstreamProxy(
  upstream: Upstream,
  options: { deadlines: Deadlines; agent: http.Agent; onSettled?: (req: http.IncomingMessage, status: number) => Promise<void> | undefined },
): (req: http.IncomingMessage, res: http.ServerResponse, next: ProxyNext) => void {
  const service = new URL(upstream.url);
  const proxy = createProxyMiddleware<http.IncomingMessage, http.ServerResponse>({
    // A URL, not a string: http-proxy-middleware and httpxy would each parse the string again for every request.
    target: service,
    agent: options.agent,
    selfHandleResponse: true,
    pathFilter: (path) => servesPath(upstream, path),
    // Only the plugin that subscribes `on` below. The logger plugin built the target's URL and a log
    // line per response for a logger that writes nothing (the gateway logs requests itself); the
    // debug plugin added two listeners per request that only write to `debug`, off in production.
    ejectPlugins: true,
    plugins: [proxyEventsPlugin],
    on: {
      proxyReq: (proxyReq, req) => {
        superviseUpstreamRequest(proxyReq, options.deadlines, req);
        // Written before httpxy pipes the (ended) request stream, which then only ends the request.
        const body = receivedBodies.get(req);
        if (body) proxyReq.write(body);
      },
      proxyRes: (proxyRes, req, res) => {
        endClientSpan(clientSpans.get(req), proxyRes.statusCode ?? 502);
        const settled = options.onSettled?.(req, proxyRes.statusCode ?? 502);
        if (settled) void settled.then(() => relay(proxyRes, res));
        else relay(proxyRes, res);
      },
      // httpxy hands failures only to this listener (never to `next`), so it answers here.
      error: async (error, req, res) => {
        endClientSpan(clientSpans.get(req), error);
        if (!('setHeader' in res)) return;
        observationOf(res)?.log.warn({ upstream: upstream.name, err: error }, 'upstream request failed');
        await options.onSettled?.(req, 502);
        if (res.headersSent) res.destroy();
        else {
          setOwnHeaders(res);
          // The client's own body is still (slowly) arriving: this connection cannot be reused.
          if (error instanceof RequestBodyTimeout) res.setHeader('Connection', 'close');
          writeProblem(res, pathOf(req.url), upstreamProblem(upstream.name, error));
        }
      },
    },
  });
  return (req, res, next) => {
    // What the service hears besides the request: its id, and the client's address (as a cache fill
    // sends them). Set on the request's headers, which the proxy copies: no header set on its
    // request after that (nor httpxy's xfwd, which also added X-Forwarded-Port, -Proto and -Host).
    const requestId = observationOf(res)?.requestId;
    if (requestId !== undefined) req.headers['x-request-id'] = requestId;
    const chain = forwardedFor(req.headers['x-forwarded-for'], req.socket.remoteAddress);
    if (chain === undefined) delete req.headers['x-forwarded-for'];
    else req.headers['x-forwarded-for'] = chain;
    // And, with tracing on, this call's trace context (traceparent): never the client's own.
    const span = startClientSpan(req.method ?? 'GET', service, req.url ?? '/', req.headers);
    if (span) clientSpans.set(req, span);
    proxy(req, res, next);
  };
}

const pathOf = (url: string | undefined) => (url ?? '/').split('?', 1)[0] ?? '/';

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
 * What every request to a service gets: its socket retired once old (see upstream-agent.ts) and
 * three deadlines, each blaming whoever is late. While the client's body (`incoming`) is still
 * arriving, only the client is waited for (RequestBodyTimeout after `requestBodyMs`); then the
 * service has `upstreamMs` for its response headers, and `upstreamMs` more for its body
 * (UpstreamTimeout). Whichever passes destroys the request, which fails it and its response.
 */
function superviseUpstreamRequest(request: http.ClientRequest, deadlines: Deadlines, incoming?: http.IncomingMessage): void {
  retireAgedSocket(request);
  let stalled: 'request body' | 'headers' | 'body';
  let deadline: NodeJS.Timeout | undefined;
  let deadlineMs = 0;
  const cut = () => request.destroy(stalled === 'request body' ? new RequestBodyTimeout(deadlines.requestBodyMs) : new UpstreamTimeout(deadlines.upstreamMs, stalled));
  // One timer, restarted from the next phase on when its allowance is the same (headers, then body).
  const cutAfter = (phase: typeof stalled) => {
    stalled = phase;
    const ms = phase === 'request body' ? deadlines.requestBodyMs : deadlines.upstreamMs;
    if (deadline !== undefined && ms === deadlineMs) deadline.refresh();
    else {
      clearTimeout(deadline);
      deadline = setTimeout(cut, ms);
      deadlineMs = ms;
    }
  };
  if (!incoming || incoming.complete) cutAfter('headers');
  else {
    cutAfter('request body');
    incoming.once('end', () => {
      if (!request.destroyed) cutAfter('headers');
    });
  }
  let responded = false;
  request.once('response', (response: http.IncomingMessage) => {
    responded = true;
    if (response.complete) clearTimeout(deadline);
    else cutAfter('body');
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
  const chain = forwardedFor(request.headers['x-forwarded-for'], request.remoteAddress);
  if (chain !== undefined) headers['x-forwarded-for'] = chain;
  headers['x-request-id'] = request.requestId;
  const get = upstream.url.startsWith('https:') ? https.get : http.get;
  const target = new URL(request.path, upstream.url);
  const span = startClientSpan('GET', target, request.path, headers);
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
    superviseUpstreamRequest(outgoing, options.deadlines);
    outgoing.once('error', reject);
  });
  if (span) fetched.then((response) => endClientSpan(span, response.status), (error: Error) => endClientSpan(span, error));
  return fetched;
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

import type { IncomingMessage, ServerResponse } from 'node:http';
import { answerFailure } from '@app/shared/platform/http/failures';
import { REQUEST_ID_FIELD, REQUEST_ID_HEADER } from '@app/shared/platform/http/headers';
import { NOSNIFF, writeProblem } from '@app/shared/platform/http/responses';
import type { HttpProblem } from '@app/shared/platform/problem';
import { etagMatches } from '@app/shared/resource/rules';
import { pipeline } from 'node:stream';
import { compressor, isCompressible, negotiateCoding, variantHeaders, type Coding } from './cache/compression.js';
import { headerList, type CachedResponse, type Representation } from './cache/entry.js';
import type { Exchange } from './exchange.js';
import { hasBody } from './proxy/request-body.js';
import { HOP_BY_HOP } from './proxy/upstream.js';

/** A response the gateway holds whole: an entry of its cache, or a fill it fetched for it. */
export type HeldResponse = Pick<CachedResponse, 'status' | 'headers' | 'body' | 'headerList' | 'variants'>;

/**
 * A feature's side of every response (Envoy's encode side): it adds to `headers` (name, value, …)
 * what its stages decided about `exchange`, on whatever answers the request.
 */
export type ResponseHeaders = (exchange: Exchange, headers: string[]) => void;

/** Response headers of a service the gateway does not relay: hop-by-hop ones, and those it sets itself. */
const NOT_RELAYED = new Set([...HOP_BY_HOP, REQUEST_ID_FIELD, NOSNIFF[0].toLowerCase()]);

/** The headers a relayed response compressed on its way changes (its length is then unknown: chunked). */
const RECODED = new Set(['content-length', 'content-encoding', 'vary', 'etag']);
const BOTH_CODINGS = { br: true, gzip: true } as const;

const ended = (): void => undefined;

/** A relayed response and the client's response it goes to, each pointing at the other (see `relay`). */
const RELAYED = Symbol('relayed service response');
const RELAYING = Symbol('client response relaying it');
type RelayingResponse = ServerResponse & { [RELAYED]?: IncomingMessage };
type RelayedResponse = IncomingMessage & { [RELAYING]?: ServerResponse };

function letGoOfRelayed(this: RelayingResponse): void {
  const relayed = this[RELAYED];
  if (relayed && !relayed.complete) relayed.destroy();
}

function cutRelaying(this: RelayedResponse): void {
  this[RELAYING]?.destroy();
}

/**
 * Whether a body the client declared was never read: the request was answered (refused, mostly)
 * before it. Its connection closes once the answer is out, instead of Node reading a body that
 * nobody wants and that the client may trickle in for as long as it likes.
 */
const bodyUnread = (exchange: Exchange): boolean => exchange.body === undefined && !exchange.req.complete && hasBody(exchange.req);

/**
 * The coding to relay a service's answer to a GET or HEAD in: the client's best when the answer is a 200
 * worth compressing (the cache compresses what it keeps; this is for reads it took no part in).
 */
function relayCoding(acceptEncoding: string | undefined, proxyRes: IncomingMessage): Coding {
  if (acceptEncoding === undefined || proxyRes.statusCode !== 200) return 'identity';
  const declared = proxyRes.headers['content-length'];
  if (!isCompressible(proxyRes.headers as Record<string, string>, declared === undefined ? Infinity : Number(declared))) return 'identity';
  return negotiateCoding(acceptEncoding, BOTH_CODINGS);
}

/**
 * The one writer of the gateway's responses: cache hits and fills, relayed service responses,
 * problems, and the gateway's own endpoints. It adds the gateway's own headers, and nothing else
 * does: `X-Request-Id`, `X-Content-Type-Options`, each feature's (its `responseHeaders`: X-Cache
 * from cache/, the RateLimit headers from rate-limits/), those a stage put in
 * `exchange.responseHeaders`, and `Connection: close` when the request's body may still be
 * arriving or was never read.
 * A response it writes whole goes out in one `writeHead` of a header list: Node then writes it
 * without building a header map, as for a bare `node:http` server.
 */
export class ResponseWriter {
  constructor(
    /** Each feature's headers, in the feature list's order (filled once the features are made, before any request). */
    private readonly featureHeaders: readonly ResponseHeaders[],
  ) {}

  /**
   * Answers a GET or HEAD from a response the gateway holds, in the coding the client takes best
   * among its variants (compressed once, when it was fetched): 304 when If-None-Match matches its
   * ETag, no body for HEAD. `setCookie` is for the one client whose request fetched it.
   */
  held(exchange: Exchange, held: HeldResponse, options: { ageSeconds?: number; setCookie?: string[] } = {}): void {
    const { req, res } = exchange;
    const coding = held.variants ? negotiateCoding(req.headers['accept-encoding'], held.variants) : 'identity';
    const chosen = coding === 'identity' ? held : (held.variants?.[coding] as Representation);
    const { etag } = chosen.headers;
    const notModified = held.status === 200 && etag !== undefined && etagMatches(req.headers['if-none-match'], etag, 'weak');
    const stored = chosen.headerList ?? headerList(chosen.headers);
    const headers = notModified ? stored.filter((_value, i) => stored[i - (i % 2)] !== 'content-type') : [...stored];
    if (options.ageSeconds !== undefined) headers.push('Age', String(options.ageSeconds));
    if (options.setCookie) for (const cookie of options.setCookie) headers.push('Set-Cookie', cookie);
    this.#addOwn(exchange, headers);
    if (notModified) {
      res.writeHead(304, headers).end();
      return;
    }
    headers.push('Content-Length', String(chosen.body.length));
    res.writeHead(held.status, headers);
    res.end(req.method === 'HEAD' ? undefined : chosen.body);
  }

  /**
   * A service's response, relayed: its status and headers (but NOT_RELAYED) with the gateway's own
   * in one `writeHead`, from the raw header lines (Node builds a response's header object only when
   * asked), then its body as it streams in.
   */
  relay(exchange: Exchange, proxyRes: IncomingMessage): void {
    const { res } = exchange;
    if (res.headersSent) {
      // The gateway already answered (the request body deadline passed): the service's answer is moot.
      proxyRes.resume();
      return;
    }
    // HEAD as GET: the same headers, the body (compressed or not) dropped by Node.
    const coding = exchange.kind === 'read' ? relayCoding(exchange.req.headers['accept-encoding'], proxyRes) : 'identity';
    const raw = proxyRes.rawHeaders;
    const headers: string[] = [];
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i] as string;
      const lower = name.toLowerCase();
      if (NOT_RELAYED.has(lower) || (coding !== 'identity' && RECODED.has(lower))) continue;
      headers.push(name, raw[i + 1] as string);
    }
    if (coding !== 'identity') {
      const recoded = variantHeaders(proxyRes.headers as Record<string, string>, coding);
      for (const name of RECODED) if (recoded[name] !== undefined) headers.push(name, recoded[name]);
    }
    this.#addOwn(exchange, headers);
    res.writeHead(proxyRes.statusCode ?? 502, headers);
    if (coding !== 'identity') {
      // pipeline destroys every stream of it when one fails or closes early.
      pipeline(proxyRes, compressor(coding), res, ended);
      return;
    }
    // What pipeline does, with one listener shared by every response each way and no closure (the
    // proxy path's hot loop): a client that goes lets go of the service's response at once, which
    // gives its socket back; a service's response that fails cuts the client's.
    (res as RelayingResponse)[RELAYED] = proxyRes;
    res.on('close', letGoOfRelayed);
    (proxyRes as RelayedResponse)[RELAYING] = res;
    proxyRes.on('error', cutRelaying);
    proxyRes.pipe(res);
  }

  /** Answers with `problem` (problem+json), an expected refusal: not logged beyond the request's line. */
  problem(exchange: Exchange, problem: HttpProblem): void {
    this.ownHeaders(exchange);
    writeProblem(exchange.res, exchange.path, problem);
  }

  /**
   * Answers a request that failed with `error`: its problem when it is one, a 500 otherwise; a 5xx
   * is logged with its cause. A response already under way is cut, so the client sees the failure.
   * Never throws: every path that fails ends here, in a response or a closed connection.
   */
  failure(exchange: Exchange, error: unknown): void {
    try {
      if (!exchange.res.headersSent) this.ownHeaders(exchange);
      answerFailure(exchange.res, exchange.path, error, exchange.observed.log);
    } catch (failed) {
      // The last resort, so that it never throws: the client sees its connection cut.
      exchange.observed.log.error({ err: failed, cause: error }, 'could not answer a failed request');
      exchange.res.destroy();
    }
  }

  /** Sets the gateway's own headers on the response, for a writer of its own (express, the CORS handler). */
  ownHeaders(exchange: Exchange): void {
    const headers: string[] = [];
    this.#addOwn(exchange, headers);
    for (let i = 0; i < headers.length; i += 2) exchange.res.setHeader(headers[i] as string, headers[i + 1] as string);
  }

  #addOwn(exchange: Exchange, headers: string[]): void {
    headers.push(REQUEST_ID_HEADER, exchange.requestId, NOSNIFF[0], NOSNIFF[1]);
    for (const add of this.featureHeaders) add(exchange, headers);
    if (exchange.responseHeaders) headers.push(...exchange.responseHeaders);
    if (exchange.closeConnection || bodyUnread(exchange)) headers.push('Connection', 'close');
  }
}
